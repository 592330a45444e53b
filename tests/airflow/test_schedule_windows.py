"""Windows of consecutive scheduled runs tile time, as instants, for every timetable kind, in every zone
and across daylight saving changes; backfill chunks tile their range (pure: no Spark).

The runs are Airflow's own: the scheduler's timetable (the DAG serialized and read back) asked with
``next_dagrun_info``, run after run. Each run's window goes through the provider's path, as the
operator takes it: ``operators.context.run_context_of`` on the run's context, then
``model.window.resolve_window``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pendulum
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError, backfill_windows
from airflow_provider_deltamerge.model.incremental import Incremental
from airflow_provider_deltamerge.model.run import RunContext
from airflow_provider_deltamerge.model.window import resolve_window
from airflow_provider_deltamerge.operators.context import run_context_of, schedule_period_start
from tests.airflow_compat import dag_serialization, drifting_timetable, timetable_classes

UTC = timezone.utc
ZONES = ["UTC", "Europe/Amsterdam", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu"]
FAR_FUTURE = datetime(2100, 1, 1, tzinfo=UTC)
INCREMENTAL = Incremental("ts")


def offset_changes(zone: str, year: int = 2024) -> list[datetime]:
    """The instants of `year` at which `zone`'s UTC offset changes (none for UTC and Kathmandu)."""
    tz, moment, changes = ZoneInfo(zone), datetime(year, 1, 1, tzinfo=UTC), []
    while moment.year == year:
        following = moment + timedelta(minutes=30)
        if moment.astimezone(tz).utcoffset() != following.astimezone(tz).utcoffset():
            changes.append(following)
        moment = following
    return changes or [datetime(year, 3, 31, 1, tzinfo=UTC)]


TRANSITIONS = {zone: offset_changes(zone) for zone in ZONES}


def timetable(kind: str, zone: str):
    """One timetable of each kind the provider supports, in `zone` where it has one."""
    t = timetable_classes()
    crons = {
        "hourly": "0 * * * *",
        "daily-0": "0 0 * * *",
        "daily-1": "0 1 * * *",
        "daily-2": "0 2 * * *",
        "daily-3": "0 3 * * *",
        "daily-1:30": "30 1 * * *",
        "weekly": "0 2 * * 0",
        "monthly": "0 0 1 * *",
    }
    if kind in crons:
        return t.CronTriggerTimetable(crons[kind], timezone=zone)
    return {
        "cron-interval-1-day": lambda: t.CronTriggerTimetable(
            "0 2 * * *", timezone=zone, interval=timedelta(days=1)
        ),
        "multiple-cron": lambda: t.MultipleCronTriggerTimetable(
            "0 2 * * *", "30 1 * * *", "15 */6 * * *", timezone=zone
        ),
        "multiple-cron-interval": lambda: t.MultipleCronTriggerTimetable(
            "0 0 * * *", "0 12 * * 1-5", timezone=zone, interval=timedelta(hours=3)
        ),
        "delta-trigger": lambda: t.DeltaTriggerTimetable(timedelta(hours=5)),
        "delta-trigger-day": lambda: t.DeltaTriggerTimetable(timedelta(days=1)),
        "delta-data-interval": lambda: t.DeltaDataIntervalTimetable(timedelta(hours=7)),
        "cron-data-interval": lambda: t.CronDataIntervalTimetable("0 2 * * *", timezone=zone),
        "cron-data-interval-hourly": lambda: t.CronDataIntervalTimetable("30 * * * *", timezone=zone),
    }[kind]()


KINDS = [
    "hourly",
    "daily-0",
    "daily-1",
    "daily-2",
    "daily-3",
    "daily-1:30",
    "weekly",
    "monthly",
    "cron-interval-1-day",
    "multiple-cron",
    "multiple-cron-interval",
    "delta-trigger",
    "delta-trigger-day",
    "delta-data-interval",
    "cron-data-interval",
    "cron-data-interval-hourly",
]


def dag_of(schedule, start: datetime):
    from airflow.sdk import DAG

    return DAG("windows_across_dst", schedule=schedule, start_date=start, catchup=True)


def scheduled_runs(dag, start: datetime, until: datetime) -> list:
    """The data intervals of the runs the scheduler makes from `start` until `until` (at least two)."""
    from airflow.timetables.base import TimeRestriction

    serialization = dag_serialization()
    scheduler_timetable = serialization.from_dict(serialization.to_dict(dag)).timetable
    restriction = TimeRestriction(earliest=pendulum.instance(start), latest=None, catchup=True)
    runs, last = [], None
    while len(runs) < 2 or runs[-1].end < until:
        info = scheduler_timetable.next_dagrun_info(
            last_automated_data_interval=last, restriction=restriction
        )
        runs.append(info.data_interval)
        last = info.data_interval
    return runs


