"""A list of dicts as dlt's normaliser shapes it (`spark.normalize`), with what it needs of the table.

The table's column types decide which values are coerced and which go to variant columns; a table
with struct columns keeps its dicts as structs unless the load names a layout (an existing table's
layout never changes silently). The rows are converted once: normalised in Python, then to Arrow.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

from ..model.columns import dlt_type_of, merged_columns, parse_column_schema
from ..model.naming import direct, naming_convention
from . import frames
from .casting import spark_type
from .cursor_filter import narrowed_to_window
from .extract import ValueRules, is_rows, to_dataframe
from .identifying import identifying_columns, one_value_per_number
from .normalize import RowNormalizer


def extracted(spark, data, request, table_schema: T.StructType | None, stored_columns, window=None):
    """The batch as a DataFrame with stored column names and its input order; Python rows normalised
    (their names are stored names already, flattened ones included), a typed source cut to the load's
    `window` where Spark can (`cursor_filter.narrowed_to_window`). Declared decimals are built in their
    type, exactly (`spark.arrow_values`); the float values of the columns that tell rows apart are one per
    number (`spark.identifying`)."""
    normalize = naming_convention(request.naming)
    normalizer = row_normalizer(request, table_schema, stored_columns) if is_rows(data) else None
    identifying = identifying_columns(request)
    rules = ValueRules(
        decimals=_declared_decimals(request, stored_columns),
        keys=tuple(request.hints.primary_key or request.hints.merge_key),
        identifying=identifying,
        normalize=normalize,
    )
    df = to_dataframe(spark, data, normalizer, rules)
    if normalizer is not None:
        normalize = direct
    elif request.cursor is not None:
        df = narrowed_to_window(df, request.cursor.cursor_path, window, normalize)
    ordered = frames.with_input_order(df)  # one schema asked of Spark for both: a round trip on Connect
    frames.check_no_helper_columns(ordered.columns[:-1], normalize)
    return one_value_per_number(frames.rename_columns(ordered, normalize, request.table), identifying)


def _declared_decimals(request, stored_columns) -> dict[str, pa.DataType]:
    """Each column declared decimal (or wei): its Arrow type, by its stored name."""
    given = {name: column.to_dict() for name, column in request.declared.items()}
    declared = parse_column_schema(merged_columns(stored_columns, given))
    types = {name: spark_type(column) for name, column in declared.items() if column.data_type}
    return {
        name: pa.decimal128(kind.precision, kind.scale)
        for name, kind in types.items()
        if isinstance(kind, T.DecimalType)
    }


def row_normalizer(request, table_schema: T.StructType | None, stored_columns) -> RowNormalizer:
    """The normaliser of this load's rows: `request` the LoadRequest, `table_schema` the table's schema
    (None: a new table), `stored_columns` the declared schema earlier loads stored."""
    given = {name: column.to_dict() for name, column in request.declared.items()}
    declared = parse_column_schema(merged_columns(stored_columns, given))
    fields = table_schema.fields if table_schema is not None else []
    structs = frozenset(f.name for f in fields if isinstance(f.dataType, T.StructType))
    layout = request.nested_layout or ("struct" if structs else "flatten")
    return RowNormalizer(
        normalize=naming_convention(request.naming),
        declared={name: column.data_type for name, column in declared.items()},
        existing={f.name: dlt_type_of(f.dataType.simpleString()) for f in fields},
        struct_columns=structs,
        keys=frozenset(request.hints.primary_key) | frozenset(request.hints.merge_key),
        max_table_nesting=request.max_table_nesting,
        layout=layout,
        table=request.table,
    )
