"""The incremental step of a load: choose the window, filter the batch to it, compute the new state,
and what the window means for the commit (replace the window's rows on append, record empty windows).

Glue between the pure window rules (window.py), the Spark cursor filter (cursor.py) and the job.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import date, datetime, timezone

from . import state
from .errors import ConfigError
from .expressions import Cmp, Col, Expr, Lit, all_of
from .incremental import Incremental
from .planning import MergePlan, Operation
from .window import Window, resolve_window

log = logging.getLogger(__name__)


def parse_incremental(value: Incremental | dict | None, normalize) -> Incremental | None:
    """The incremental with its cursor path's first segment in the table's naming convention."""
    if value is None:
        return None
    if isinstance(value, dict):
        value = Incremental.from_dict(value)
    if not isinstance(value, Incremental):
        raise ConfigError("incremental", f"{value!r} must be an Incremental or its to_dict() form")
    first, *rest = value.cursor_path.split(".")
    path = ".".join([normalize(first), *rest])
    primary_key = value.primary_key
    if primary_key:
        primary_key = tuple(normalize(c) for c in primary_key)
    return dataclasses.replace(value, cursor_path=path, primary_key=primary_key)


def parse_interval(value) -> tuple[datetime | None, datetime | None] | None:
    """Airflow's (data_interval_start, data_interval_end), as aware datetimes; ISO strings accepted."""
    if value is None:
        return None
    try:
        start, end = value
    except (TypeError, ValueError):
        raise ConfigError("data_interval", f"{value!r} must be a pair (start, end)") from None
    return _instant(start, "data_interval[0]"), _instant(end, "data_interval[1]")


def _instant(value, argument: str) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value if value is None or value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, str):
        try:
            return _instant(datetime.fromisoformat(value.replace("Z", "+00:00")), argument)
        except ValueError:
            pass
    raise ConfigError(argument, f"{value!r} is not a datetime or an ISO 8601 timestamp")


def provisional_cursor_type(incremental: Incremental, table_schema) -> str:
    """The cursor type before the data is read: the table's column, else the initial value's kind."""
    from .cursor import spark_cursor_type

    first = incremental.cursor_path.split(".")[0]
    if table_schema is not None and first in table_schema.fieldNames() and "." not in incremental.cursor_path:
        return spark_cursor_type(table_schema[first].dataType, incremental.cursor_path)
    value = incremental.initial_value
    if isinstance(value, bool) or value is None:
        return "timestamp"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, date) and not isinstance(value, datetime):
        return "date"
    return "timestamp"


@dataclass(frozen=True)
class WindowContext:
    incremental: Incremental
    stored_state: dict | None
    window: Window
    now: datetime

    def for_cursor_type(self, cursor_type: str, data_interval, run_context) -> WindowContext:
        if cursor_type == self.window.cursor_type:
            return self
        window = resolve_window(
            self.incremental,
            cursor_type=cursor_type,
            data_interval=data_interval,
            run_context=run_context,
            stored_state=self.stored_state,
            now=self.now,
        )
        return dataclasses.replace(self, window=window)


def open_window(
    incremental: Incremental, cursor_type: str, data_interval, run_context, stored_state
) -> WindowContext:
    now = datetime.now(timezone.utc)
    window = resolve_window(
        incremental,
        cursor_type=cursor_type,
        data_interval=data_interval,
        run_context=run_context,
        stored_state=stored_state,
        now=now,
    )
    log.info("window of this load (%s): %s", window.rule, _describe(window))
    return WindowContext(incremental, stored_state, window, now)


def _describe(window: Window) -> str:
    left = "[" if window.start_closed else "("
    right = "]" if window.end_closed else ")"
    kind = "stateful" if window.stateful else "stateless"
    return f"{left}{window.start}, {window.end}{right} {kind}"


def replace_predicate(window: Window, cursor_path: str) -> Expr | None:
    """Rows of the table inside the window: what an append re-run of the window replaces."""
    if "." in cursor_path:
        log.warning(
            "window_overwrite needs a top-level cursor column; %r is nested, so rows are appended",
            cursor_path,
        )
        return None
    if window.descending:
        return None
    bounds: list[Expr] = []
    column = Col(cursor_path)
    if window.start is not None:
        bounds.append(Cmp(">=" if window.start_closed else ">", column, Lit(window.start)))
    if window.end is not None:
        bounds.append(Cmp("<=" if window.end_closed else "<", column, Lit(window.end)))
    return all_of(*bounds) if bounds else None


def open_load_window(request, snapshot):
    """The window of an incremental load, before the data is read (a callable source gets it)."""
    if request.incremental is None:
        return None
    stored = None
    if request.disposition.disposition != "replace":  # replace starts from initial_value every time
        stored = state.latest_state(request.dataset, request.pipeline_name, request.table_name)
    cursor_type = provisional_cursor_type(
        request.incremental, snapshot.schema if snapshot is not None else None
    )
    return open_window(request.incremental, cursor_type, request.data_interval, request.run_context, stored)


def filter_to_window(batch, request, opened):
    """The batch cut to the window (a sloppy source cannot load rows outside it) and the table's new state."""
    if opened is None:
        return batch, None, None
    from .cursor import apply_cursor, cursor_type_of, next_state

    opened = opened.for_cursor_type(
        cursor_type_of(batch, request.incremental.cursor_path), request.data_interval, request.run_context
    )
    filtered, result = apply_cursor(
        batch,
        request.incremental,
        opened.window,
        opened.stored_state,
        table_primary_key=request.hints.primary_key,
        whole_row_dedup=request.disposition.disposition == "merge",
    )
    log.info(
        "cursor %s: %s rows read, %s in the window",
        request.incremental.cursor_path,
        result.rows_before,
        result.rows_after,
    )
    return filtered, opened, next_state(opened.stored_state, request.incremental, opened.window, result)


def replace_where_for(request, window):
    """An append of a window replaces the rows the window already holds, so re-runs are safe."""
    if window is None or window.stateful or request.disposition.disposition != "append":
        return None
    if not request.window_overwrite:
        return None
    return replace_predicate(window, request.incremental.cursor_path)


def record_empty_window(plan: MergePlan, window) -> MergePlan:
    """A requested window with no rows is still a load: an empty commit records that it was loaded."""
    if plan.operation is not Operation.NOTHING or window is None or window.stateful:
        return plan
    return MergePlan(Operation.WRITE, reason="window without rows: an empty commit records it")
