"""Load windows from Airflow runs through run_load: dag_run.conf ranges, real and zero-width intervals,
manual runs from the cursor, windows of real Airflow 3 weekly DAGs, stateless re-runs, callable sources.

The run context is what the DeltaMerge operator passes: run type, run ids, try number, logical date,
dag_run.conf window, and for zero-width intervals the start of the schedule period from the DAG's
timetable (`operators.context.schedule_period_start`).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from airflow_provider_deltamerge import ConfigError, Incremental, run_load
from airflow_provider_deltamerge.delta import store
from tests.airflow_compat import cron_timetables, dag_serialization
from tests.helpers import read_rows, table_version

pytestmark = pytest.mark.spark

UTC = timezone.utc
PIPELINE = "deltamerge"
INCREMENTAL = Incremental("ts", initial_value="2023-12-01T00:00:00Z")


def at(day: int, hour: int = 0, month: int = 1, year: int = 2024) -> datetime:
    return datetime(year, month, day, hour, tzinfo=UTC)


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def events(first: datetime, last: datetime, every=timedelta(hours=12), value="v1") -> list[dict]:
    """One row every `every` in [first, last], ids counting from 1."""
    out, moment = [], first
    while moment <= last:
        out.append({"id": len(out) + 1, "ts": moment, "v": value})
        moment += every
    return out


def run(
    run_type: str, run_after: datetime | None = None, *, period_start=None, conf=None, try_number=1
) -> dict:
    """A RunContext as the operator builds it from Airflow's task context."""
    suffix = iso(run_after) if run_after else "now"
    return {
        "dag_id": "weekly_events",
        "task_id": "load_events",
        "run_id": f"{run_type}__{suffix}",
        "try_number": try_number,
        "run_type": run_type,
        "logical_date": iso(run_after),
        "period_start": iso(period_start),
        "conf": conf or {},
    }


def load(spark, dataset, data, run_context=None, data_interval=None, *, incremental=INCREMENTAL, **arguments):
    arguments.setdefault("table_name", "events")
    return run_load(
        data,
        spark=spark,
        dataset=dataset,
        incremental=incremental,
        run_context=run_context,
        data_interval=data_interval,
        **arguments,
    )


def table_ts(dataset, table="events") -> list[datetime]:
    return sorted(r["ts"] for r in read_rows(f"{dataset}/{table}"))


def in_window(rows: list[dict], start: datetime, end: datetime) -> list[datetime]:
    return sorted(r["ts"] for r in rows if start <= r["ts"] < end)


def loaded_windows(dataset, table="events") -> list[tuple[str, str, int]]:
    """Which windows are loaded: one query on _dlt_loads."""
    reader = (
        QueryBuilder()
        .register("loads", DeltaTable(f"{dataset}/_dlt_loads"))
        .execute(
            f"SELECT window_start, window_end, table_version FROM loads "
            f"WHERE table_name = '{table}' AND status = 0 ORDER BY window_start, load_id"
        )
    )
    rows = pa.table(reader.read_all()).to_pylist()  # delta-rs answers in arro3; pyarrow reads it zero-copy
    return [(r["window_start"], r["window_end"], r["table_version"]) for r in rows]


def stored_windows(dataset, table="events") -> list[tuple]:
    windows = store.latest_state(dataset, PIPELINE, table)["windows"]
    return [(w["start"], w["end"], w["rule"], w["rows"]) for w in windows]


# -- window rules with the run context the operator passes -----------------------------------------


def test_manual_run_with_conf_loads_exactly_that_range_and_keeps_the_cursor(spark, dataset):
    source = events(at(1), at(10))
    first = load(
        spark, dataset, source, run("manual", conf={"start": "2024-01-06T00:00:00Z", "end": "2024-01-08"})
    )
    assert table_ts(dataset) == in_window(source, at(6), at(8))
    assert (first.window["rule"], first.window["stateful"]) == ("run-conf-range", False)

    # A range behind the loaded one: loaded, but the stored cursor does not move back
    load(
        spark,
        dataset,
        source,
        run("manual", conf={"start": "2024-01-02T00:00:00Z", "end": "2024-01-03T00:00:00Z"}),
    )
    assert table_ts(dataset) == in_window(source, at(2), at(3)) + in_window(source, at(6), at(8))
    assert store.latest_state(dataset, PIPELINE, "events")["incremental"]["ts"]["last_value"] == iso(
        at(7, 12)
    )
    assert loaded_windows(dataset) == [
        (iso(at(2)), iso(at(3)), 1),
        (iso(at(6)), iso(at(8)), 0),
    ]


