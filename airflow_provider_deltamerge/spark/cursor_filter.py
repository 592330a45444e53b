"""The Spark side of incremental loading: keep the rows of a window, drop boundary duplicates, and
compute the cursor state the load leaves behind (INC-3, INC-4, INC-6..INC-9, INC-11).

`apply_cursor` runs two small Spark jobs (one aggregate, one collect of at most MAX_UNIQUE_HASHES
hashes) and returns the filtered DataFrame lazily; `next_state` is pure.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import (
    ConfigError,
    CursorColumnMissingError,
    CursorValueMissingError,
    MissingKeyColumnError,
    SourceError,
)
from ..model.incremental import EPOCH, Incremental, coerce_bound, cursor_state, json_safe
from ..model.naming import HELPER_PREFIX, SYSTEM_PREFIX
from ..model.window import Window
from . import held
from .frames import materialize, short_hash
from .names import col

log = logging.getLogger(__name__)

# Hashes of the rows at the newest cursor value kept for the next run's boundary dedup (INC-8, bounded:
# rows beyond this many sharing one cursor value may be loaded again by the next stateful run).
MAX_UNIQUE_HASHES = 1000
MAX_RECORDED_WINDOWS = 100  # loaded windows kept in the state, newest last
HASH_LENGTH = 20  # base64 characters of a SHA-256 (120 bits), the length of dlt's hashes
_CURSOR, _HASH, _KEEP, _DUPLICATE = (
    HELPER_PREFIX + n for n in ("inc_cursor", "inc_hash", "inc_keep", "inc_duplicate")
)
_NOT_ROW_DATA = (
    SYSTEM_PREFIX + "_",
    HELPER_PREFIX,
)  # system and helper columns are not part of a whole-row hash


@dataclass(frozen=True)
class CursorResult:
    """What apply_cursor kept, and the cursor value and boundary hashes of the kept rows (JSON-safe)."""

    last_value: str | int | float | None
    unique_hashes: tuple[str, ...]
    rows_before: int
    rows_after: int
    rows_missing_cursor: int
    rows_boundary_duplicates: int = 0
    # columns whose values are all in rows the cursor dropped: not created, as dlt never sees them
    filtered_columns: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["unique_hashes"] = list(self.unique_hashes)
        return out


def spark_cursor_type(data_type: T.DataType, cursor_path: str = "cursor") -> str:
    """The resolve_window cursor_type of a Spark column type, or a ConfigError for unusable types."""
    if isinstance(data_type, T.TimestampNTZType):
        return "timestamp_ntz"
    if isinstance(data_type, T.TimestampType):
        return "timestamp"
    if isinstance(data_type, T.DateType):
        return "date"
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "int"
    if isinstance(data_type, T.DecimalType):
        return "int" if data_type.scale == 0 else "float"
    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        return "float"
    if isinstance(data_type, (T.StringType, T.CharType, T.VarcharType)):
        return "string"
    raise ConfigError(
        "cursor_path",
        f"{cursor_path!r} is {data_type.simpleString()}; a cursor must be a timestamp, date, integer, "
        "floating point, decimal or string column",
    )


def path_segments(columns: list[str], cursor_path: str) -> tuple[str, ...]:
    """The cursor path's segments: a top-level column of that very name (dots and all), else a dotted
    path into structs."""
    return (cursor_path,) if cursor_path in columns else tuple(cursor_path.split("."))


def cursor_field_type(df: DataFrame, cursor_path: str) -> T.DataType:
    """The Spark type at a dotted path into structs, or CursorColumnMissingError."""
    data_type: T.DataType = df.schema
    for segment in path_segments(df.columns, cursor_path):
        names = data_type.fieldNames() if isinstance(data_type, T.StructType) else []
        if segment not in names:  # the load's helper columns (__ord) are not the user's data
            raise CursorColumnMissingError(
                cursor_path, [c for c in df.columns if not c.startswith(HELPER_PREFIX)]
            )
        data_type = data_type[segment].dataType
    return data_type


def cursor_type_of(df: DataFrame, cursor_path: str) -> str:
    return spark_cursor_type(cursor_field_type(df, resolve_cursor_path(df, cursor_path)), cursor_path)


def resolve_cursor_path(df: DataFrame, cursor_path: str) -> str:
    """The cursor's path in the batch: a dotted path into structs, or the column dlt's layout flattened
    it into (`meta.updated` -> `meta__updated`)."""
    first, _, rest = cursor_path.partition(".")
    flattened = cursor_path.replace(".", "__")
    if rest and cursor_path not in df.columns and first not in df.columns and flattened in df.columns:
        return flattened
    return cursor_path


def dedup_key(
    incremental: Incremental, table_primary_key: tuple[str, ...] = (), whole_row: bool = False
) -> tuple[str, ...] | None:
    """INC-7 dedup key: () = dedup off, None = whole row, else the key columns.

    `whole_row=True` (merge dispositions, INC-17 as we differ) compares whole rows, so an update that
    keeps the boundary cursor value is loaded.
    """
    if incremental.primary_key == ():
        return ()
    if whole_row:
        return None
    return incremental.primary_key or tuple(table_primary_key) or None


# Cursor types whose range a source may be narrowed to before the batch is read (`narrowed_to_window`):
# not text, whose mixed formats are refused only if every row is seen, nor floats (-0.0 and NaN).
_NARROWED_TYPES = ("int", "date", "timestamp", "timestamp_ntz")


def narrowed_to_window(
    df: DataFrame, cursor_path: str, window: Window | None, normalize: Callable[[str], str]
) -> DataFrame:
    """A typed source (not Python rows) cut to the window's range, or missing the cursor, before the
    load adds its input order (which stops Spark pushing filters into the source), so that a source
    Spark can filter while reading (Parquet, Delta, JDBC) leaves the rows outside the window unread. The
    cursor filter (`apply_cursor`) drops those rows anyway, with this very condition; only a top-level
    cursor column whose type is the window's own is narrowed, else the source is returned as it is."""
    if window is None or (window.start is None and window.end is None) or "." in cursor_path:
        return df
    if window.cursor_type not in _NARROWED_TYPES:  # before the schema: a round trip on Spark Connect
        return df
    named = [f for f in df.schema.fields if normalize(f.name) == cursor_path]
    if len(named) != 1:
        return df
    try:
        if spark_cursor_type(named[0].dataType, cursor_path) != window.cursor_type:
            return df
    except ConfigError:  # a column no cursor can be: refused by the cursor filter, with its name
        return df
    cursor = col(named[0].name)
    return df.filter(cursor.isNull() | _in_window(cursor, window))


