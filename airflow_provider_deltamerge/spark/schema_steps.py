"""The schema step of a load, between the window and staging: the batch cast to the table's declared
column schema, variant columns split off and the schema contract applied; and what the commit needs of
it (the declared schema it stores, the layout of a new table, rows discarded).

The declared schema of a table is what loads declared in `columns` (data types, precision, nullability,
partition), kept in the metadata of each load's commit and carried forward by the next, so a load
without `columns` keeps the types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame

from ..errors import ConfigError, SchemaError
from ..model.columns import ColumnSchema, merged_columns, parse_column_schema, storage_type
from ..model.naming import LOAD_ID, ROW_ID, check_distinct_names, check_storable_names, naming_convention
from ..plan.nested import plan_nested
from ..plan.scd2 import Scd2Settings
from .casting import cast_to_declared
from .contract import apply_schema_contract
from .identifying import identifying_columns, one_value_per_number
from .nested import column_shapes


@dataclass(frozen=True)
class SchemaStep:
    """What the schema step decided, for the commit and the metrics."""

    columns: dict[str, dict[str, Any]] | None = None  # the table's declared schema after this load
    partition_by: tuple[str, ...] = ()  # of a table this load creates
    not_null: tuple[str, ...] = ()  # of a table this load creates
    metrics: dict[str, int] = field(default_factory=dict)


def shape_to_schema(batch: DataFrame, request, table, commits) -> tuple[DataFrame, SchemaStep]:
    """(the batch cast and contracted, the step's decisions). `request` is the LoadRequest, `table` the
    writer's snapshot or None, `commits` the table's recent commits of this pipeline, newest first."""
    stored_columns = stored_column_schema(commits)
    given = {name: column.to_dict() for name, column in request.declared.items()}
    columns = merged_columns(stored_columns, given)
    declared = parse_column_schema(columns)
    _refuse_changed_types(stored_columns, declared, request.table)
    table_schema = table.schema if table is not None else None
    check_distinct_names(request.table, batch.columns, table_schema.fieldNames() if table_schema else ())
    check_distinct_names(request.table, batch.columns, declared, "declared in columns")
    check_distinct_names(request.table, batch.columns, _written_by_load(request), "a column the load writes")
    check_storable_names(request.table, [*batch.columns, *_written_by_load(request)])
    keys = request.hints.primary_key or request.hints.merge_key
    identifying = identifying_columns(request)
    batch = cast_to_declared(batch, declared, keys, request.table, identifying)
    batch = one_value_per_number(batch, identifying)  # and those the casts made floats
    fixed = frozenset(declared) | set(request.hints.primary_key) | set(request.hints.merge_key)
    fixed |= _arrays(batch, request)  # their rows go to child tables (or JSON text), not to this table
    contracted = apply_schema_contract(batch, table_schema, request.table, request.contract, frozenset(fixed))
    partition_by = _partitioning(request.declared, table, contracted.df.columns, request.table)
    metrics = {} if request.contract.is_default else {"rows_discarded": contracted.rows_discarded}
    not_null = tuple(name for name, column in declared.items() if column.required)
    return contracted.df, SchemaStep(columns, partition_by, not_null, metrics)


def _written_by_load(request) -> tuple[str, ...]:
    """The columns a load writes itself: dlt's system columns, and scd2's validity columns."""
    scd2 = request.disposition.scd2
    validity = Scd2Settings.from_options(scd2).system_columns if scd2 is not None else ()
    return (LOAD_ID, ROW_ID, *validity)


def _arrays(batch: DataFrame, request) -> set[str]:
    """The batch's array columns that become child tables or JSON text: the contract and variant columns
    of this table never see them."""
    normalize = naming_convention(request.naming)
    nested = plan_nested(request.table, column_shapes(batch), normalize, request.max_table_nesting)
    return set(nested.child_columns) | set(nested.json_columns)


def stored_column_schema(commits) -> dict[str, dict[str, Any]] | None:
    """The table's declared column schema, as the newest load's commit stored it (None: none declared)."""
    return next((c.metadata.get("columns") for c in commits if "columns" in c.metadata), None)


def _refuse_changed_types(
    stored: dict[str, dict[str, Any]] | None, declared: dict[str, ColumnSchema], table: str
) -> None:
    """A column's declared type cannot change once a load stored it: its values are stored that way."""
    for name, before in (stored or {}).items():
        if "data_type" not in before:
            continue
        old = storage_type(ColumnSchema(name, **before))
        new = storage_type(declared[name])
        if old != new:
            raise SchemaError(
                table,
                name,
                old,
                new,
                reason=f"column {name!r} of table {table!r} was declared {old} by an earlier load and is now "
                f"declared {new}; a declared type cannot change, because the stored values have the old "
                "one. Nothing was loaded. Keep the declared type, or load into a new table.",
            )


def _partitioning(
    declared: dict[str, ColumnSchema], table, batch_columns: list[str], table_name: str
) -> tuple[str, ...]:
    """The partition columns of a table this load creates; refused where the load declares partitioning
    different from an existing table's."""
    wanted = tuple(name for name, column in declared.items() if column.partition)
    if table is not None:
        existing = tuple(table.partition_columns)
        unpartitioned = [n for n, c in declared.items() if c.partition is False and n in existing]
        if (wanted and set(wanted) != set(existing)) or unpartitioned:
            raise ConfigError(
                "columns",
                f"table {table_name!r} is partitioned by {list(existing)}, but this load declares partition "
                f"{list(wanted)}; the partitioning of an existing table cannot change. Declare the table's "
                "partition columns (or none), or load into a new table.",
            )
        return existing
    missing = [name for name in wanted if name not in batch_columns]
    if missing:
        raise ConfigError(
            "columns",
            f"partition column(s) {missing} are not in the batch; give them a data_type or add them to "
            "the data",
        )
    return wanted