def test_scheduled_run_with_a_real_interval_loads_it_and_clamps_a_future_end_to_now(spark, dataset):
    source = events(at(1), at(10))
    load(spark, dataset, source, run("scheduled", at(5)), (at(4), at(5)))
    assert table_ts(dataset) == in_window(source, at(4), at(5))

    now = datetime.now(UTC).replace(microsecond=0)
    live = [
        {"id": 100 + i, "ts": now + timedelta(hours=h), "v": "live"} for i, h in enumerate((-30, -2, 1, 30))
    ]
    before = datetime.now(UTC)
    info = load(
        spark,
        dataset,
        live,
        run("backfill", now + timedelta(days=6)),
        (now - timedelta(days=1), now + timedelta(days=6)),
    )
    after = datetime.now(UTC)
    assert [r["id"] for r in read_rows(f"{dataset}/events") if r["v"] == "live"] == [
        101
    ]  # not the future rows
    window_end = datetime.fromisoformat(info.window["end"])
    assert before <= window_end <= after  # the end in the future became "now"
    assert info.window["rule"] == "data-interval"


def test_zero_width_interval_loads_the_schedule_period_before_the_run(spark, dataset):
    source = events(at(25, month=12, year=2023), at(10))
    week_end = at(7)
    info = load(
        spark,
        dataset,
        source,
        run("scheduled", week_end, period_start=at(31, month=12, year=2023)),
        (week_end, week_end),
    )
    assert table_ts(dataset) == in_window(source, at(31, month=12, year=2023), week_end)
    assert (info.window["rule"], info.window["start"], info.window["end"]) == (
        "schedule-period",
        iso(at(31, month=12, year=2023)),
        iso(week_end),
    )

    with pytest.raises(ConfigError) as raised:  # never guessed from the data
        load(spark, dataset, source, run("scheduled", at(14)), (at(14), at(14)))
    assert raised.value.argument == "run_context.period_start"
    assert "zero-width data interval at 2024-01-14T00:00:00+00:00" in str(raised.value)
    assert table_version(f"{dataset}/events") == 0


def test_manual_run_without_conf_loads_from_the_stored_cursor_to_now(spark, dataset):
    source = events(at(1), at(10))
    load(spark, dataset, source, run("scheduled", at(5)), (at(3), at(5)))
    before = datetime.now(UTC)
    info = load(spark, dataset, source, run("manual", at(12)), (at(12), at(12)))
    # From the last loaded value (Jan 4 12:00, already loaded, so dropped at the boundary) to now
    assert table_ts(dataset) == in_window(source, at(3), at(11))
    assert info.window["rule"] == "manual-from-cursor" and info.window["stateful"]
    assert info.window["start"] == iso(at(4, 12)) and datetime.fromisoformat(info.window["end"]) >= before
    assert store.latest_state(dataset, PIPELINE, "events")["incremental"]["ts"]["last_value"] == iso(at(10))


def test_a_date_string_cursor_splits_at_the_right_day(spark, dataset):
    """The classic partition key `ds` ('2024-01-07'): a weekly window [Jan 7, Jan 14) holds Jan 7..13."""
    source = [{"id": d, "ds": f"2024-01-{d:02d}"} for d in range(1, 21)]
    info = load(
        spark, dataset, source, run("scheduled", at(14)), (at(7), at(14)), incremental=Incremental("ds")
    )
    assert (info.window["start"], info.window["end"]) == ("2024-01-07", "2024-01-14")
    assert sorted(r["ds"] for r in read_rows(f"{dataset}/events")) == [
        f"2024-01-{d:02d}" for d in range(7, 14)
    ]


def test_every_airflow_run_type_has_a_window_rule():
    """Each of Airflow's DagRunType values maps to a rule (a run type added by Airflow fails here)."""
    from airflow.utils.types import DagRunType

    from airflow_provider_deltamerge.model.run import RunContext
    from airflow_provider_deltamerge.model.window import resolve_window

    expected = {
        "scheduled": "schedule-period",
        "backfill": "schedule-period",
        "manual": "manual-from-cursor",
        "operator_triggered": "manual-from-cursor",
        "asset_triggered": "manual-from-cursor",
        "asset_materialization": "manual-from-cursor",
    }
    for run_type in DagRunType:
        context = RunContext(run_type=run_type.value, period_start=iso(at(31, month=12, year=2023)))
        window = resolve_window(
            INCREMENTAL,
            cursor_type="timestamp",
            data_interval=(at(7), at(7)),
            run_context=context,
            stored_state=None,
            now=at(20),
        )
        assert window.rule == expected[run_type.value], run_type


# -- windows of real Airflow 3 weekly DAGs ------------------------------------------------------------


