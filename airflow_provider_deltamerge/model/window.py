"""resolve_window: which cursor range one load reads, from the Airflow run, its conf or the stored cursor.

Pure: no Spark, no Airflow, no I/O. Rules, first match wins:

- end-value-range:  the incremental has end_value: [initial_value, end_value), stateless (INC-5).
- stateful-incremental: allow_external_schedulers=False, or outside Airflow: from the stored last value
  (or initial_value) with lag and boundary dedup, no end (dlt's incremental, INC-2..INC-11).
- task-window:      the task was given a window of its own (its `window` argument, a backfill chunk):
  exactly [start, end), stateless; end defaults to now, start to initial_value (unbounded without one).
- data-interval:    a scheduled or backfill run with a real interval: [start, end), end clamped to now.
- schedule-period:  a scheduled or backfill run whose run context gives period_start: [period_start,
  interval end). The operators give it where the data interval is not the period since the previous
  scheduled run: zero-width (Airflow 3 cron timetables) or a trigger timetable's `interval=`, whose
  fixed length across a daylight saving change would overlap the run before or leave a gap. A
  zero-width interval without it is refused, never guessed.
- conf-narrowed:    either of those two with `start` and/or `end` in the run's conf: the part of the
  run's window they name. Conf may only narrow it: a conf bound outside it is refused.
- run-conf-range:   any other run (manual, triggered, or outside Airflow) whose conf has `start` and/or
  `end`: exactly that range, as task-window. A manual run has no interval of its own to narrow.
- manual-from-cursor: a manual, operator- or asset-triggered run without conf: from the stored last value (or
  initial_value) to now, stateful.

Backfills cut a long range into consecutive windows (`model.backfill`), one task window each.

Windows from the run (conf, interval, period) are half-open and stateless: they do no boundary dedup, and
the cursor state they leave behind never moves backwards (see cursor.next_state).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta, timezone
from typing import Any

from ..errors import ConfigError
from .checks import choice
from .incremental import (
    CURSOR_TYPES,
    Bound,
    Incremental,
    coerce_bound,
    cursor_state,
    json_safe,
    parse_iso,
    to_utc,
)
from .run import RunContext

SCHEDULED_RUN_TYPES = ("scheduled", "backfill")
# Airflow 3's other DagRunType values; "operator_triggered" is a run started by TriggerDagRunOperator.
ON_DEMAND_RUN_TYPES = ("manual", "operator_triggered", "asset_triggered", "asset_materialization")

END_VALUE_RANGE = "end-value-range"
STATEFUL_INCREMENTAL = "stateful-incremental"
RUN_CONF_RANGE = "run-conf-range"
DATA_INTERVAL = "data-interval"
SCHEDULE_PERIOD = "schedule-period"
MANUAL_FROM_CURSOR = "manual-from-cursor"
TASK_WINDOW = "task-window"
CONF_NARROWED = "conf-narrowed"
FAR_FUTURE = datetime(9999, 12, 31, tzinfo=timezone.utc)  # "now" for a run's window before clamping


@dataclass(frozen=True)
class Window:
    """The cursor range of one load. Bounds are of the cursor column's type; None is unbounded.

    Rows kept: start <(=) cursor <(=) end; when `descending` (last_value_func="min" on a stateful
    incremental) the order flips: end <(=) cursor <(=) start.
    """

    start: Bound | None
    end: Bound | None
    start_closed: bool
    end_closed: bool
    stateful: bool
    boundary_dedup: bool
    rule: str
    cursor_type: str
    descending: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe (ISO strings for datetimes and dates), for commit metadata and `_dlt_loads`."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["start"], out["end"] = json_safe(self.start), json_safe(self.end)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Window:
        cursor_type = choice("window.cursor_type", data.get("cursor_type"), CURSOR_TYPES)
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        values["start"] = coerce_bound(data.get("start"), cursor_type, "window.start")
        values["end"] = coerce_bound(data.get("end"), cursor_type, "window.end")
        return cls(**values)


def resolve_window(
    incremental: Incremental,
    *,
    cursor_type: str,
    data_interval: tuple[datetime | None, datetime | None] | None,
    run_context: RunContext,
    stored_state: dict | None,
    now: datetime,
) -> Window:
    """The window of this load; see the module docstring for the rules."""
    choice("cursor_type", cursor_type, CURSOR_TYPES)
    now = to_utc(now)
    if incremental.end_value is not None:
        return _end_value_range(incremental, cursor_type)
    if not incremental.allow_external_schedulers:
        return _from_cursor(incremental, cursor_type, stored_state, None, STATEFUL_INCREMENTAL)
    task_bounds = _bounds(run_context.window)
    if task_bounds is not None:
        return _given_range(incremental, cursor_type, task_bounds, now, TASK_WINDOW)
    conf_bounds = _bounds(run_context.conf)
    run_type = run_context.run_type
    if run_type in SCHEDULED_RUN_TYPES or (run_type is None and data_interval is not None):
        window = _scheduled(cursor_type, data_interval, run_context, now)
        if conf_bounds is None:
            return window
        whole = _scheduled(cursor_type, data_interval, run_context, FAR_FUTURE)
        return _narrowed(whole, conf_bounds, coerce_bound(now, cursor_type, "now"))
    if conf_bounds is not None:
        return _given_range(incremental, cursor_type, conf_bounds, now, RUN_CONF_RANGE)
    if run_type in ON_DEMAND_RUN_TYPES:
        return _from_cursor(incremental, cursor_type, stored_state, now, MANUAL_FROM_CURSOR)
    if run_type is None:
        return _from_cursor(incremental, cursor_type, stored_state, None, STATEFUL_INCREMENTAL)
    raise ConfigError(
        "run_context.run_type",
        f"{run_type!r} is not a run type this provider knows; expected one of "
        f"{', '.join(map(repr, SCHEDULED_RUN_TYPES + ON_DEMAND_RUN_TYPES))}, or none outside Airflow",
    )


def _end_value_range(incremental: Incremental, cursor_type: str) -> Window:
    return Window(
        start=coerce_bound(incremental.initial_value, cursor_type, "initial_value"),
        end=coerce_bound(incremental.end_value, cursor_type, "end_value"),
        start_closed=incremental.range_start == "closed",
        end_closed=incremental.range_end == "closed",
        stateful=False,
        boundary_dedup=False,
        rule=END_VALUE_RANGE,
        cursor_type=cursor_type,
        descending=incremental.last_value_func == "min",
    )


def _from_cursor(
    incremental: Incremental, cursor_type: str, stored_state: dict | None, now: datetime | None, rule: str
) -> Window:
    """Stateful: from the stored last value (or initial_value), lag applied; up to `now` when given.

    With last_value_func="min" the incremental walks downwards, so `now` (an upper bound) does not apply.
    """
    initial = coerce_bound(incremental.initial_value, cursor_type, "initial_value")
    stored = cursor_state(stored_state, incremental.cursor_path).get("last_value")
    start = initial if stored is None else coerce_bound(stored, cursor_type, "stored last_value")
    if stored is not None and incremental.has_lag:
        start = _lagged(start, incremental, cursor_type, initial)
    descending = incremental.last_value_func == "min"
    end = None if now is None or descending else coerce_bound(now, cursor_type, "now")
    if end is not None and start is not None and start > end:
        raise ConfigError(
            "stored last_value",
            f"{json_safe(start)!r} is after now ({json_safe(end)!r}), so a manual run has nothing to load "
            "up to now; trigger the run with conf {'start': ..., 'end': ...} to load a range explicitly",
        )
    return Window(
        start=start,
        end=end,
        start_closed=incremental.range_start == "closed",
        end_closed=False,
        stateful=True,
        boundary_dedup=start is not None and incremental.records_boundary_hashes,
        rule=rule,
        cursor_type=cursor_type,
        descending=descending,
    )


def _lagged(last_value: Bound, incremental: Incremental, cursor_type: str, initial: Bound | None) -> Bound:
    """INC-11: last_value moved back by lag (forward for min), never beyond initial_value."""
    sign = -1 if incremental.last_value_func == "max" else 1
    shifted = _shift(last_value, sign * incremental.lag, cursor_type)
    if initial is None:
        return shifted
    return max(shifted, initial) if sign < 0 else min(shifted, initial)


def _shift(value: Bound, amount: float, cursor_type: str) -> Bound:
    if cursor_type in ("timestamp", "timestamp_ntz"):
        return value + timedelta(seconds=amount)
    if cursor_type == "float":
        return value + amount
    if cursor_type in ("int", "date"):
        if not float(amount).is_integer():
            unit = "days" if cursor_type == "date" else "units"
            raise ConfigError(
                "lag", f"{abs(amount)!r} must be a whole number of {unit} for a {cursor_type} cursor"
            )
        return value + (timedelta(days=int(amount)) if cursor_type == "date" else int(amount))
    return _shift_iso_text(value, amount)


def _shift_iso_text(text: str, amount: float) -> str:
    """An ISO date string moved by days, a timestamp string by seconds, keeping its 'T'/' ' and 'Z'."""
    parsed = parse_iso(text)
    if parsed is None:
        raise ConfigError(
            "lag", f"the cursor value {text!r} is not an ISO 8601 date or timestamp, so lag cannot move it"
        )
    if not isinstance(parsed, datetime):
        return (parsed + timedelta(days=amount)).isoformat()
    shifted = (parsed + timedelta(seconds=amount)).isoformat(sep=text.strip()[10])
    return shifted[: -len("+00:00")] + "Z" if text.rstrip().endswith(("Z", "z")) else shifted


def _bounds(given: dict[str, Any] | None) -> tuple[Any, Any] | None:
    """(start, end) from a window or conf dict, or None when it gives neither (empty counts as absent)."""
    if not given:
        return None
    start, end = (given.get(key) if given.get(key) != "" else None for key in ("start", "end"))
    return None if start is None and end is None else (start, end)


def _given_range(
    incremental: Incremental, cursor_type: str, bounds: tuple[Any, Any], now: datetime, rule: str
) -> Window:
    """Exactly the range a task's window or a manual run's conf names."""
    given = "run_context.window" if rule == TASK_WINDOW else "run_context.conf"
    given_start, given_end = bounds
    start = coerce_bound(
        given_start if given_start is not None else incremental.initial_value,
        cursor_type,
        f"{given}.start" if given_start is not None else "initial_value",
    )
    end = coerce_bound(given_end if given_end is not None else now, cursor_type, f"{given}.end")
    if start is not None and end < start:
        raise ConfigError(
            f"{given}.end", f"{json_safe(end)!r} is before the window's start {json_safe(start)!r}"
        )
    return _stateless(start, end, rule, cursor_type)


def _narrowed(whole: Window, bounds: tuple[Any, Any], now: Bound) -> Window:
    """The part of a scheduled run's window that its conf names; conf may not reach outside it."""
    start, end = (
        whole_bound if given is None else coerce_bound(given, whole.cursor_type, f"run_context.conf.{key}")
        for given, whole_bound, key in zip(bounds, (whole.start, whole.end), ("start", "end"), strict=True)
    )
    if start < whole.start or end > whole.end:
        raise ConfigError(
            "run_context.conf",
            f"dag_run.conf asks for [{json_safe(start)}, {json_safe(end)}), which reaches outside this "
            f"{whole.rule} run's window [{json_safe(whole.start)}, {json_safe(whole.end)}); conf may only "
            "narrow a scheduled or backfill run's window. To load another range, trigger the DAG manually "
            "with that conf, or use DeltaBackfillOperator (or map DeltaMergeOperator over backfill_windows)",
        )
    if end < start:
        raise ConfigError(
            "run_context.conf.end", f"{json_safe(end)!r} is before the window's start {json_safe(start)!r}"
        )
    return _stateless(start, min(end, now), CONF_NARROWED, whole.cursor_type)


