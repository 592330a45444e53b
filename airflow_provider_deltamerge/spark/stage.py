"""The stage step: one extracted batch made ready for its commit, in two parts.

- `stage_batch`: the preparation rules in their order (key checks, dedup, hard-delete flags, unique-key
  checks, system columns), computed once;
- `shape_source`: the merge source the plan asks for, built from the staged batch (helper columns start
  with `__`). The planner decides the shape; this only builds it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..plan.merge import ACTION, HARD_DELETE_FLAG, MergePlan, Operation, SourceShape, key_helpers
from ..spec.options import ID_FROM_PRIMARY_KEY, TableHints, WriteDisposition
from . import frames
from .scd2 import rows_and_retires

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StagedBatch:
    df: DataFrame  # materialised; data columns, system columns, and __hd where hard deletes apply
    rows_extracted: int
    rows_staged: int

    @property
    def empty(self) -> bool:
        return self.rows_staged == 0

    @property
    def hard_delete(self) -> bool:
        return HARD_DELETE_FLAG in self.df.columns


def stage_batch(df: DataFrame, disposition: WriteDisposition, hints: TableHints, load_id: str) -> StagedBatch:
    """Key checks, dedup, hard-delete flags, unique-key checks and system columns, then materialise."""
    keys = {"primary_key": hints.primary_key, "merge_key": hints.merge_key}
    rows_extracted = frames.check_key_columns(df, {k: v for k, v in keys.items() if v})
    if rows_extracted == 0:  # nothing to dedup or check, and maybe not even the key columns
        return StagedBatch(frames.add_system_columns(df, load_id).drop(frames.INPUT_ORDER), 0, 0)
    strategy = disposition.strategy
    if strategy == "delete-insert" and hints.primary_key and not disposition.deduplicated:
        df = frames.keep_one_row_per_key(df, hints.primary_key, hints.dedup_sort)
    if hints.hard_delete:
        df = frames.flag_hard_deletes(df, hints.hard_delete)
    if strategy == "upsert":
        frames.check_unique_keys(df, hints.primary_key, strategy)
    elif strategy == "insert-only":
        frames.check_unique_keys(unflagged_rows(df), hints.primary_key, strategy)
    id_key = hints.primary_key if strategy in ID_FROM_PRIMARY_KEY else ()
    df = frames.add_system_columns(df, load_id, id_key).drop(frames.INPUT_ORDER)
    staged = frames.materialize(df)
    frames.check_storable_dates(staged, hints.primary_key or hints.merge_key)
    return StagedBatch(staged, rows_extracted, staged.count())


def shape_source(staged: DataFrame, plan: MergePlan, target_keys: DataFrame | None = None) -> DataFrame:
    """The DataFrame the writer commits for `plan`."""
    if plan.operation is not Operation.MERGE or plan.source is SourceShape.ROWS:
        return unflagged_rows(staged)
    if plan.source is SourceShape.ROWS_WITH_FLAG:
        return staged
    if plan.source is SourceShape.SCD2_ROWS_AND_RETIRES:
        return rows_and_retires(staged, target_keys, plan.retire)
    rows = unflagged_rows(staged).withColumn(ACTION, F.lit("insert"))
    if plan.source is SourceShape.DELETE_KEYS_AND_ROWS:
        keys = staged.select(*plan.delete_keys).distinct()
    else:
        keys = target_rows_to_delete(staged, target_keys, plan)
    helpers = key_helpers(plan.delete_keys)
    delete_rows = keys.select(
        *(F.col(c).alias(h) for c, h in zip(plan.delete_keys, helpers, strict=True)),
        F.lit("delete").alias(ACTION),
    )
    for helper, column in zip(helpers, plan.delete_keys, strict=True):
        rows = rows.withColumn(helper, F.lit(None).cast(staged.schema[column].dataType))
    return rows.unionByName(delete_rows, allowMissingColumns=True)


def unflagged_rows(staged: DataFrame) -> DataFrame:
    """Staged rows that are not hard deletes, without the flag."""
    if HARD_DELETE_FLAG not in staged.columns:
        return staged
    return staged.filter(~F.col(HARD_DELETE_FLAG)).drop(HARD_DELETE_FLAG)


def target_rows_to_delete(staged: DataFrame, target_keys: DataFrame, plan: MergePlan) -> DataFrame:
    """Distinct target key tuples (primary key + merge key) that match a staged row on either key.

    Joining the MERGE on these exact tuples keeps it an equi-join; an OR join runs as a nested loop.
    """
    matches = [
        target_keys.join(staged.select(*key).distinct(), on=list(key), how="left_semi")
        for key in plan.match_any_of
    ]
    union = matches[0]
    for more in matches[1:]:
        union = union.unionByName(more)
    return union.distinct()
