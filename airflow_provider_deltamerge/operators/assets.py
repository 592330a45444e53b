"""The asset a load updates: a table's Asset by its path or catalog name, and what a task declares
when the DAG is parsed (an AssetAlias where the table is templated). Imports no pyspark."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.providers.common.compat.sdk import Asset, AssetAlias

from ..model.arguments import check_dataset, check_table_name
from ..model.naming import naming_convention, table_uri
from ..model.table_names import catalog_uri, parse_table_name


def is_templated(value: Any) -> bool:
    """True if a value (or anything nested in it) holds Jinja to be rendered at run time."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(is_templated(k) or is_templated(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(is_templated(v) for v in value)
    return False


def table_asset(
    dataset: str | None, table_name: str, naming: str = "snake_case", catalog: str = "spark"
) -> Asset:
    """The Asset a load into <dataset>/<table_name> updates; a catalog table's by its name
    (`catalog://<catalog>/<schema>/<table>`, model/table_names.py)."""
    target = parse_table_name(table_name)
    if target.in_catalog:
        return Asset(uri=catalog_uri(target, naming_convention(naming)(target.table), catalog))
    return Asset(uri=table_uri(dataset, table_name, naming))


def table_outlet(
    dataset: str | None, table_name: str, naming: str = "snake_case", catalog: str = "spark"
) -> Asset | AssetAlias:
    """What a task declares it updates, when the DAG is parsed: the table's Asset; or, where dataset
    or table_name is templated, an AssetAlias that the task resolves to the rendered table's Asset
    when it emits its event."""
    if is_templated([dataset, table_name, catalog]):
        return AssetAlias(name=f"deltamerge:{dataset}/{table_name}")
    check_table_name(table_name)
    if dataset is not None or not parse_table_name(table_name).in_catalog:
        check_dataset(dataset)
    return table_asset(dataset, table_name, naming, catalog)