def apply_cursor(
    df: DataFrame,
    incremental: Incremental,
    window: Window,
    stored_state: dict | None,
    *,
    table_primary_key: tuple[str, ...] = (),
    whole_row_dedup: bool = False,
) -> tuple[DataFrame, CursorResult]:
    """Rows of `df` inside `window`, minus boundary duplicates; null cursors per on_cursor_value_missing.

    Call it before system columns are added. `df` has normalised top-level names; incremental.cursor_path
    is normalised on its first segment.
    """
    path = resolve_cursor_path(df, incremental.cursor_path)
    cursor_field_type(df, path)
    key = dedup_key(incremental, table_primary_key, whole_row_dedup)
    stored = cursor_state(stored_state, incremental.cursor_path)
    segments = path_segments(df.columns, path)
    annotated = df.withColumn(_CURSOR, _cursor_column(segments))
    if incremental.records_boundary_hashes:
        annotated = annotated.withColumn(_HASH, _row_hash(df, key, incremental.primary_key is not None))
    annotated = _flag_rows(annotated, incremental, window, stored.get("unique_hashes") or [])
    # Read the source once: a live source (a JDBC table taking inserts) read again for the summary, the
    # hashes and the commit would give a last_value for other rows than those loaded, and the next run
    # would load the difference twice.
    annotated = materialize(annotated)
    if window.cursor_type == "string":
        _check_one_timestamp_format(annotated, incremental.cursor_path)
    kept = (segments[0], *table_primary_key, *(incremental.primary_key or ()))
    data = [c for c in df.columns if c not in kept and not c.startswith(_NOT_ROW_DATA)]
    result = _summarise(annotated, incremental, window, data)
    held.counted(annotated, result.rows_before)  # the batch's estimate bounded by its rows (spark/held.py)
    if result.rows_missing_cursor and incremental.on_cursor_value_missing == "raise":
        raise CursorValueMissingError(incremental.cursor_path, result.rows_missing_cursor, result.rows_before)
    if result.last_value is not None and _HASH in annotated.columns:
        last_value = coerce_bound(result.last_value, window.cursor_type, "last_value")
        result = replace(result, unique_hashes=_boundary_hashes(annotated, last_value, window.cursor_type))
    helpers = [c for c in (_CURSOR, _HASH, _KEEP, _DUPLICATE) if c in annotated.columns]
    return annotated.filter(F.col(_KEEP)).drop(*helpers, *result.filtered_columns), result


