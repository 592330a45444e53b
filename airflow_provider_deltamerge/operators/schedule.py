"""Where the schedule period that ends at a run starts: the end of the previous scheduled run, as the
DAG's own timetable says.

A scheduled run's window is [end of the previous scheduled run's data interval, end of its own). Both
ends come from the call the scheduler itself makes (``next_dagrun_info``), so consecutive windows tile
time as instants in every zone and across daylight saving changes, for every timetable kind:

- delta data intervals (``DeltaDataIntervalTimetable``) and a custom timetable's real intervals: the
  run's data interval starts where the previous one ended; nothing to ask.
- trigger timetables (``CronTriggerTimetable``, with or without ``interval=``,
  ``MultipleCronTriggerTimetable``, ``DeltaTriggerTimetable``), cron data intervals (aligned to the cron,
  they overlap across Australia/Lord_Howe's half-hour change), events, and any run with a zero-width
  interval: the previous run is found with ``next_dagrun_info`` (the first run at or after an earlier
  instant, then run after run, as the scheduler makes them), and accepted only where the run after it
  is this one.

Airflow gives no "previous run" call, and its cron mixin's own ``_get_prev`` returns the run itself on a
spring-forward day (02:00 in Europe/Amsterdam on 2024-03-31 fires at 03:00+02:00, and its "previous"
is that same instant), so only the forward call is trusted. Where no run before this one leads to it
(a first event, ``@once``, a custom timetable whose runs cannot be found from an earlier instant), the
period is refused with a ConfigError rather than guessed.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..errors import ConfigError
from ..model.incremental import to_utc

_FIRST_STEP = timedelta(minutes=1)
_LONGEST_LOOKBACK = timedelta(days=366 * 30)  # "@yearly", and February 29 crons, fit in it
_MOST_RUNS = 50_000
_WHAT_TO_DO = (
    "give the task its own window (`window=`), or schedule the DAG with a timetable whose runs have data "
    "intervals (CronDataIntervalTimetable, DeltaDataIntervalTimetable, or a custom timetable returning "
    "real data intervals)"
)


def core_timetable(timetable: Any) -> Any:
    """The scheduler's timetable object for a DAG's timetable: Airflow 3.1 and later give DAGs the task
    SDK's timetable classes, which only describe a schedule; 3.0 gives the scheduler's own."""
    try:
        from airflow.serialization.encoders import coerce_to_core_timetable
    except ImportError:  # Airflow 3.0: the DAG's timetable is already the scheduler's
        return timetable
    try:
        return coerce_to_core_timetable(timetable)
    except Exception as reason:  # a timetable Airflow cannot serialize: no scheduler's object to ask
        raise ConfigError(
            "timetable",
            f"the DAG's timetable {type(timetable).__name__} has no scheduler's timetable to ask ({reason}); "
            f"{_WHAT_TO_DO}",
        ) from None


def needs_period(timetable: Any, interval: tuple[datetime, datetime]) -> bool:
    """Whether a run's data interval may not start where the previous scheduled run's ended: zero-width
    intervals, trigger timetables (``interval=`` before each run has a fixed length, which across a
    daylight saving change overlaps the run before or leaves a gap), and cron data intervals (Airflow
    aligns each start to the cron, which across a half-hour change, Australia/Lord_Howe's, overlaps the
    interval before). Delta data intervals start where the previous one ended by construction."""
    from airflow.timetables.interval import CronDataIntervalTimetable
    from airflow.timetables.trigger import (
        CronTriggerTimetable,
        DeltaTriggerTimetable,
        MultipleCronTriggerTimetable,
    )

    kinds = (
        CronTriggerTimetable,
        DeltaTriggerTimetable,
        MultipleCronTriggerTimetable,
        CronDataIntervalTimetable,
    )
    return interval[0] == interval[1] or isinstance(core_timetable(timetable), kinds)


def schedule_period_start(timetable: Any, end: datetime) -> datetime:
    """Start of the schedule period that ends at `end`: the end of the data interval of the scheduled
    run before the one whose interval ends there, in UTC. ConfigError where the timetable cannot tell."""
    import pendulum
    from airflow.timetables.trigger import DeltaTriggerTimetable

    core = core_timetable(timetable)
    end = pendulum.instance(end).in_timezone("UTC")
    if isinstance(core, DeltaTriggerTimetable):
        previous = _previous_of_delta(core, end)
    else:
        previous = _previous_by_search(core, end)
    following = _end_of(_after(core, previous))
    if following is None or following != end:
        raise ConfigError(
            "timetable",
            f"{_name(core)} does not schedule a run at {end.isoformat()} after any earlier run (the run "
            f"after the one ending {previous.end.isoformat()} ends "
            f"{following.isoformat() if following else 'never'}), so where this run's window starts "
            f"cannot be known; {_WHAT_TO_DO}",
        )
    return to_utc(previous.end)


def _previous_of_delta(core: Any, end: Any) -> Any:
    """A delta trigger fires every `delta` from its first run: the run before `end` ends at
    `end - delta` (Airflow's own subtraction), which the caller checks leads to `end`."""
    from airflow.timetables.base import DataInterval

    previous = core._get_prev(end)
    return DataInterval(previous, previous)


def _previous_by_search(core: Any, end: Any) -> Any:
    """The latest run end before `end` on the scheduler's chain of runs: an earlier instant with a run
    after it is found by doubling the look-back; from twice as far back, run after run is asked of
    `next_dagrun_info` up to `end`. Never by jumping between runs: near a fall-back hour, "the first run
    at or after" an instant can be one the chain of runs skips."""
    step = _FIRST_STEP
    while (first := _first_at_or_after(core, end - step)) is None or first.end >= end:
        if step > _LONGEST_LOOKBACK:
            raise ConfigError(
                "timetable",
                f"{_name(core)} has no run before the one at {end.isoformat()} (searched back "
                f"{_LONGEST_LOOKBACK.days} days), so where this run's window starts cannot be known; "
                f"{_WHAT_TO_DO}",
            )
        step *= 2
    latest = _first_at_or_after(core, end - 2 * step)
    for _ in range(_MOST_RUNS):
        following = _after(core, latest)
        if following is None or following.end >= end:
            return latest
        latest = following
    raise ConfigError(
        "timetable",
        f"{_name(core)} has more than {_MOST_RUNS} runs in the {2 * step} before {end.isoformat()}, "
        f"too many to follow; {_WHAT_TO_DO}",
    )


def _first_at_or_after(core: Any, earliest: Any) -> Any:
    """The data interval of the first run at or after `earliest`, or None."""
    from airflow.timetables.base import TimeRestriction

    restriction = TimeRestriction(earliest=earliest, latest=None, catchup=True)
    return _interval_of(core.next_dagrun_info(last_automated_data_interval=None, restriction=restriction))


def _after(core: Any, previous: Any) -> Any:
    """The data interval of the run the scheduler makes after a run with the data interval `previous`."""
    from airflow.timetables.base import TimeRestriction

    restriction = TimeRestriction(earliest=None, latest=None, catchup=True)
    return _interval_of(core.next_dagrun_info(last_automated_data_interval=previous, restriction=restriction))


def _interval_of(info: Any) -> Any:
    return getattr(info, "data_interval", None)


def _end_of(interval: Any) -> Any:
    return None if interval is None else interval.end


def _name(core: Any) -> str:
    summary = getattr(core, "summary", None)
    return f"the DAG's timetable {type(core).__name__}({summary!r})"