def airflow_context(interval, run_type: str = "scheduled") -> dict:
    ti = SimpleNamespace(dag_id="d", task_id="load", run_id=f"{run_type}__{interval.end}", try_number=1)
    return {
        "ti": ti,
        "dag_run": SimpleNamespace(run_type=SimpleNamespace(value=run_type), conf={}),
        "data_interval_start": interval.start,
        "data_interval_end": interval.end,
        "logical_date": interval.end,
    }


def window_of(dag, interval):
    """The window an operator of `dag` loads for the run with this data interval."""
    run_context = run_context_of(airflow_context(interval), dag.timetable, {})
    window = resolve_window(
        INCREMENTAL,
        cursor_type="timestamp",
        data_interval=(interval.start, interval.end),
        run_context=RunContext(**run_context),
        stored_state=None,
        now=FAR_FUTURE,
    )
    return window.start, window.end


def assert_tiles(windows: list[tuple[datetime, datetime]], start: datetime, end: datetime) -> None:
    assert windows[0][0] == start and windows[-1][1] == end
    assert all(a < b for a, b in windows), windows
    gaps = [(one, two) for one, two in zip(windows, windows[1:], strict=False) if one[1] != two[0]]
    assert not gaps, gaps


@settings(max_examples=60, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    kind=st.sampled_from(KINDS),
    transition=st.integers(0, 3),
    before=st.integers(0, 3 * 24 * 60),
    days=st.integers(1, 4),
)
def test_windows_of_consecutive_runs_tile_time_across_daylight_saving(zone, kind, transition, before, days):
    changes = TRANSITIONS[zone]
    change = changes[transition % len(changes)]
    start = change - timedelta(minutes=before)
    span = timedelta(days=days * (35 if kind == "monthly" else 8 if kind == "weekly" else 1))
    dag = dag_of(timetable(kind, zone), pendulum.instance(start).in_timezone(zone))
    runs = scheduled_runs(dag, start, start + span)
    windows = [window_of(dag, run) for run in runs]
    assert [end for _, end in windows] == [run.end for run in runs]  # each ends where its run does
    assert_tiles(windows, windows[0][0], runs[-1].end)


@pytest.mark.parametrize(
    ("zone", "schedule", "run_ends", "period_starts"),
    [
        (  # the example: 02:00 does not exist on 2024-03-31, the run fires at 03:00+02:00
            "Europe/Amsterdam",
            "0 2 * * *",
            ["2024-03-31T01:00:00Z", "2024-04-01T00:00:00Z"],
            ["2024-03-30T01:00:00Z", "2024-03-31T01:00:00Z"],
        ),
        (  # fall back: the day is 25 hours long
            "Europe/Amsterdam",
            "0 2 * * *",
            ["2024-10-27T01:00:00Z"],
            ["2024-10-26T00:00:00Z"],
        ),
        ("America/New_York", "30 1 * * *", ["2024-03-10T06:30:00Z"], ["2024-03-09T06:30:00Z"]),
        (  # fall back: 01:30 happens twice; Airflow runs once, at the second, 25 hours after the run before
            "America/New_York",
            "30 1 * * *",
            ["2024-11-03T06:30:00Z", "2024-11-04T06:30:00Z"],
            ["2024-11-02T05:30:00Z", "2024-11-03T06:30:00Z"],
        ),
    ],
)
def test_the_period_before_a_run_on_a_change_day_is_the_time_since_the_run_before(
    zone, schedule, run_ends, period_starts
):
    trigger = timetable_classes().CronTriggerTimetable(schedule, timezone=zone)
    found = [schedule_period_start(trigger, pendulum.parse(end)) for end in run_ends]
    assert found == [datetime.fromisoformat(start) for start in period_starts]


def test_a_timetable_that_cannot_tell_its_previous_run_is_refused_with_what_to_do():
    from airflow.timetables.base import DataInterval

    dag = dag_of(drifting_timetable(), datetime(2024, 1, 1, tzinfo=UTC))
    end = pendulum.datetime(2024, 1, 2, tz="UTC")
    with pytest.raises(ConfigError) as refused:
        schedule_period_start(dag.timetable, end)
    assert refused.value.argument == "timetable"
    assert "EveryFiveHoursFromWhereverAsked" in str(refused.value)
    assert "give the task its own window (`window=`)" in str(refused.value)

    # The operator leaves the period out, and a window that needs it is refused, never guessed
    interval = DataInterval.exact(end)
    assert run_context_of(airflow_context(interval), dag.timetable, {})["period_start"] is None
    with pytest.raises(ConfigError) as unknown:
        window_of(dag, interval)
    assert unknown.value.argument == "run_context.period_start"
    assert "Give the task its own window (`window=`)" in str(unknown.value)