def _check_one_timestamp_format(annotated: DataFrame, cursor_path: str) -> None:
    """A text cursor compares as text: timestamps written two ways ('2024-01-01 12:00:00' and
    '2024-01-01T12:00:00Z') would be ordered wrongly and rows skipped silently, so they are refused.
    Bare dates order correctly beside any one timestamp format and are left out of the check."""
    timestamps = annotated.filter(F.col(_CURSOR).rlike(r"^\d{4}-\d{2}-\d{2}.") & (F.length(_CURSOR) > 10))
    shapes = (
        timestamps.groupBy(F.regexp_replace(F.col(_CURSOR), "[0-9]", "9").alias("shape"))
        .agg(F.min(F.col(_CURSOR)).alias("example"))
        .orderBy("shape")
        .limit(2)
        .collect()
    )
    if len(shapes) > 1:
        first, second = (row["example"] for row in shapes)
        raise SourceError(
            f"incremental cursor {cursor_path!r} is text holding timestamps written in more than one way, "
            f"e.g. {first!r} and {second!r}; as text they compare wrongly and rows would be skipped "
            "silently. Nothing was loaded. Write the cursor one way in the source, or cast it to a timestamp."
        )


def _cursor_column(segments: tuple[str, ...]) -> Column:
    first, *rest = segments
    column = col(first)
    for segment in rest:
        column = column.getField(segment)
    return column


def _row_hash(df: DataFrame, key: tuple[str, ...] | None, key_is_incremental: bool) -> Column:
    if key is None:
        columns = sorted(c for c in df.columns if not c.startswith(_NOT_ROW_DATA))
    else:
        hint = "incremental.primary_key" if key_is_incremental else "primary_key"
        for column in key:
            if column not in df.columns:
                raise MissingKeyColumnError(column, hint, df.columns)
        columns = list(key)
    payload = F.to_json(F.struct(*(col(c) for c in columns)))
    return short_hash(payload, HASH_LENGTH)


def _flag_rows(
    annotated: DataFrame, incremental: Incremental, window: Window, stored_hashes: list[str]
) -> DataFrame:
    cursor = F.col(_CURSOR)
    duplicate = F.lit(False)
    if window.boundary_dedup and window.start is not None and stored_hashes and _HASH in annotated.columns:
        duplicate = (cursor == _literal(window.start, window.cursor_type)) & F.col(_HASH).isin(stored_hashes)
    in_range = _in_window(cursor, window)
    keep_missing = F.lit(incremental.on_cursor_value_missing == "include")
    return annotated.withColumn(_DUPLICATE, cursor.isNotNull() & in_range & duplicate).withColumn(
        _KEEP, F.when(cursor.isNull(), keep_missing).otherwise(in_range & ~duplicate)
    )


def _in_window(cursor: Column, window: Window) -> Column:
    """INC-3: start <(=) cursor <(=) end, mirrored for descending windows."""
    low, low_closed, high, high_closed = (window.start, window.start_closed, window.end, window.end_closed)
    if window.descending:
        low, low_closed, high, high_closed = high, high_closed, low, low_closed
    condition = F.lit(True)
    if low is not None:
        bound = _literal(low, window.cursor_type)
        condition = condition & (cursor >= bound if low_closed else cursor > bound)
    if high is not None:
        bound = _literal(high, window.cursor_type)
        condition = condition & (cursor <= bound if high_closed else cursor < bound)
    return condition


def _literal(value: Any, cursor_type: str) -> Column:
    """A Spark literal of the cursor's type that means the same instant whatever the session time zone."""
    if cursor_type == "timestamp":
        return F.lit(value.isoformat()).cast("timestamp")  # carries its +00:00 offset
    if cursor_type == "timestamp_ntz":
        return F.lit(value.isoformat()).cast("timestamp_ntz")
    if cursor_type == "int":  # a decimal(p,0) cursor's values may lie past a long's range
        return F.lit(value).cast("long") if -(2**63) <= value < 2**63 else F.lit(Decimal(value))
    if cursor_type == "float":
        return F.lit(float(value)).cast("double")
    return F.lit(value)


