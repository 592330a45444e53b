"""Spark transforms of an extracted batch: names, key checks, dedup, hard-delete flags, system columns.

Each function takes and returns a DataFrame (or raises a SourceError that names columns and counts),
so the stage step can apply them one by one and every rule can be tested on its own.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import DuplicateKeyError, MissingKeyColumnError, NullKeyError, RowIdError, SourceError
from ..model.naming import HELPER_PREFIX, LOAD_ID, ROW_ID, normalize_columns
from ..plan.merge import HARD_DELETE_FLAG
from ..plan.nested import LIST_INDEX, PARENT_ID, ROOT_ID
from . import held
from .codegen import sized_codegen
from .names import col, cols
from .profile import STORABLE_DATES, estimated_bytes, outside_storable_dates

log = logging.getLogger(__name__)

INPUT_ORDER = HELPER_PREFIX + "ord"  # position of the row in the input, for deterministic dedup ties
RANK = HELPER_PREFIX + "rank"
DUPLICATE_EXAMPLES = 5
ID_LENGTH = 14  # base64 characters of a row id or version hash: the length of dlt's ids
CHILD_TABLE_COLUMNS = (PARENT_ID, LIST_INDEX, ROOT_ID)


def with_input_order(df: DataFrame) -> DataFrame:
    """The source with its input order as the last column, after all of the source's own (a source
    column of that name stays, to be refused by check_no_helper_columns)."""
    return df.select("*", F.monotonically_increasing_id().alias(INPUT_ORDER))


def check_no_helper_columns(columns: list[str], normalize: Callable[[str], str]) -> None:
    """Refuse data columns whose stored names start with the helper prefix: a load's own helper
    columns (hard-delete flags, input order, delete keys) would be confused with them; and the columns
    only child tables have (CHILD_TABLE_COLUMNS), by which a table is known as a child table.
    `columns`: the source's column names."""
    taken = [c for c in columns if normalize(c).startswith(HELPER_PREFIX)]
    if taken:
        raise SourceError(
            f"column(s) {taken} start with {HELPER_PREFIX!r}, which is reserved for the columns a load "
            "adds while it stages a batch; nothing was loaded. Rename them in the source, or use "
            "naming='snake_case', which never produces that prefix"
        )
    child = [c for c in columns if normalize(c) in CHILD_TABLE_COLUMNS]
    if child:
        raise SourceError(
            f"column(s) {child} are the columns that link a child table's rows to their parents "
            f"({', '.join(CHILD_TABLE_COLUMNS)}); a table loaded with them would be taken for a child table "
            "of another (and emptied or merged by that table's loads). Nothing was loaded. Rename or drop "
            "them in the source."
        )


def rename_columns(df: DataFrame, normalize: Callable[[str], str], table: str = "") -> DataFrame:
    """Top-level columns renamed by the naming convention (the input-order helper keeps its name); two
    that would be equal ignoring case are refused (`normalize_columns`)."""
    data_columns = [c for c in df.columns if c != INPUT_ORDER]
    mapping = normalize_columns(data_columns, normalize, table)
    if all(k == v for k, v in mapping.items()):
        return df
    return df.select(*(col(c).alias(mapping.get(c, c)) for c in df.columns))


def check_key_columns(df: DataFrame, keys: dict[str, tuple[str, ...]]) -> int:
    """Fail on key columns absent from the data or holding nulls; return the batch's row count.

    `keys` maps a hint name ("primary_key", "merge_key") to its columns. One Spark job does it all.
    An empty batch has no key values to check: it passes, whatever its columns.
    """
    checked = [(hint, c) for hint, columns in keys.items() for c in columns if c in df.columns]
    aggregates = [F.count(F.lit(1)).alias("rows")]
    aggregates += [F.sum(col(c).isNull().cast("long")).alias(f"null_{i}") for i, (_, c) in enumerate(checked)]
    counts = df.agg(*aggregates).first()
    rows = int(counts["rows"])
    for hint, columns in keys.items():
        for column in columns:
            if rows and column not in df.columns:
                raise MissingKeyColumnError(column, hint, [c for c in df.columns if c != INPUT_ORDER], rows)
    for i, (hint, column) in enumerate(checked):
        if counts[f"null_{i}"]:
            raise NullKeyError(column, hint, int(counts[f"null_{i}"]))
    return rows


def keep_one_row_per_key(
    df: DataFrame, primary_key: tuple[str, ...], dedup_sort: tuple[str, str] | None
) -> DataFrame:
    """One survivor per primary key: highest/lowest dedup_sort value; ties (or no sort): first in input."""
    order = [F.col(INPUT_ORDER).asc()]
    if dedup_sort is not None:
        column, direction = dedup_sort
        if column not in df.columns:
            raise MissingKeyColumnError(column, "dedup_sort", [c for c in df.columns if c != INPUT_ORDER])
        sort = col(column).desc_nulls_last() if direction == "desc" else col(column).asc_nulls_last()
        order.insert(0, sort)
    ranked = df.withColumn(RANK, F.row_number().over(Window.partitionBy(*cols(primary_key)).orderBy(*order)))
    return ranked.filter(F.col(RANK) == 1).drop(RANK)


def flag_hard_deletes(df: DataFrame, column: str) -> DataFrame:
    """Add the non-null __hd flag: a bool column deletes on True only, other types on any non-null value."""
    if column not in df.columns:
        log.warning("hard_delete column %r is not in the batch; no row is a delete", column)
        return df.withColumn(HARD_DELETE_FLAG, F.lit(False))
    value = col(column)
    is_bool = isinstance(df.schema[column].dataType, T.BooleanType)
    flag = F.coalesce(value, F.lit(False)) if is_bool else value.isNotNull()
    return df.withColumn(HARD_DELETE_FLAG, flag)


