"""Staging of change events (`sequence_by`, spec/cdc.py): the newest event per key (upsert) or every
event (scd2), its sequence kept.

Two events of one key at one sequence cannot be ordered: identical ones (an event delivered twice) are
one event, different ones are refused, naming them. Null sequences are refused by the key checks of
the stage step, which check the sequence columns as they check the key.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ..errors import MissingKeyColumnError, SequenceError
from ..spec.cdc import sequence_columns
from ..spec.naming import HELPER_PREFIX, SYSTEM_PREFIX
from ..spec.options import TableHints
from .frames import DUPLICATE_EXAMPLES, INPUT_ORDER, RANK

VERSIONS = "__versions"


def check_ordered_events(df: DataFrame, primary_key: tuple[str, ...], sequence: tuple[str, ...]) -> None:
    """Refuse two different events of one key at the same sequence (one Spark job)."""
    data = [c for c in df.columns if c != INPUT_ORDER]
    content = F.to_json(F.struct(*(F.col(f"`{c}`") for c in data)))
    present = F.lit(True)
    for column in sequence:
        present = present & F.col(column).isNotNull()
    tied = (
        df.where(present)
        .groupBy(*primary_key, *sequence)
        .agg(F.count_distinct(content).alias(VERSIONS))
        .where(F.col(VERSIONS) > 1)
    )
    found = tied.limit(DUPLICATE_EXAMPLES).collect()
    if found:
        examples = sorted(
            ((_one(tuple(r[c] for c in primary_key)), _one(tuple(r[c] for c in sequence))) for r in found),
            key=repr,
        )
        raise SequenceError(sequence, "key(s) with different events at one sequence", examples, tied.count())


def newest_event_per_key(df: DataFrame, primary_key: tuple[str, ...], sequence: tuple[str, ...]) -> DataFrame:
    """One event per key, the one with the greatest sequence, which is kept in the system columns."""
    order = [F.col(c).desc() for c in sequence] + [F.col(INPUT_ORDER).asc()]
    ranked = df.withColumn(RANK, F.row_number().over(Window.partitionBy(*primary_key).orderBy(*order)))
    newest = ranked.filter(F.col(RANK) == 1).drop(RANK)
    for column, kept in zip(sequence, sequence_columns(len(sequence)), strict=True):
        newest = newest.withColumn(kept, F.col(column))
    return newest


def distinct_events(df: DataFrame, key: tuple[str, ...], sequence: tuple[str, ...]) -> DataFrame:
    """Each event once (identical events at one key and sequence are one, `check_ordered_events`), its
    sequence kept in the system columns as `newest_event_per_key` keeps it."""
    order = [F.col(INPUT_ORDER).asc()]
    ranked = df.withColumn(RANK, F.row_number().over(Window.partitionBy(*key, *sequence).orderBy(*order)))
    events = ranked.filter(F.col(RANK) == 1).drop(RANK)
    for column, kept in zip(sequence, sequence_columns(len(sequence)), strict=True):
        events = events.withColumn(kept, F.col(column))
    return events


def event_columns(df: DataFrame, hints: TableHints) -> DataFrame:
    """The event columns that become table columns (`column_list` / `except_column_list`), with the
    system and helper columns; a column_list column the events lack is refused."""
    if hints.column_list:
        data = [c for c in df.columns if not c.startswith((SYSTEM_PREFIX, HELPER_PREFIX))]
        for column in hints.column_list:
            if column not in df.columns:
                raise MissingKeyColumnError(column, "column_list", data)
        return df.select(*(c for c in df.columns if c in hints.column_list or c not in data))
    return df.drop(*hints.except_column_list)


def _one(values: tuple):
    return values[0] if len(values) == 1 else values
