"""The partitions a staged batch touches, for the merge condition to name (plan/pruning.py).

Only key columns that partition the table are named, since only they are both compared by the merge
condition and laid out one directory per value. Their distinct values come from the Arrow table staging
collected, else from one small Spark job over the materialised batch (never the source again); more than
MAX_NAMED values are not listed, and the key's range bounds the merge instead.
"""

from __future__ import annotations

import dataclasses
import logging

import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..plan.pruning import KeyRange
from .names import col

log = logging.getLogger(__name__)

MAX_NAMED = 64  # the most partitions a merge condition lists
# Types whose values Spark and Arrow hand to Python as they are stored (not timestamps: the session's zone)
_NAMED_TYPES = (T.IntegralType, T.StringType, T.DateType)


def with_partitions(
    ranges: tuple[KeyRange, ...], staged: DataFrame, arrow, partition_by: tuple[str, ...]
) -> tuple[KeyRange, ...]:
    """`ranges`, those of partition columns with the batch's distinct values where there are few.

    `arrow` is the batch collected by staging (pyarrow.Table) or None, when `staged` is materialised."""
    named = []
    for key_range in ranges:
        column = key_range.column
        if column in partition_by and isinstance(staged.schema[column].dataType, _NAMED_TYPES):
            key_range = dataclasses.replace(key_range, values=_distinct(staged, arrow, column))
        named.append(key_range)
    return tuple(named)


def _distinct(staged: DataFrame, arrow, column: str) -> tuple:
    """The column's distinct values in the batch, sorted; none where there are more than MAX_NAMED."""
    if arrow is not None:
        found = pc.unique(arrow.column(column)).to_pylist()
    else:
        found = [row[0] for row in staged.select(col(column)).distinct().limit(MAX_NAMED + 1).collect()]
    if len(found) > MAX_NAMED:
        log.info(
            "more than %d values of partition column %s in the batch: bounded by range", MAX_NAMED, column
        )
        return ()
    return tuple(sorted(found))
