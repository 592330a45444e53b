"""The incremental step of a load: choose the window, filter the batch to it, compute the new state,
and what the window means for the commit (replace the window's rows on append, record empty windows).

Glue between the pure window rules (`model.window`), the Spark cursor filter (`cursor_filter`) and
`load`, which hands in the table's stored cursor state from the store's snapshot.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import date, datetime, timezone

from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import CursorColumnMissingError
from ..model.incremental import Incremental
from ..model.window import Window, resolve_window
from ..plan.expressions import Cmp, Col, Expr, Lit, all_of
from ..plan.merge import MergePlan, Operation
from .cursor_filter import apply_cursor, cursor_type_of, next_state, spark_cursor_type

log = logging.getLogger(__name__)
# the column type of each cursor type, for an empty batch that lacks the cursor column
_CURSOR_COLUMN_TYPES = {
    "timestamp": T.TimestampType(),
    "timestamp_ntz": T.TimestampNTZType(),
    "date": T.DateType(),
    "int": T.LongType(),
    "float": T.DoubleType(),
    "string": T.StringType(),
}


def provisional_cursor_type(incremental: Incremental, table_schema) -> str:
    """The cursor type before the data is read: the table's column, else the initial value's kind."""
    path = incremental.cursor_path  # a column of the table (a dot in its name or not), else a struct's field
    if table_schema is not None and path in table_schema.fieldNames():
        return spark_cursor_type(table_schema[path].dataType, path)
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
    return WindowContext(incremental, stored_state, window, now)


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


def open_load_window(request, table_snapshot, stored_state: dict | None):
    """The window of an incremental load, before the data is read (a callable source gets it).

    `stored_state` is the table's cursor state as the store read it at the start of the load.
    """
    if request.cursor is None:
        return None
    if request.disposition.disposition == "replace":  # replace starts from initial_value every time
        stored_state = None
    cursor_type = provisional_cursor_type(
        request.cursor, table_snapshot.schema if table_snapshot is not None else None
    )
    return open_window(request.cursor, cursor_type, request.interval, request.run, stored_state)


def filter_to_window(batch, request, opened):
    """The batch cut to the window (a sloppy source cannot load rows outside it) and the table's new state."""
    if opened is None:
        return batch, None, None
    try:
        cursor_type = cursor_type_of(batch, request.cursor.cursor_path)
    except CursorColumnMissingError:
        path = request.cursor.cursor_path
        if "." in path or not batch.isEmpty():
            raise
        # an empty batch (`[]`) has no columns: it gets the cursor column, typed as the window expects,
        # and loads as any batch without rows in the window (nothing loaded, the cursor kept)
        cursor_type = opened.window.cursor_type
        batch = batch.withColumn(path, F.lit(None).cast(_CURSOR_COLUMN_TYPES[cursor_type]))
    opened = opened.for_cursor_type(cursor_type, request.interval, request.run)
    filtered, result = apply_cursor(
        batch,
        request.cursor,
        opened.window,
        opened.stored_state,
        table_primary_key=request.hints.primary_key,
        whole_row_dedup=request.disposition.disposition == "merge",
    )
    log.info(
        "cursor %s: %s rows read, %s in the window",
        request.cursor.cursor_path,
        result.rows_before,
        result.rows_after,
    )
    return filtered, opened, next_state(opened.stored_state, request.cursor, opened.window, result)


def replace_where_for(request, window):
    """An append of a window replaces the rows the window already holds, so re-runs are safe."""
    if window is None or window.stateful or request.disposition.disposition != "append":
        return None
    if not request.window_overwrite:
        return None
    return replace_predicate(window, request.cursor.cursor_path)


def record_empty_window(plan: MergePlan, window) -> MergePlan:
    """A requested window with no rows is still a load: an empty commit records that it was loaded."""
    if plan.operation is not Operation.NOTHING or window is None or window.stateful:
        return plan
    return MergePlan(Operation.WRITE, reason="window without rows: an empty commit records it")