def weekly_dag(schedule):
    import pendulum
    from airflow.sdk import DAG

    CronTriggerTimetable, CronDataIntervalTimetable = cron_timetables()

    timetables = {
        "@weekly": "@weekly",  # Airflow 3: CronTriggerTimetable, zero-width intervals
        "cron-amsterdam": CronTriggerTimetable(
            "0 0 * * 1", timezone="Europe/Amsterdam"
        ),  # across the DST change
        "data-interval": CronDataIntervalTimetable("@weekly", timezone="UTC"),  # real intervals
    }
    start = (
        pendulum.datetime(2024, 3, 20, tz="UTC")
        if schedule == "cron-amsterdam"
        else pendulum.datetime(2024, 1, 1, tz="UTC")
    )
    return DAG(f"weekly_{schedule.strip('@')}", schedule=timetables[schedule], start_date=start, catchup=True)


def scheduled_runs(dag, count: int) -> list:
    """The first `count` runs the scheduler creates for `dag`, from its (scheduler side) timetable."""
    DagSerialization = dag_serialization()
    from airflow.timetables.base import TimeRestriction

    timetable = DagSerialization.from_dict(DagSerialization.to_dict(dag)).timetable
    restriction = TimeRestriction(earliest=dag.start_date, latest=None, catchup=True)
    runs, last = [], None
    for _ in range(count):
        info = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)
        runs.append(info)
        last = info.data_interval
    return runs


EXPECTED_WEEKS = {
    "@weekly": [(at(31, month=12, year=2023), at(7)), (at(7), at(14)), (at(14), at(21))],
    "cron-amsterdam": [  # Monday 00:00 in Amsterdam; the week of March 31 is an hour shorter
        (at(17, 23, month=3), at(24, 23, month=3)),
        (at(24, 23, month=3), at(31, 22, month=3)),
        (at(31, 22, month=3), at(7, 22, month=4)),
    ],
    "data-interval": [(at(7), at(14)), (at(14), at(21)), (at(21), at(28))],
}


@pytest.mark.parametrize("schedule", list(EXPECTED_WEEKS))
def test_weekly_dag_loads_each_week_once_from_its_timetable(spark, dataset, schedule):
    from airflow_provider_deltamerge.operators.context import schedule_period_start

    dag = weekly_dag(schedule)
    weeks = EXPECTED_WEEKS[schedule]
    source = events(
        weeks[0][0] - timedelta(days=2), weeks[-1][1] + timedelta(days=2), every=timedelta(hours=5)
    )

    for info in scheduled_runs(dag, len(weeks)):
        start, end = info.data_interval
        zero_width = start == end
        assert zero_width == (schedule != "data-interval")
        # What the operator does for a zero-width interval: ask the DAG's timetable for the period start
        period_start = schedule_period_start(dag.timetable, end) if zero_width else None
        load(
            spark, dataset, source, run("scheduled", info.run_after, period_start=period_start), (start, end)
        )

    assert [(s, e) for s, e, _ in loaded_windows(dataset)] == [(iso(s), iso(e)) for s, e in weeks]
    per_week = [in_window(source, s, e) for s, e in weeks]
    assert table_ts(dataset) == sorted(t for week in per_week for t in week)
    assert [rows for *_, rows in stored_windows(dataset)] == [len(week) for week in per_week]


def test_manual_trigger_of_a_cron_dag_continues_from_the_cursor(spark, dataset):
    """A manual run of a CronTriggerTimetable DAG has a zero-width interval at its run time: it loads
    from the stored cursor to now, so nothing between the last scheduled week and now is skipped."""
    import pendulum

    DagSerialization = dag_serialization()

    from airflow_provider_deltamerge.operators.context import schedule_period_start

    dag = weekly_dag("@weekly")
    source = events(at(1), at(20))
    week = scheduled_runs(dag, 1)[0]
    end = week.data_interval.end
    load(
        spark,
        dataset,
        source,
        run("scheduled", end, period_start=schedule_period_start(dag.timetable, end)),
        week.data_interval,
    )

    timetable = DagSerialization.from_dict(DagSerialization.to_dict(dag)).timetable
    manual = timetable.infer_manual_data_interval(run_after=pendulum.now("UTC"))
    assert manual.start == manual.end
    info = load(spark, dataset, source, run("manual", manual.end), (manual.start, manual.end))
    assert info.window["rule"] == "manual-from-cursor"
    assert table_ts(dataset) == in_window(source, at(1), at(21))


# -- stateless re-runs ------------------------------------------------------------------------------


