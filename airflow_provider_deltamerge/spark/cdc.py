"""Staging of change events (`sequence_by`, model/cdc.py): the newest event per key (upsert) or every
event (scd2), its sequence kept.

Two events of one key at one sequence cannot be ordered: identical ones (an event delivered twice) are
one event, different ones are refused, naming them. Null sequences are refused by the key checks of
the stage step, which check the sequence columns as they check the key.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ConfigError, MissingKeyColumnError, SequenceError
from ..model.cdc import sequence_columns
from ..model.naming import HELPER_PREFIX, SYSTEM_PREFIX, backticked
from ..model.options import TableHints
from ..model.row_condition import check_row_condition
from ..plan.merge import HARD_DELETE_FLAG
from . import profile
from .frames import DUPLICATE_EXAMPLES, INPUT_ORDER, RANK
from .names import col, cols

VERSIONS = "__versions"
TIES = HELPER_PREFIX + "ties"  # per staged event: its key's events that tie with another at one sequence
TOMBSTONE_PREFIX = HELPER_PREFIX + "tomb_"  # the tombstones' columns, beside the events' in a join
TRUNCATE_FLAG = HELPER_PREFIX + "tr"  # while staging: true where the event is a truncate


def check_ordered_events(df: DataFrame, primary_key: tuple[str, ...], sequence: tuple[str, ...]) -> None:
    """Refuse two different events of one key at the same sequence (one Spark job)."""
    data = [c for c in df.columns if c != INPUT_ORDER]
    content = F.to_json(F.struct(*(col(c) for c in data)))
    present = F.lit(True)
    for column in sequence:
        present = present & col(column).isNotNull()
    tied = (
        df.where(present)
        .groupBy(*cols([*primary_key, *sequence]))
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


def newest_event_per_key(
    df: DataFrame, primary_key: tuple[str, ...], sequence: tuple[str, ...], count_ties: bool = False
) -> DataFrame:
    """One event per key, the one with the greatest sequence, which is kept in the system columns.
    `count_ties`: it carries TIES, how many of its key's events differ from the event before them at
    the same sequence (in the order of the ranking, where one sequence's events are neighbours), so
    that the ties `check_ordered_events` refuses are counted in the same pass (`sum_of_ties`)."""
    order = [col(c).desc() for c in sequence] + [F.col(INPUT_ORDER).asc()]
    window = Window.partitionBy(*cols(primary_key)).orderBy(*order)
    ranked = df.withColumn(RANK, F.row_number().over(window))
    if count_ties:
        ranked = ranked.withColumn(TIES, _tied_with_previous(df, sequence, window))
        ranked = ranked.withColumn(TIES, F.sum(TIES).over(Window.partitionBy(*cols(primary_key))))
    return with_sequence_kept(ranked.filter(F.col(RANK) == 1).drop(RANK), sequence)


def with_sequence_kept(df: DataFrame, sequence: tuple[str, ...]) -> DataFrame:
    """Each event's sequence copied into the system columns the table keeps it in (model/cdc.py)."""
    for column, kept in zip(sequence, sequence_columns(len(sequence)), strict=True):
        df = df.withColumn(kept, col(column))
    return df


def _tied_with_previous(df: DataFrame, sequence: tuple[str, ...], window) -> Column:
    """1 where the event differs from the previous one of its key at the same sequence, else 0."""
    data = [c for c in df.columns if c != INPUT_ORDER]
    content = F.struct(*(col(c) for c in data))
    if any(_has_map(df.schema[c].dataType) for c in data):  # maps do not compare: their JSON does
        content = F.to_json(content)
    same_sequence = F.lit(True)
    for column in sequence:
        same_sequence = same_sequence & (F.lag(col(column)).over(window) == col(column))
    differs = ~F.lag(content).over(window).eqNullSafe(content)
    return F.when(same_sequence & differs, 1).otherwise(0)


def _has_map(kind) -> bool:
    if isinstance(kind, T.MapType):
        return True
    if isinstance(kind, T.StructType):
        return any(_has_map(f.dataType) for f in kind.fields)
    if isinstance(kind, T.ArrayType):
        return _has_map(kind.elementType)
    return False


def sum_of_ties() -> Column:
    """The observed aggregate of the staged events' TIES: 0 where no key has a tie."""
    return F.coalesce(F.sum(TIES), F.lit(0)).alias("ties")


def distinct_events(df: DataFrame, key: tuple[str, ...], sequence: tuple[str, ...]) -> DataFrame:
    """Each event once (identical events at one key and sequence are one, `check_ordered_events`), its
    sequence kept in the system columns as `newest_event_per_key` keeps it."""
    order = [F.col(INPUT_ORDER).asc()]
    ranked = df.withColumn(
        RANK, F.row_number().over(Window.partitionBy(*cols([*key, *sequence])).orderBy(*order))
    )
    return with_sequence_kept(ranked.filter(F.col(RANK) == 1).drop(RANK), sequence)


def check_condition(df: DataFrame, argument: str, condition: str, rows: str = "events") -> None:
    """Refuse a condition that is not over the row's own columns (model/row_condition.py; here a name
    Spark reads as a function must be a column), does not parse, names a column the `rows` (events, or
    the batch's rows) lack, or is not true/false, before any job runs."""
    data = [c for c in df.columns if c != INPUT_ORDER]
    check_row_condition(argument, condition, data)
    try:
        kind = df.select(F.expr(condition).alias("condition")).schema["condition"].dataType
    except Exception as exc:  # Spark's parse and analysis errors: their first line says what is wrong
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            argument, f"{condition!r} is not a condition over the {rows}' columns {data}: {problem}"
        ) from None
    if not isinstance(kind, T.BooleanType):
        raise ConfigError(argument, f"{condition!r} is a {kind.simpleString()}, not a condition (true/false)")


