"""The newest change event per key, ranked in the collected Arrow rows instead of by a Spark window.

An upsert of change events (`sequence_by`) keeps each key's newest event (spark/cdc.py). In Spark that
ranking is a window over the key: a shuffle and a sort, which a fresh JVM (an Airflow task's) compiles
and runs cold, seconds for a 100k-event batch. Where staging collects the batch to the driver anyway
(load/staged_arrow.py), the Spark pass is instead the plain collection of every event, and pyarrow ranks the
events by key, sequence (newest first) and input order in one sort: the same event per key wins.

Two different events of one key at one sequence are counted in the same sort, as the window counts
them: neighbours of one key and sequence whose content differs. Their content is every event column,
those that `column_list` / `except_column_list` leave out of the table included: those travel to the
driver under helper names (EVENT_PREFIX) and are dropped after the ranking.

Used where every event column is a flat value pyarrow compares (numbers, text, binary, booleans, dates,
timestamps); where partial updates (`ignore_null_updates`) or truncates shape the events; and for
upserts only (scd2 keeps every event). Elsewhere staging ranks in Spark as before, and so it does where
every event together is more than the driver may hold (spark/stage.py): each key's newest may fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..model import null_updates
from ..model.cdc import sequence_columns
from ..model.naming import HELPER_PREFIX
from ..model.options import TableHints, WriteDisposition
from .cdc import flag_delete_events, left_out_columns, with_sequence_kept
from .frames import INPUT_ORDER
from .profile import Profile

EVENT_PREFIX = HELPER_PREFIX + "ev_"  # an event column left out of the table, kept until the ranking

_FLAT_TYPES = (
    T.NumericType,
    T.StringType,
    T.BinaryType,
    T.BooleanType,
    T.DateType,
    T.TimestampType,
    T.TimestampNTZType,
    T.NullType,
)


def ranks_on_driver(df: DataFrame, disposition: WriteDisposition, hints: TableHints) -> bool:
    """Whether an upsert's events, collected whole by staging's pass, are ranked there (see the module)."""
    if not hints.sequence_by or disposition.strategy != "upsert" or disposition.scd2 is not None:
        return False
    if null_updates.active(hints) or hints.apply_as_truncates or hints.hard_delete:
        return False
    return all(isinstance(f.dataType, _FLAT_TYPES) for f in df.schema.fields if f.name != INPUT_ORDER)


@dataclass(frozen=True)
class Events:
    """Every event, prepared row by row for the driver's ranking."""

    frame: DataFrame  # the events with their delete flag, sequence system columns and INPUT_ORDER
    content: tuple[str, ...]  # the columns (as collected) whose values make an event's content
    renamed: dict[str, str]  # event columns left out of the table -> their helper names until ranked

    @property
    def helpers(self) -> tuple[str, ...]:
        return (*self.renamed.values(), INPUT_ORDER)

    def collected_name(self, column: str) -> str:
        return self.renamed.get(column, column)


def prepared(df: DataFrame, hints: TableHints) -> Events:
    """The row-by-row part of staging change events: deletes flagged (`apply_as_deletes`), each event's
    sequence in the system columns, the columns the table does not take renamed rather than dropped."""
    if hints.apply_as_deletes:
        df = flag_delete_events(df, hints.apply_as_deletes)
    content = [c for c in df.columns if c != INPUT_ORDER]
    df = with_sequence_kept(df, hints.sequence_by)
    renamed = {c: EVENT_PREFIX + c for c in left_out_columns(df, hints)}
    if renamed:
        df = df.withColumnsRenamed(renamed)
    return Events(df, tuple(renamed.get(c, c) for c in content), renamed)


def raw_profile(arrow: pa.Table, events: Events, key_columns: list[str]) -> Profile:
    """The batch's rows and the null counts of its key and sequence columns, before the ranking. A
    column that arrived without a type (all null, so not collected) counts every row."""
    values = {}
    for column in key_columns:
        name = events.collected_name(column)
        collected = name in arrow.column_names
        values[f"null:{column}"] = arrow.column(name).null_count if collected else arrow.num_rows
    return Profile(arrow.num_rows, values)


_IS_NAN = "__is_nan"  # a sort helper: never a column of the events (they hold no "__" columns)


def newest_per_key(arrow: pa.Table, events: Events, key: tuple[str, ...], sequence_count: int):
    """Each key's newest event (greatest sequence, then first in the input), its helper columns dropped,
    and how many events differ from the one before them at their key's sequence (ties)."""
    sequence = sequence_columns(sequence_count)
    order = [(c, "ascending") for c in key]
    nan_first = {}  # Arrow puts NaN last in either direction; to Spark it is greater than any number
    for column in sequence:
        values = arrow.column(column)
        if pa.types.is_floating(values.type):
            nan_first[f"{column}{_IS_NAN}"] = pc.fill_null(pc.is_nan(values), False)
            order.append((f"{column}{_IS_NAN}", "descending"))
        order.append((column, "descending"))
    sortable = arrow
    for name, flags in nan_first.items():
        sortable = sortable.append_column(name, flags)
    ordered = arrow.take(pc.sort_indices(sortable, sort_keys=[*order, (INPUT_ORDER, "ascending")]))
    if ordered.num_rows == 0:
        return ordered.drop_columns(list(events.helpers)), 0
    same_key = _same_as_previous(ordered, key)
    same_sequence = pc.and_(same_key, _same_as_previous(ordered, sequence))
    content = [c for c in events.content if c in ordered.column_names]
    tied = pc.and_(same_sequence, pc.invert(_same_as_previous(ordered, content)))
    ties = int(pc.sum(tied.cast(pa.int64())).as_py() or 0)
    first_of_key = pa.concat_arrays([pa.array([True]), pc.invert(same_key)])
    newest = ordered.filter(first_of_key)
    return newest.drop_columns([c for c in events.helpers if c in newest.column_names]), ties


def _same_as_previous(table: pa.Table, columns) -> pa.Array:
    """For each row but the first: whether every column holds the value of the row before (two nulls,
    or two NaNs, are the same value, as they are to Spark's comparison of rows)."""
    same = pa.array([True] * (table.num_rows - 1), pa.bool_())
    for column in columns:
        values = table.column(column).combine_chunks()
        if pa.types.is_null(values.type):  # no value in any row
            continue
        current, previous = values.slice(1), values.slice(0, len(values) - 1)
        equal = pc.fill_null(pc.equal(current, previous), False)
        both_null = pc.and_(pc.is_null(current), pc.is_null(previous))
        equal = pc.or_(equal, both_null)
        if pa.types.is_floating(values.type):
            both_nan = pc.fill_null(pc.and_(pc.is_nan(current), pc.is_nan(previous)), False)
            equal = pc.or_(equal, both_nan)
        same = pc.and_(same, equal)
    return same