def check_unique_keys(df: DataFrame, primary_key: tuple[str, ...], strategy: str) -> None:
    """Fail, naming some of the keys, when a primary key occurs more than once in the batch."""
    duplicated = df.groupBy(*cols(primary_key)).count().filter(F.col("count") > 1)
    found = duplicated.limit(DUPLICATE_EXAMPLES).collect()  # no sort: the common case has none to find
    if found:
        examples = sorted((tuple(r[c] for c in primary_key) for r in found), key=repr)
        raise DuplicateKeyError(primary_key, strategy, examples, duplicated.count())


def check_row_ids(df: DataFrame, arrow=None) -> None:
    """A `_dlt_id` column given in the data (kept, as dlt keeps it: `add_system_columns`) holds a unique,
    non-null id per staged row; checked in the Arrow data where staging collected it, else in Spark."""
    if arrow is not None:
        import pyarrow.compute as pc

        counts = pc.value_counts(arrow.column(ROW_ID).drop_null())
        repeated = counts.filter(pc.greater(counts.field("counts"), 1)).field("values").to_pylist()
        nulls = arrow.column(ROW_ID).null_count
    else:
        grouped = df.groupBy(ROW_ID).count().filter((F.col("count") > 1) | F.col(ROW_ID).isNull())
        found = grouped.collect()  # no rows in the common case; at most the repeated ids otherwise
        repeated = [r[ROW_ID] for r in found if r[ROW_ID] is not None]
        nulls = next((r["count"] for r in found if r[ROW_ID] is None), 0)
    if repeated or nulls:
        examples = sorted(repeated, key=repr)[:DUPLICATE_EXAMPLES]
        raise RowIdError(ROW_ID, int(nulls), examples, len(repeated))


def short_hash(text: F.Column, length: int = ID_LENGTH) -> F.Column:
    """The first `length` base64 characters of the SHA-256 of a string column: row ids, row versions,
    boundary hashes (one helper, so every hash of a row is spelled the same)."""
    return F.substring(F.base64(F.unhex(F.sha2(text, 256))), 1, length)


def row_id_text(primary_key: tuple[str, ...]) -> F.Column:
    """The text a row id keyed by the primary key hashes: the key's columns as one JSON object."""
    return F.to_json(F.struct(*cols(primary_key)))


def add_system_columns(df: DataFrame, load_id: str, primary_key_id: tuple[str, ...] = ()) -> DataFrame:
    """_dlt_load_id on every row (one in the data is replaced); _dlt_id unique per row and load, or a hash
    of the primary key.

    A `_dlt_id` already in the data is kept, as dlt does (and checked: `check_row_ids`).
    """
    load_id_column = {LOAD_ID: F.lit(load_id)}  # both columns added at once: one plan analysed, not two
    if ROW_ID in df.columns:
        return df.withColumns(load_id_column)
    if primary_key_id:
        return df.withColumns({**load_id_column, ROW_ID: short_hash(row_id_text(primary_key_id))})
    per_row = F.concat_ws(":", F.lit(load_id), F.col(INPUT_ORDER).cast("string"))
    return df.withColumns({**load_id_column, ROW_ID: short_hash(per_row)})


def check_storable_dates(df: DataFrame, key: tuple[str, ...], outside: dict[str, int]) -> None:
    """Refuse dates and timestamps outside STORABLE_DATES: Spark computes them, Delta stores them, and
    then no deltalake or pyarrow reader can read the table again. `outside` holds the count of such
    values per column, profiled while the batch was computed; only a refusal reads the batch again."""
    for column, count in outside.items():
        if count:
            shown = list(key) or [c for c in df.columns if not c.startswith((HELPER_PREFIX, "_dlt"))][:3]
            as_text = [col(c).cast("string").alias(c) for c in dict.fromkeys([*shown, column])]
            example = df.filter(outside_storable_dates(column)).select(*as_text).first()  # no Python date
            raise SourceError(
                f"column {column!r} holds {count} value(s) outside {STORABLE_DATES[0]}.."
                f"{STORABLE_DATES[1]}, e.g. {example[column]!r} in the row with "
                f"{ {c: example[c] for c in shown} }; Delta readers cannot read such values back. "
                "Nothing was loaded. Fix or filter them in the source."
            )


# A batch Spark estimates above this is checkpointed to local disk rather than kept in memory: at 10M rows
# (286 MiB estimated) a 4 GiB local session took 10.6 s to hold it in memory and 6.5 s to write it to
# disk, and the jobs reading it back were faster from disk too (the heap was full of its rows).
DISK_CHECKPOINT_BYTES = 128 * 2**20


def materialize(df: DataFrame) -> DataFrame:
    """Compute the staged batch once, so checks, counts and the commit all see the same rows: a local
    checkpoint, on disk where Spark estimates the batch above DISK_CHECKPOINT_BYTES (PySpark 4), its
    blocks removed when the load ends (spark/held.py); a small one planned with less code generation
    (spark/codegen.py)."""
    estimate = estimated_bytes(df)
    with sized_codegen(df.sparkSession, "the batch's checkpoint", estimate):
        if "storageLevel" in inspect.signature(df.localCheckpoint).parameters:  # PySpark 3.5: in memory
            if estimate is not None and estimate > DISK_CHECKPOINT_BYTES:
                log.info("a batch Spark estimates at %.0f MiB: checkpointed to local disk", estimate / 2**20)
                return held.checkpointed(df.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY))
        return held.checkpointed(df.localCheckpoint(eager=True))