def _scheduled(
    cursor_type: str, data_interval: tuple[Any, Any] | None, run_context: RunContext, now: datetime
) -> Window:
    interval_start, interval_end = data_interval or (None, None)
    interval_start = _as_instant(interval_start, "data_interval start")
    interval_end = _as_instant(interval_end, "data_interval end") or _as_instant(
        run_context.logical_date, "run_context.logical_date"
    )
    if interval_end is None:
        raise ConfigError(
            "data_interval",
            f"run {run_context.run_id!r} of type {run_context.run_type!r} has neither a data interval end "
            "nor a logical date, so its window cannot be known; pass the run's data interval",
        )
    if interval_start is not None and interval_start > interval_end:
        raise ConfigError(
            "data_interval",
            f"the end {interval_end.isoformat()} is before the start {interval_start.isoformat()}",
        )
    if interval_start is not None and interval_start < interval_end and run_context.period_start is None:
        rule, start, start_argument = DATA_INTERVAL, interval_start, "data_interval start"
    else:
        rule, start_argument = SCHEDULE_PERIOD, "run_context.period_start"
        start = _period_start(run_context, interval_end)
    end = min(interval_end, now)
    if end < start:
        raise ConfigError(
            "data_interval",
            f"the window [{start.isoformat()}, {interval_end.isoformat()}) starts after now "
            f"({now.isoformat()}); it cannot be loaded yet",
        )
    return _stateless(
        coerce_bound(start, cursor_type, start_argument),
        coerce_bound(end, cursor_type, "data_interval end"),
        rule,
        cursor_type,
    )


