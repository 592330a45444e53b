"""Staging of partial updates (`ignore_null_updates`, spec/null_updates.py): per key, each chosen column's
newest non-null value in the batch and the sequence of its event.

Run before the newest event per key is picked (spark/cdc.py), so that the row kept carries, in each chosen
column, the newest value any event of its key carried, and in `sequence_of(column)` that event's sequence
(null where no event of the key carried one). With apply_as_deletes, a delete resets the row: the values
are taken from the events after the key's newest delete in the batch, whose sequence the DELETED_AT helper
keeps for the MERGE (plan/null_updates.py) and the tombstones (null_update_tombstones.py). Two events of
one key at one sequence are refused before.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ..errors import MissingKeyColumnError
from ..plan.merge import HARD_DELETE_FLAG
from ..spec.null_updates import DELETED_AT, active, sequence_of, subject_columns
from ..spec.options import TableHints
from .frames import INPUT_ORDER


def newest_values(df: DataFrame, hints: TableHints) -> DataFrame:
    """Every event with its key's newest non-null value of each chosen column, and that value's sequence;
    with apply_as_deletes, only of the events after the key's newest delete, whose sequence is kept in
    DELETED_AT. A listed column the events lack is refused."""
    if not active(hints):
        return df
    data = [c for c in df.columns if c != INPUT_ORDER]
    for column in hints.ignore_null_updates_column_list:
        if column not in df.columns:
            raise MissingKeyColumnError(column, "ignore_null_updates_column_list", data)
    chosen = subject_columns(hints, df.columns)
    (sequence,) = hints.sequence_by
    key = Window.partitionBy(*hints.primary_key)
    newest_first = key.orderBy(F.col(sequence).desc(), F.col(INPUT_ORDER).asc()).rowsBetween(
        Window.unboundedPreceding, Window.unboundedFollowing
    )
    replaced = {}
    since = F.lit(True)  # the events after the key's newest delete in the batch (all, without deletes)
    if hints.apply_as_deletes:
        deletes = F.when(F.col(HARD_DELETE_FLAG), F.col(sequence))  # flagged by the stage step
        df = df.withColumn(DELETED_AT, F.max(deletes).over(key))
        since = F.col(DELETED_AT).isNull() | (F.col(sequence) > F.col(DELETED_AT))
    for column in chosen:
        value = F.when(since, F.col(f"`{column}`"))
        replaced[column] = F.first(value, ignorenulls=True).over(newest_first).alias(column)
        replaced[sequence_of(column)] = (
            F.max(F.when(value.isNotNull(), F.col(sequence))).over(key).alias(sequence_of(column))
        )
    kept = [replaced.pop(c) if c in replaced else F.col(f"`{c}`") for c in df.columns]
    return df.select(*kept, *replaced.values())