def flag_delete_events(df: DataFrame, condition: str) -> DataFrame:
    """The __hd flag of the merge: true where the event is a delete (`apply_as_deletes`), never null."""
    return df.withColumn(HARD_DELETE_FLAG, F.coalesce(F.expr(condition), F.lit(False)))


def flag_truncate_events(df: DataFrame, condition: str, primary_key: tuple[str, ...]) -> DataFrame:
    """TRUNCATE_FLAG (never null) where the event is a truncate (`apply_as_truncates`), and its key
    columns nulled: a truncate belongs to no key, so the batch's truncates are one key's events (the
    newest of them wins) and none competes with a key's events."""
    flagged = df.withColumn(TRUNCATE_FLAG, F.coalesce(F.expr(condition), F.lit(False)))
    for column in primary_key:
        kept = F.when(F.col(TRUNCATE_FLAG), F.lit(None)).otherwise(col(column))
        flagged = flagged.withColumn(column, kept)
    return flagged


def null_counts(columns: list[str], primary_key: tuple[str, ...]) -> list:
    """The stage step's `null:<column>` counts (spark/profile.py) where events may be truncates: their
    key columns are null by design, so a key column counts only the other events' nulls."""
    counts = []
    for column in columns:
        quoted = backticked(column)
        outside = f" AND NOT `{TRUNCATE_FLAG}`" if column in primary_key else ""
        counts.append(profile.counted_where(f"{quoted} IS NULL{outside}").alias(f"null:{column}"))
    return counts


def truncates_as_deletes(df: DataFrame) -> DataFrame:
    """The __hd flag set on the (newest) truncate event too, which so inserts nothing and is remembered
    with the tombstones; TRUNCATE_FLAG dropped: a flagged row with a null key is the truncate."""
    flag = F.col(TRUNCATE_FLAG)
    if HARD_DELETE_FLAG in df.columns:
        flag = F.col(HARD_DELETE_FLAG) | flag
    return df.withColumn(HARD_DELETE_FLAG, flag).drop(TRUNCATE_FLAG)


def newer_than(sequence: tuple[str, ...], values: tuple):
    """The event's sequence greater than `values` (compared in order, the first that differs decides)."""
    return ~not_newer([col(c) for c in sequence], [F.lit(v) for v in values])


def not_newer_rows(df: DataFrame, sequence: tuple[str, ...], values: tuple) -> DataFrame:
    """The rows whose sequence is not newer than `values`, or null: those a truncate at `values` removes
    (all of them where `sequence` is empty: the table has no sequence yet)."""
    if not sequence:
        return df
    return df.where(col(sequence[0]).isNull() | ~newer_than(sequence, values))


def without_tombstoned(
    df: DataFrame, tombstones: DataFrame, primary_key: tuple[str, ...], sequence: tuple[str, ...]
) -> DataFrame:
    """The events newer than every tombstone of their key. `tombstones` holds the key and `sequence`
    (the sequence system columns) of each, named with TOMBSTONE_PREFIX."""

    def tomb(column: str):
        return col(TOMBSTONE_PREFIX + column, "d")

    condition = not_newer([col(c, "e") for c in sequence], [tomb(c) for c in sequence])
    for key in primary_key:
        condition = col(key, "e").eqNullSafe(tomb(key)) & condition
    return df.alias("e").join(F.broadcast(tombstones.alias("d")), condition, "left_anti")


def not_newer(event: list, tombstone: list):
    """event <= tombstone, compared column by column (the first that differs decides)."""
    result = F.lit(True)
    for column_event, column_tomb in reversed(list(zip(event, tombstone, strict=True))):
        result = (column_event < column_tomb) | ((column_event == column_tomb) & result)
    return result


def event_columns(df: DataFrame, hints: TableHints) -> DataFrame:
    """The event columns that become table columns (`column_list` / `except_column_list`), with the
    system and helper columns."""
    return df.drop(*left_out_columns(df, hints))


def left_out_columns(df: DataFrame, hints: TableHints) -> list[str]:
    """The event columns `column_list` / `except_column_list` keep out of the table; a column_list
    column the events lack is refused."""
    data = [c for c in df.columns if not c.startswith((SYSTEM_PREFIX, HELPER_PREFIX))]
    if hints.column_list:
        for column in hints.column_list:
            if column not in df.columns:
                raise MissingKeyColumnError(column, "column_list", data)
        return [c for c in data if c not in hints.column_list]
    return [c for c in data if c in hints.except_column_list]


def _one(values: tuple):
    return values[0] if len(values) == 1 else values