def _period_start(run_context: RunContext, interval_end: datetime) -> datetime:
    """Rule schedule-period: the timetable's period start, filled in by the operator. Never guessed."""
    period_start = _as_instant(run_context.period_start, "run_context.period_start")
    if period_start is None:
        raise ConfigError(
            "run_context.period_start",
            f"run {run_context.run_id!r} has a zero-width data interval at {interval_end.isoformat()} "
            "(Airflow 3 cron schedules use CronTriggerTimetable), so the window needs the start of the "
            "schedule period that ends at the run: where the previous scheduled run's window ended. The "
            "DeltaMerge operators ask the DAG's timetable for it, which cron, multiple-cron and delta "
            "timetables and events answer; this run's timetable did not (the task log says why: a first "
            "event, '@once', a custom timetable). Give the task its own window (`window=`), schedule the "
            "DAG with a timetable whose runs have data intervals (CronDataIntervalTimetable, "
            "DeltaDataIntervalTimetable, or a custom one returning real intervals), or, calling run_load "
            "yourself, pass period_start in the run context",
        )
    if period_start >= interval_end:
        raise ConfigError(
            "run_context.period_start",
            f"{period_start.isoformat()} must be before the run's interval end {interval_end.isoformat()}",
        )
    return period_start


def _as_instant(value: Any, argument: str) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return None if value is None else to_utc(value)
    if isinstance(value, date) or (isinstance(value, str) and parse_iso(value) is not None):
        return coerce_bound(value, "timestamp", argument)
    raise ConfigError(argument, f"{value!r} must be an ISO 8601 timestamp or a datetime")


def _stateless(start: Bound | None, end: Bound | None, rule: str, cursor_type: str) -> Window:
    return Window(
        start=start,
        end=end,
        start_closed=True,
        end_closed=False,
        stateful=False,
        boundary_dedup=False,
        rule=rule,
        cursor_type=cursor_type,
    )
