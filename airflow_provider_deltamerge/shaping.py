"""Shape the merge source a plan asks for from the staged batch (Spark).

The planner decides the shape; this module only builds it. Helper columns start with `__`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .planning import ACTION, HARD_DELETE_FLAG, MergePlan, Operation, SourceShape, key_helpers


def shape_source(staged: DataFrame, plan: MergePlan, target_keys: DataFrame | None = None) -> DataFrame:
    """The DataFrame the writer commits for `plan`."""
    if plan.operation is not Operation.MERGE or plan.source is SourceShape.ROWS:
        return unflagged_rows(staged)
    if plan.source is SourceShape.ROWS_WITH_FLAG:
        return staged
    if plan.source is SourceShape.SCD2_ROWS_AND_RETIRES:
        from .scd2_stage import rows_and_retires

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