def test_append_rerun_of_a_window_replaces_its_rows_unless_told_not_to(spark, dataset):
    first_week = [{"id": 1, "ts": at(1, 6), "v": "a"}, {"id": 2, "ts": at(3, 6), "v": "a"}]
    second_week = [{"id": 3, "ts": at(8, 6), "v": "a"}, {"id": 4, "ts": at(9, 6), "v": "a"}]
    load(spark, dataset, first_week, run("backfill", at(8)), (at(1), at(8)))
    load(spark, dataset, second_week, run("backfill", at(15)), (at(8), at(15)))

    # The week is cleared and re-run; its source changed meanwhile: one row gone, one changed, one new
    rerun = [
        {"id": 3, "ts": at(8, 6), "v": "b"},
        {"id": 5, "ts": at(14, 23), "v": "b"},
        {"id": 9, "ts": at(15), "v": "x"},
    ]
    info = load(spark, dataset, rerun, run("backfill", at(15), try_number=2), (at(8), at(15)))
    assert info.metrics["rows_staged"] == 2  # id 9 sits on the window's end: the next week's row
    assert sorted((r["id"], r["v"]) for r in read_rows(f"{dataset}/events")) == [
        (1, "a"),
        (2, "a"),
        (3, "b"),
        (5, "b"),
    ]

    # another run of the week (run after a day later) told not to overwrite the window: its rows are added
    another_run = run("backfill", at(16))
    load(spark, dataset, rerun, another_run, (at(8), at(15)), window_overwrite=False)
    assert sorted((r["id"], r["v"]) for r in read_rows(f"{dataset}/events")) == [
        (1, "a"),
        (2, "a"),
        (3, "b"),
        (3, "b"),
        (5, "b"),
        (5, "b"),
    ]

    week_two = (iso(at(8)), iso(at(15)))
    assert loaded_windows(dataset) == [
        (iso(at(1)), iso(at(8)), 0),
        (*week_two, 1),
        (*week_two, 2),
        (*week_two, 3),
    ]
    assert stored_windows(dataset) == [
        (iso(at(1)), iso(at(8)), "data-interval", 2),
        (*week_two, "data-interval", 2),
        (*week_two, "data-interval", 2),
        (*week_two, "data-interval", 2),
    ]


@pytest.mark.parametrize("strategy", ["delete-insert", "upsert", "insert-only"])
def test_merge_rerun_of_a_window_is_idempotent(spark, dataset, strategy):
    source = events(at(1), at(6), every=timedelta(hours=10))
    disposition = {"disposition": "merge", "strategy": strategy}
    load(
        spark,
        dataset,
        source,
        run("scheduled", at(5)),
        (at(2), at(5)),
        write_disposition=disposition,
        primary_key="id",
    )
    after_first = read_rows(f"{dataset}/events")
    load(
        spark,
        dataset,
        source,
        run("scheduled", at(5), try_number=2),
        (at(2), at(5)),
        write_disposition=disposition,
        primary_key="id",
    )
    assert read_rows(f"{dataset}/events") == after_first
    assert sorted(r["ts"] for r in after_first) == in_window(source, at(2), at(5))
    assert len(loaded_windows(dataset)) == 2


def test_a_window_without_rows_is_still_recorded_as_loaded(spark, dataset):
    load(spark, dataset, events(at(1), at(3)), run("scheduled", at(8)), (at(1), at(8)))
    info = load(spark, dataset, events(at(1), at(3)), run("scheduled", at(15)), (at(8), at(15)))
    assert info.loaded and info.metrics["rows_staged"] == 0
    assert [w[:2] for w in loaded_windows(dataset)] == [(iso(at(1)), iso(at(8))), (iso(at(8)), iso(at(15)))]
    assert len(read_rows(f"{dataset}/events")) == 5


# -- a callable source gets the window -----------------------------------------------------------------


def test_callable_source_receives_the_window_and_cannot_load_outside_it(spark, dataset):
    received = []

    def source(spark_session, window):
        received.append(window)
        # A sloppy reader: it returns the whole day around the window, not the window itself
        return spark_session.createDataFrame([(i, at(i)) for i in range(1, 10)], "id long, ts timestamp")

    load(spark, dataset, source, run("scheduled", at(6)), (at(3), at(6)))
    assert (received[0].start, received[0].end, received[0].rule) == (at(3), at(6), "data-interval")
    assert [r["id"] for r in read_rows(f"{dataset}/events")] == [3, 4, 5]

    load(spark, dataset, source, run("manual", at(20)))
    assert received[1].rule == "manual-from-cursor" and received[1].start == at(5)
    assert [r["id"] for r in read_rows(f"{dataset}/events")] == [3, 4, 5, 6, 7, 8, 9]
