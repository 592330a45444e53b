"""Child tables in Spark: a staged batch's array columns exploded into the rows of its child tables.

The plan (`plan.nested`) names the tables and their columns; here each table's rows are built with
`posexplode` from its parent's rows, without a Python UDF: `_dlt_parent_id` is the parent's `_dlt_id`,
`_dlt_list_idx` the position, and `_dlt_id` a hash of the parent id, the table name and the position
(K-2), so the same element at the same place always gets the same id.
"""

from __future__ import annotations

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..model.naming import HELPER_PREFIX, LOAD_ID, ROW_ID
from ..plan.nested import LIST_FIELD, LIST_INDEX, PARENT_ID, ROOT_ID, NestedPlan, NestedTable, Shape
from .frames import short_hash
from .names import col

_VALUE = HELPER_PREFIX + "el"  # a row's value: the root's array columns as a struct, or the element
_ROOT = HELPER_PREFIX + "root"  # the root row's _dlt_id
_POSITION = HELPER_PREFIX + "pos"
_PARENT = HELPER_PREFIX + "pid"


def shape_of(data_type: T.DataType) -> Shape:
    """A Spark type as the planner's Shape."""
    if isinstance(data_type, T.StructType):
        return Shape.struct(*((f.name, shape_of(f.dataType)) for f in data_type.fields))
    if isinstance(data_type, T.ArrayType):
        return Shape.array(shape_of(data_type.elementType))
    return Shape.scalar()


def column_shapes(df: DataFrame) -> tuple[tuple[str, Shape], ...]:
    """The shapes of a DataFrame's data columns (helper columns left out)."""
    return tuple(
        (f.name, shape_of(f.dataType)) for f in df.schema.fields if not f.name.startswith(HELPER_PREFIX)
    )


def root_rows(staged: DataFrame, plan: NestedPlan) -> DataFrame:
    """The root table's rows: the arrays that became child tables dropped, the ones kept as JSON as text."""
    df = staged.drop(*plan.child_columns) if plan.child_columns else staged  # Connect: no schema asked anew
    for name in plan.json_columns:
        df = df.withColumn(name, F.to_json(col(name)))
    return df


def child_rows(staged: DataFrame, plan: NestedPlan, load_id: str, root_key: bool) -> dict[str, DataFrame]:
    """Each child table's rows, built from the staged root rows (which carry `_dlt_id`)."""
    arrays = [col(c).alias(c) for c in plan.child_columns]
    frames = {
        plan.root: staged.select(
            F.struct(*arrays).alias(_VALUE) if arrays else F.lit(None).alias(_VALUE),
            F.col(ROW_ID),
            F.col(ROW_ID).alias(_ROOT),
        )
    }
    rows = {}
    for table in plan.tables:  # parents come first
        frames[table.name] = _elements(frames[table.parent], table)
        rows[table.name] = _stored_columns(frames[table.name], table, load_id, root_key)
    return rows


def _elements(parent: DataFrame, table: NestedTable) -> DataFrame:
    """One row per element of the array at `table.source` of each parent row (none for null or [])."""
    exploded = parent.select(
        F.col(ROW_ID).alias(_PARENT),
        F.col(_ROOT),
        F.posexplode(_at(F.col(_VALUE), table.source)).alias(_POSITION, _VALUE),
    )
    value = F.struct(F.col(_VALUE).alias(LIST_FIELD)) if table.element == "array" else F.col(_VALUE)
    position = F.col(_POSITION).cast("long")
    row_id = short_hash(F.concat_ws("_", F.col(_PARENT), F.lit(table.name), position.cast("string")))
    return exploded.select(
        value.alias(_VALUE),
        row_id.alias(ROW_ID),
        F.col(_ROOT),
        F.col(_PARENT),
        position.alias(_POSITION),
    )


def _stored_columns(elements: DataFrame, table: NestedTable, load_id: str, root_key: bool) -> DataFrame:
    data = []
    for column in table.columns:
        value = _at(F.col(_VALUE), column.path)
        data.append((F.to_json(value) if column.as_json else value).alias(column.name))
    system = [
        F.lit(load_id).alias(LOAD_ID),
        F.col(ROW_ID),
        F.col(_PARENT).alias(PARENT_ID),
        F.col(_POSITION).alias(LIST_INDEX),
    ]
    if root_key:
        system.append(F.col(_ROOT).alias(ROOT_ID))
    return elements.select(*data, *system)


def _at(value: SparkColumn, path: tuple[str, ...]) -> SparkColumn:
    for field in path:
        value = value.getField(field)
    return value


def empty_rows(spark, root_key: bool) -> DataFrame:
    """No rows, with the system columns only: a child table this batch has no data for (WD-7)."""
    fields = [
        T.StructField(LOAD_ID, T.StringType()),
        T.StructField(ROW_ID, T.StringType()),
        T.StructField(PARENT_ID, T.StringType()),
        T.StructField(LIST_INDEX, T.LongType()),
    ]
    if root_key:
        fields.append(T.StructField(ROOT_ID, T.StringType()))
    return spark.createDataFrame([], T.StructType(fields))