def test_a_first_event_has_no_period_but_later_events_tile():
    from airflow.timetables.events import EventsTimetable

    zone = pendulum.timezone("Europe/Amsterdam")
    events = [pendulum.datetime(2024, 3, day, 2, 30, tz=zone) for day in (29, 30, 31)] + [
        pendulum.datetime(2024, 4, 1, 2, 30, tz=zone)
    ]
    dag = dag_of(EventsTimetable(event_dates=events), events[0])
    runs = scheduled_runs(dag, events[0], events[-1])
    with pytest.raises(ConfigError):
        window_of(dag, runs[0])
    windows = [window_of(dag, run) for run in runs[1:]]
    assert_tiles(windows, runs[0].end, runs[-1].end)


def test_a_manual_run_asks_no_period():
    trigger = timetable_classes().CronTriggerTimetable("0 2 * * *", timezone="Europe/Amsterdam")
    off_schedule = SimpleNamespace(start=pendulum.datetime(2024, 3, 31, 9, 17), end=None)
    off_schedule.end = off_schedule.start
    context = airflow_context(off_schedule, run_type="manual")
    assert run_context_of(context, trigger, {})["period_start"] is None


# -- backfill chunks ---------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    transition=st.integers(0, 3),
    before=st.integers(0, 5 * 24 * 60),
    length=st.integers(1, 10 * 24 * 60),
    every=st.sampled_from(["1 day", "2 days", "1 week", "6 hours", "90 minutes", timedelta(days=1)]),
    given_as=st.sampled_from(["pendulum", "zoneinfo", "iso", "naive"]),
)
def test_backfill_chunks_tile_their_range_in_any_zone(zone, transition, before, length, every, given_as):
    changes = TRANSITIONS[zone]
    start = changes[transition % len(changes)] - timedelta(minutes=before)
    end = start + timedelta(minutes=length)
    bounds = {
        "pendulum": lambda moment: pendulum.instance(moment).in_timezone(zone),
        "zoneinfo": lambda moment: moment.astimezone(ZoneInfo(zone)),
        "iso": lambda moment: moment.astimezone(ZoneInfo(zone)).isoformat(),
        "naive": lambda moment: moment.replace(tzinfo=None),  # read as UTC
    }[given_as]
    chunks = backfill_windows(bounds(start), bounds(end), every)
    assert all(type(bound) is datetime and bound.utcoffset() == timedelta(0) for c in chunks for bound in c)
    assert_tiles(chunks, start, end)
    step = every if isinstance(every, timedelta) else None
    if given_as in ("pendulum", "zoneinfo") and (step or "day" in every or "week" in every):
        # calendar days in the zone: every chunk but the last starts at the start's local time of day,
        # where that time exists on its day
        tz = ZoneInfo(zone)
        local = start.astimezone(tz)
        for chunk_start, _ in chunks[1:]:
            there = chunk_start.astimezone(tz)
            wall = there.replace(hour=local.hour, minute=local.minute, tzinfo=None).replace(tzinfo=tz)
            if wall.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall.replace(tzinfo=None):
                assert (there.hour, there.minute) == (local.hour, local.minute), (chunk_start, local)


def test_daily_backfill_chunks_in_amsterdam_are_its_calendar_days():
    zone = pendulum.timezone("Europe/Amsterdam")
    chunks = backfill_windows(
        pendulum.datetime(2024, 3, 30, tz=zone), pendulum.datetime(2024, 4, 1, tz=zone), "1 day"
    )
    assert chunks == [
        (datetime(2024, 3, 29, 23, tzinfo=UTC), datetime(2024, 3, 30, 23, tzinfo=UTC)),
        (datetime(2024, 3, 30, 23, tzinfo=UTC), datetime(2024, 3, 31, 22, tzinfo=UTC)),  # 23 hours
    ]
    hours = backfill_windows(
        pendulum.datetime(2024, 10, 27, tz=zone), pendulum.datetime(2024, 10, 27, 4, tz=zone), "1 hour"
    )
    assert len(hours) == 5  # the fall-back hour happens twice: five hours of elapsed time
