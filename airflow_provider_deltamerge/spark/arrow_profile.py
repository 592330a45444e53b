"""The profile of a batch read from its collected Arrow data instead of observed in Spark.

Where staging's one pass collects the staged batch to the driver and preparation keeps every row of the
source (no dedup, no ranking of events), every count staging needs is in the collected rows: the rows,
the null keys, the key bounds, the dates Delta readers cannot read back and the longest partition folder
name. pyarrow counts them in a few vectorised passes over memory, and the Spark pass is then a plain
collection: no observed node, whose aggregates a fresh JVM otherwise compiles and runs row by row.

The aggregates have the names and the forms of spark/profile.py's (`Profile`), so that every check reads
them alike; a timestamp key's bounds are microseconds since the epoch, a date's and a timestamp_ntz's are
plain Python values.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .profile import STORABLE_DATES, Profile

_EPOCH = date(1970, 1, 1)
_STORABLE_DAYS = tuple((date.fromisoformat(d) - _EPOCH).days for d in STORABLE_DATES)


def profiled(
    arrow: pa.Table, nulls: list[str], dates: list[str], bounds: list[str], folders: list[str]
) -> Profile | None:
    """The Profile of `arrow`: null counts of `nulls`, values outside STORABLE_DATES in `dates`, min and
    max of `bounds`, the longest `<column>=<value>` folder name of `folders`. None where a timestamp
    with a time zone lies within a day of a storable limit, whose date depends on the session's time
    zone: the caller asks Spark then."""
    values: dict[str, Any] = {}
    for column in nulls:
        values[f"null:{column}"] = arrow.column(column).null_count
    for column in dates:
        outside = _outside_storable(arrow.column(column))
        if outside is None:
            return None
        values[f"dates:{column}"] = outside
    for column in bounds:
        values.update(_bounds(arrow.column(column), column))
    for column in folders:
        values[f"folder:{column}"] = _longest_folder(arrow.column(column), column)
    return Profile(arrow.num_rows, values)


def _days(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each value's day since the epoch, floored; a zoned timestamp's in UTC."""
    if pa.types.is_timestamp(values.type):
        micros = values.cast(pa.timestamp("us", tz=values.type.tz)).cast(pa.int64())
        values = micros.cast(pa.timestamp("us"))
    return values.cast(pa.date32()).cast(pa.int32())


def _outside_storable(values: pa.ChunkedArray) -> int | None:
    """How many values have a date outside STORABLE_DATES; None where a zone decides it: a zone moves a
    timestamp's date by a day at most, so a UTC date on either side of a limit could fall on both."""
    days, (low, high) = _days(values), _STORABLE_DAYS
    if pa.types.is_timestamp(values.type) and values.type.tz is not None:
        undecided = pa.array([low - 1, low, high, high + 1], type=pa.int32())
        if pc.any(pc.is_in(days, value_set=undecided)).as_py():
            return None
    outside = pc.or_(pc.less(days, low), pc.greater(days, high))
    return int(pc.sum(outside.cast(pa.int64())).as_py() or 0)


def _bounds(values: pa.ChunkedArray, column: str) -> dict[str, Any]:
    kind = values.type
    if pa.types.is_timestamp(kind) and kind.tz is not None:  # as Spark's unix_micros
        values = values.cast(pa.timestamp("us", tz=kind.tz)).cast(pa.int64())
    extremes = pc.min_max(values)
    try:
        low, high = extremes["min"].as_py(), extremes["max"].as_py()
    except (OverflowError, ValueError):  # a date Python cannot hold: refused as unstorable before use
        low = high = None
    return {f"min:{column}": low, f"max:{column}": high}


def _longest_folder(values: pa.ChunkedArray, column: str) -> int | None:
    """As profile.partition_folder_bytes: every byte but the unreserved ASCII characters percent-encoded."""
    if values.null_count == len(values):
        return None
    kept = pc.utf8_length(pc.replace_substring_regex(values, "[^A-Za-z0-9._~-]", ""))
    escaped = pc.add(kept, pc.multiply(pc.subtract(pc.binary_length(values), kept), 3))
    return len(column.encode("utf-8")) + 1 + int(pc.max(escaped).as_py())
