"""The columns whose values tell rows (or events, or windows) apart, and one value per number in them.

A load compares these columns' values at every step: the batch's duplicate check and dedup, row ids,
the merge's condition, scd2's merge keys, `sequence_by`'s order and ties, `dedup_sort`, the cursor and
its boundary, partition folders. Spark, Delta's MERGE and delta-rs compare floats by value (0.0 equals
-0.0; NaN equals NaN), while a hash, Arrow's grouping or a folder name sees bits or text (two keys).
So that every step sees one rule, a float in these columns is stored as the one value of its number:
-0.0 as 0.0 and every NaN as Spark's NaN. Value columns keep -0.0 as it is. The same columns keep every
digit of a timestamp, or the load is refused (see `spark.arrow_values`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .names import col


def identifying_columns(request) -> frozenset[str]:
    """The stored names of the columns of `request` (a LoadRequest) whose values tell rows apart."""
    hints = request.hints
    names = {*hints.primary_key, *hints.merge_key, *hints.sequence_by}
    if hints.dedup_sort is not None:
        names.add(hints.dedup_sort[0])
    if request.cursor is not None:  # a top-level column named with dots, or a struct's top column
        names.update({request.cursor.cursor_path, request.cursor.cursor_path.split(".")[0]})
    names.update(name for name, column in request.declared.items() if column.partition)
    return frozenset(names)


def one_value_per_number(df: DataFrame, columns: frozenset[str]) -> DataFrame:
    """`df` with -0.0 as 0.0 and NaN as one NaN in those of `columns` that are floats (top level)."""
    floats = {
        f.name: f.dataType
        for f in df.schema.fields
        if f.name in columns and isinstance(f.dataType, (T.FloatType, T.DoubleType))
    }
    if not floats:
        return df
    return df.withColumns({name: _one_value(name, kind) for name, kind in floats.items()})


def _one_value(name: str, kind: T.DataType):
    column = col(name)
    return (
        F.when(F.isnan(column), F.lit(float("nan")).cast(kind))
        .when(column == 0, F.lit(0.0).cast(kind))
        .otherwise(column)
    )