def _summarise(
    annotated: DataFrame, incremental: Incremental, window: Window, data_columns: list[str]
) -> CursorResult:
    """The counts and newest cursor value of the kept rows, and the data columns (of `data_columns`)
    holding values only in dropped rows, in one job over the materialised rows."""
    kept_cursor = F.when(F.col(_KEEP) & F.col(_CURSOR).isNotNull(), F.col(_CURSOR))
    newest = F.max(kept_cursor) if incremental.last_value_func == "max" else F.min(kept_cursor)
    if window.cursor_type == "timestamp":
        newest = F.unix_micros(newest)  # exact, and free of the driver's local time zone
    elif window.cursor_type == "timestamp_ntz":
        newest = newest.cast("string")
    totals = annotated.agg(
        F.count(F.lit(1)).alias("rows_before"),
        F.sum(F.col(_CURSOR).isNull().cast("long")).alias("missing"),
        F.sum(F.col(_KEEP).cast("long")).alias("rows_after"),
        F.sum(F.col(_DUPLICATE).cast("long")).alias("duplicates"),
        newest.alias("last_value"),
        *(F.count(col(c)).alias(f"all_{i}") for i, c in enumerate(data_columns)),
        *(F.count(F.when(F.col(_KEEP), col(c))).alias(f"kept_{i}") for i, c in enumerate(data_columns)),
    ).first()
    filtered = tuple(  # where no row is kept, the batch's columns still shape the empty window's commit
        c
        for i, c in enumerate(data_columns)
        if totals["rows_after"] and totals[f"all_{i}"] and not totals[f"kept_{i}"]
    )
    return CursorResult(
        last_value=json_safe(_python_value(totals["last_value"], window.cursor_type)),
        unique_hashes=(),
        rows_before=int(totals["rows_before"]),
        rows_after=int(totals["rows_after"] or 0),
        rows_missing_cursor=int(totals["missing"] or 0),
        rows_boundary_duplicates=int(totals["duplicates"] or 0),
        filtered_columns=filtered,
    )


def _python_value(collected: Any, cursor_type: str) -> Any:
    if collected is None:
        return None
    if isinstance(collected, Decimal):  # a decimal cursor: an integer where its scale is 0, else a float,
        return int(collected) if cursor_type == "int" else float(collected)  # as Spark compares it
    if cursor_type == "timestamp":
        return EPOCH + timedelta(microseconds=collected)
    if cursor_type == "timestamp_ntz":
        whole, _, fraction = collected.partition(".")  # Spark trims trailing zeros of the fraction
        return datetime.fromisoformat(whole).replace(
            microsecond=int(fraction.ljust(6, "0")) if fraction else 0
        )
    return collected


def _boundary_hashes(annotated: DataFrame, last_value: Any, cursor_type: str) -> tuple[str, ...]:
    """INC-8: distinct hashes of the kept rows at the new last value, at most MAX_UNIQUE_HASHES."""
    at_boundary = annotated.filter(F.col(_KEEP) & (F.col(_CURSOR) == _literal(last_value, cursor_type)))
    rows = at_boundary.select(_HASH).distinct().orderBy(_HASH).limit(MAX_UNIQUE_HASHES + 1).collect()
    if len(rows) > MAX_UNIQUE_HASHES:
        log.warning(
            "more than %d rows share the cursor value %r; only %d boundary hashes are kept, so the next "
            "run may load some of them again. Use a finer cursor or a merge disposition.",
            MAX_UNIQUE_HASHES,
            json_safe(last_value),
            MAX_UNIQUE_HASHES,
        )
    return tuple(row[_HASH] for row in rows[:MAX_UNIQUE_HASHES])


def next_state(
    previous_state: dict | None, incremental: Incremental, window: Window, result: CursorResult
) -> dict:
    """The table's state after this load (pure). last_value never moves backwards under last_value_func;
    start_value changes only for stateful loads that kept rows (INC-18)."""
    state = copy.deepcopy(previous_state) if previous_state else {}
    previous = cursor_state(state, incremental.cursor_path)
    last_value, hashes = _advance(previous, incremental, window, result)
    start_value = previous.get("start_value")
    if window.stateful and result.rows_after:
        start_value = json_safe(window.start)
    state.setdefault("incremental", {})[incremental.cursor_path] = {
        "initial_value": json_safe(incremental.initial_value),
        "last_value": last_value,
        "unique_hashes": list(hashes) if incremental.records_boundary_hashes else [],
        "start_value": start_value,
    }
    loaded = {**window.as_dict(), "rows": result.rows_after, "last_value": result.last_value}
    state["windows"] = (list(state.get("windows") or []) + [loaded])[-MAX_RECORDED_WINDOWS:]
    return state


def _advance(
    previous: dict, incremental: Incremental, window: Window, result: CursorResult
) -> tuple[Any, list]:
    """INC-4 / INC-8: the newer of the stored and the loaded last value, with its boundary hashes."""
    stored, stored_hashes = previous.get("last_value"), list(previous.get("unique_hashes") or [])
    if result.last_value is None:
        return stored, stored_hashes
    if stored is None:
        return result.last_value, list(result.unique_hashes)
    old = coerce_bound(stored, window.cursor_type, "stored last_value")
    new = coerce_bound(result.last_value, window.cursor_type, "loaded last_value")
    if new == old:
        known = set(stored_hashes)
        merged = stored_hashes + [h for h in result.unique_hashes if h not in known]
        return stored, merged[:MAX_UNIQUE_HASHES]
    moves_on = new > old if incremental.last_value_func == "max" else new < old
    return (result.last_value, list(result.unique_hashes)) if moves_on else (stored, stored_hashes)
