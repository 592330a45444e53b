"""Staging of partial updates (`ignore_null_updates`, model/null_updates.py): per key, each chosen column's
newest non-null value in the batch and the sequence of its event.

Run before the newest event per key is picked (spark/cdc.py), so that the row kept carries, in each chosen
column, the newest value any event of its key carried, and in `sequences_of(column)` that event's sequence
(null where no event of the key carried one). With apply_as_deletes, a delete resets the row: the values
are taken from the events after the key's newest delete in the batch, whose sequence the `deleted_at`
helpers keep for the MERGE (plan/null_updates.py) and the tombstones (load/null_update_tombstones.py). Two
events of one key at one sequence are refused before. A sequence of several columns compares in order.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import MissingKeyColumnError
from ..model.null_updates import active, deleted_at, field_sequences_of, sequences_of, subject_columns
from ..model.options import TableHints
from ..plan.merge import HARD_DELETE_FLAG
from . import null_update_fields as fields
from .frames import INPUT_ORDER
from .names import col, cols


def newest_values(df: DataFrame, hints: TableHints) -> DataFrame:
    """Every event with its key's newest non-null value of each chosen column, and that value's sequence;
    with apply_as_deletes, only of the events after the key's newest delete, whose sequence is kept in
    the `deleted_at` helpers. A sequence of several columns is compared in order. A listed column the
    events lack is refused."""
    if not active(hints):
        return df
    data = [c for c in df.columns if c != INPUT_ORDER]
    for column in hints.ignore_null_updates_column_list:
        if column not in df.columns:
            raise MissingKeyColumnError(column, "ignore_null_updates_column_list", data)
    chosen = subject_columns(hints, df.columns)
    sequence = hints.sequence_by
    key = Window.partitionBy(*cols(hints.primary_key))
    order = [col(c).desc() for c in sequence]
    newest_first = key.orderBy(*order, F.col(INPUT_ORDER).asc()).rowsBetween(
        Window.unboundedPreceding, Window.unboundedFollowing
    )
    event_sequence = _in_order(sequence)
    replaced = {}
    since = F.lit(True)  # the events after the key's newest delete in the batch (all, without deletes)
    if hints.apply_as_deletes:
        newest_delete = F.max(F.when(F.col(HARD_DELETE_FLAG), event_sequence)).over(key)  # flagged by staging
        helpers = deleted_at(len(sequence))
        df = df.withColumns(_parts(newest_delete, helpers))
        since = F.col(helpers[0]).isNull() | (event_sequence > _in_order(helpers))
    events = fields.Events(since, event_sequence, key, newest_first)
    for column in chosen:
        kind = df.schema[column].dataType
        if isinstance(kind, T.StructType) and kind.fields:  # field by field
            fields.check_fields(column, kind)
            newest, carried, shaped = fields.newest_fields(col(column), kind, events, len(sequence))
            replaced[column] = newest.alias(column)
            names = field_sequences_of(column, len(sequence))
            replaced.update({name: part.alias(name) for name, part in zip(names, shaped, strict=True)})
        else:
            value = F.when(since, col(column))
            replaced[column] = F.first(value, ignorenulls=True).over(newest_first).alias(column)
            carried = F.max(F.when(value.isNotNull(), event_sequence)).over(key)
        parts = _parts(carried, sequences_of(column, len(sequence)))
        replaced.update({name: part.alias(name) for name, part in parts.items()})
    kept = [replaced.pop(c) if c in replaced else col(c) for c in df.columns]
    return df.select(*kept, *replaced.values())


def _in_order(columns) -> Column:
    """The sequence in `columns` as one struct, which Spark compares field by field, in order."""
    return F.struct(*(col(c).alias(f"part{i}") for i, c in enumerate(columns, 1)))


def _parts(sequence: Column, names: tuple[str, ...]) -> dict[str, Column]:
    """Each field of a sequence struct (`_in_order`) as the column of its name in `names`, in order."""
    return {name: sequence.getField(f"part{i}") for i, name in enumerate(names, 1)}
