"""What a batch changes in its table's schema, under the load's schema contract: variant columns, new
columns, a new table.

Before staging, the batch is compared with the table as the load found it:
- a column whose values the table's column cannot store without loss (text into bigint, say) moves to
  its variant column `<column>__v_<type>`, as dlt does, unless it is a key or declared column (those
  are refused at alignment, naming column and types);
- the contract then decides, per entity (`tables`, `columns`, `data_type` for new variant columns):
  evolve (keep), freeze (refuse, naming it), discard_row (drop the rows that carry a value there),
  discard_value (drop the values).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ContractError
from ..model.columns import VARIANT_SEPARATOR, dlt_type_of, variant_name
from ..model.contract import SchemaContract
from ..model.naming import HELPER_PREFIX
from .names import col
from .schema import can_widen

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ContractedBatch:
    df: DataFrame
    rows_discarded: int = 0


def apply_schema_contract(
    df: DataFrame,
    table_schema: T.StructType | None,
    table: str,
    contract: SchemaContract,
    fixed: frozenset[str] = frozenset(),
) -> ContractedBatch:
    """The batch with variant columns split off and the contract applied. `fixed`: columns that never
    become variants or count as new (keys, declared columns)."""
    if table_schema is None:
        return _new_table(df, table, contract)
    table_types = {f.name: f.dataType for f in table_schema.fields}
    df, variants = _split_variants(df, table_types, fixed)
    variants.update(_variants_made(df.columns, table_types, variants))
    new_variants = [v for v in variants if v not in table_types]
    batch_types = {f.name: f.dataType for f in df.schema.fields}
    new_columns = [
        name
        for name, data_type in batch_types.items()
        if name not in table_types
        and name not in fixed
        and name not in variants
        and not name.startswith(HELPER_PREFIX)
        and not isinstance(data_type, T.NullType)
    ]
    discarded = 0
    for entity, columns in (("data_type", new_variants), ("columns", new_columns)):
        df, dropped = _apply(df, table, entity, getattr(contract, entity), columns, variants)
        discarded += dropped
    return ContractedBatch(df, discarded)


def _new_table(df: DataFrame, table: str, contract: SchemaContract) -> ContractedBatch:
    mode = contract.tables
    if mode == "freeze":
        raise ContractError(table, "tables", table)
    if mode == "evolve":
        return ContractedBatch(df)
    rows = df.count()
    log.warning(
        "table %s does not exist and the contract discards new tables: %d row(s) discarded", table, rows
    )
    return ContractedBatch(df.limit(0), rows)


def _split_variants(
    df: DataFrame, table_types: dict[str, T.DataType], fixed: frozenset[str]
) -> tuple[DataFrame, dict[str, str]]:
    """Columns whose type the table's column cannot take, renamed to their variant columns."""
    variants: dict[str, str] = {}
    for field in df.schema.fields:
        name, batch_type = field.name, field.dataType
        table_type = table_types.get(name)
        if table_type is None or name in fixed or isinstance(batch_type, T.NullType):
            continue
        if can_widen(batch_type, table_type):
            continue
        variants[variant_name(name, dlt_type_of(batch_type.simpleString()))] = name
    if not variants:
        return df, {}
    for variant, name in variants.items():
        log.info(
            "column %r holds %s values: they go to variant column %r", name, df.schema[name].dataType, variant
        )
        df = df.withColumnRenamed(name, variant)
    return df, variants


def _variants_made(columns: list[str], table_types: dict[str, T.DataType], variants: dict[str, str]):
    """Variant columns the batch already has (Python rows are normalised so), new to the table:
    variant name -> the column whose values they hold."""
    made = {}
    for name in columns:
        base, separator, _ = name.rpartition(VARIANT_SEPARATOR)
        if separator and base in table_types and name not in table_types and name not in variants:
            made[name] = base
    return made


def _apply(
    df: DataFrame, table: str, entity: str, mode: str, columns: list[str], variants: dict[str, str]
) -> tuple[DataFrame, int]:
    """(the batch, rows discarded) after one entity's mode over the columns new to the table."""
    if not columns or mode == "evolve":
        return df, 0
    if mode == "freeze":
        name = columns[0]
        detail = f" for values of column {variants[name]!r} of another type" if name in variants else ""
        raise ContractError(table, entity, name, detail)
    if mode == "discard_value":
        log.warning("schema contract: values of new %s %s are discarded", entity, columns)
        return df.drop(*columns), 0
    carrying = F.lit(False)
    for name in columns:
        carrying = carrying | col(name).isNotNull()
    discarded = df.where(carrying).count()
    log.warning("schema contract: %d row(s) carrying new %s %s are discarded", discarded, entity, columns)
    return df.where(~carrying).drop(*columns), discarded
