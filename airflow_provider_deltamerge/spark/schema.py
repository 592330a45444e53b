"""Make a staged batch fit an existing table: add new columns, widen safely, refuse lossy casts.

delta-rs casts silently (long <- double truncates) or fails without naming the column, so the batch
is checked against the table's schema in Spark before any commit.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import SchemaError
from .names import col

log = logging.getLogger(__name__)

_INTEGER_WIDTH = {T.ByteType: 1, T.ShortType: 2, T.IntegerType: 4, T.LongType: 8}


def can_widen(batch_type: T.DataType, table_type: T.DataType) -> bool:
    """True if every value of batch_type is stored exactly by table_type."""
    if _without_nullability(batch_type) == _without_nullability(table_type):
        return True
    b, t = type(batch_type), type(table_type)
    if b in _INTEGER_WIDTH and t in _INTEGER_WIDTH:
        return _INTEGER_WIDTH[b] <= _INTEGER_WIDTH[t]
    if b in _INTEGER_WIDTH and t is T.DoubleType:
        return True  # as dlt does: JSON numbers without a fraction land in a double column
    if b is T.FloatType and t is T.DoubleType:
        return True
    if t is T.StringType and (b in _INTEGER_WIDTH or b in (T.BooleanType, T.DecimalType)):
        return True  # dlt's coercion: whole numbers, decimals and booleans are stored as their text
    if b is T.DecimalType and t is T.DecimalType:
        return (
            batch_type.scale <= table_type.scale
            and batch_type.precision - batch_type.scale <= table_type.precision - table_type.scale
        )
    return False


def _without_nullability(data_type: T.DataType):
    """A comparable form of the type that ignores nullability at every depth."""
    if isinstance(data_type, T.StructType):
        return ("struct", tuple((f.name, _without_nullability(f.dataType)) for f in data_type.fields))
    if isinstance(data_type, T.ArrayType):
        return ("array", _without_nullability(data_type.elementType))
    if isinstance(data_type, T.MapType):
        return ("map", _without_nullability(data_type.keyType), _without_nullability(data_type.valueType))
    return data_type.simpleString()


def align_to_table(
    df: DataFrame, table_schema: T.StructType | None, table: str, keep: tuple[str, ...] = ()
) -> DataFrame:
    """The batch with the table's columns and types first, then its new columns.

    Columns the batch lacks become typed nulls (a whole-row replacement stores NULL there); columns only
    in the batch are added to the table unless they hold no type at all (all values null); `keep` names
    helper columns that pass through untouched.
    """
    if _matches(df, table_schema):
        return df  # the table's columns already, with its types, in its order: nothing to select
    batch_types = {f.name: f.dataType for f in df.schema.fields}
    selected = []
    table_columns = set()
    for field in table_schema.fields if table_schema is not None else []:
        table_columns.add(field.name)
        batch_type = batch_types.get(field.name)
        column = col(field.name)
        if batch_type is None or isinstance(batch_type, T.NullType):
            selected.append(F.lit(None).cast(field.dataType).alias(field.name))
        elif batch_type == field.dataType:
            selected.append(column)  # the table's type already: nothing to cast
        elif can_widen(batch_type, field.dataType):
            selected.append(column.cast(field.dataType).alias(field.name))
        else:
            raise SchemaError(table, field.name, field.dataType.simpleString(), batch_type.simpleString())
    for name, batch_type in batch_types.items():
        if name in table_columns:
            continue
        if isinstance(batch_type, T.NullType) and name not in keep:
            log.info("column %r has only null values and no type yet; it is not added to %s", name, table)
            continue
        selected.append(col(name))
    return df.select(*selected)


def _matches(df: DataFrame, table_schema: T.StructType | None) -> bool:
    """Whether the batch starts with the table's columns, typed as the table types them, and has no
    column without a type."""
    fields = table_schema.fields if table_schema is not None else []
    batch = [(f.name, f.dataType) for f in df.schema.fields]
    table = [(f.name, f.dataType) for f in fields]
    return batch[: len(table)] == table and not any(isinstance(t, T.NullType) for _, t in batch)
