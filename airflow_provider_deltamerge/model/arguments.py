"""A load's arguments checked one by one, each into its canonical form (what a request holds and the
JSON carries), each refusal a ConfigError naming the argument. `ARGUMENT_CHECKS` runs at DAG parse time
for what is known then (operators) and in full in `LoadRequest.__post_init__` (model/request.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..errors import ConfigError
from .cdc import check_column_list, check_condition, check_sequence_by, check_tombstone_retention
from .checks import choice, key_tuple
from .columns import ColumnSchema, canonical_columns
from .contract import check_schema_contract
from .expectations import check_expectations
from .incremental import as_incremental, parse_instant
from .naming import NAMINGS, NOT_IN_NAMES, SYSTEM_PREFIX, check_folder_name, check_table_location
from .null_updates import check_ignore_null_updates
from .options import BACKENDS, WriteDisposition, parse_columns
from .run import RunContext
from .secrets import credential_values, redact_text
from .sources import parse_source
from .storage import check_storage_options
from .table_names import parse_table_name
from .table_properties import check_table_properties

NESTED_LAYOUTS = ("flatten", "struct")  # nested_layout: dicts flattened into columns, or kept as structs
RESERVED_TABLE_PREFIX = SYSTEM_PREFIX + "_"  # _dlt_loads, _dlt_pipeline_state and dlt's others
# URI schemes the datasets' writers reach (delta-rs object stores, Hadoop file systems for delta-spark).
DATASET_SCHEMES = ("file", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "azure", "hdfs", "memory")


def check_dataset(dataset: Any) -> str:
    if not isinstance(dataset, str) or not dataset:
        raise ConfigError("dataset", f"{dataset!r} must be a non-empty path or URI")
    scheme = dataset.split("://", 1)[0].lower() if "://" in dataset else None
    secrets = credential_values(dataset) if scheme is not None else []
    if secrets:  # no writer reads credentials from there, and the location is in every log line and error
        raise ConfigError(
            "dataset",
            f"{redact_text(dataset, secrets)!r} holds a credential in its URI, which would show in logs and "
            "errors and which no writer reads from there. Nothing was read or written: give the location "
            "without it, and the credentials as storage_options (operators: the fields of storage_conn_id).",
        )
    if scheme is not None and scheme not in DATASET_SCHEMES:
        raise ConfigError(
            "dataset",
            f"{dataset!r} has the scheme {scheme!r}, which Delta's writers cannot reach; use an absolute "
            f"path or a URI with one of {', '.join(DATASET_SCHEMES)}",
        )
    if "://" not in dataset and not dataset.startswith("/"):
        raise ConfigError(
            "dataset",
            f"{dataset!r} is a relative path; give an absolute path or a URI (s3://..., file:///...), "
            "because the load may run in another working directory or on another machine",
        )
    return dataset.rstrip("/") or dataset


def check_table_name(table_name: Any) -> str:
    """`table`, `schema.table` or `catalog.schema.table` (model/table_names.py), without a path's
    separators anywhere."""
    if not isinstance(table_name, str) or not table_name or any(c in table_name for c in NOT_IN_NAMES):
        raise ConfigError("table_name", f"{table_name!r} must be a non-empty name without '/' or '\\'")
    if table_name in (".", ".."):
        raise ConfigError("table_name", f"{table_name!r} is not one folder inside the dataset")
    parse_table_name(table_name)
    return table_name


CATALOGS = ("spark", "glue")  # who names a `schema.table`: the Spark session's catalog, or AWS Glue's API


def check_catalog(value: Any) -> str:
    return choice("catalog", value, CATALOGS)


def check_create_schema(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError("create_schema", f"{value!r} must be True or False")
    return value


def check_stored_table_name(table_name: str, stored: str, dataset: str | None = None) -> str:
    """The table's name as stored is one folder of the dataset that its store can hold (see
    `check_folder_name`), and none of the dataset's own tables."""
    check_folder_name("table_name", stored, table_name)
    if dataset is not None:
        check_table_location("table_name", dataset, stored)
    if stored.lower().startswith(RESERVED_TABLE_PREFIX):
        raise ConfigError(
            "table_name",
            f"{table_name!r} is stored as {stored!r}; names starting with {RESERVED_TABLE_PREFIX!r} are "
            "reserved for the dataset's own tables (_dlt_loads, _dlt_pipeline_state): choose another name",
        )
    return stored


def check_interval(interval: Any) -> tuple[str, str] | None:
    """Airflow's (data_interval_start, data_interval_end) as ISO strings (naive read as UTC), or None."""
    if interval is None:
        return None
    if not isinstance(interval, (tuple, list)) or len(interval) != 2:
        raise ConfigError("data_interval", f"{interval!r} must be a (start, end) pair or None")
    if interval[0] is None or interval[1] is None:
        return None
    return _instant_text(interval[0], "data_interval[0]"), _instant_text(interval[1], "data_interval[1]")


def _instant_text(value: Any, argument: str) -> str:
    if isinstance(value, (datetime, str)) and value != "":
        try:
            return parse_instant(value).isoformat()
        except ValueError:
            pass
    raise ConfigError(argument, f"{value!r} is not a datetime or an ISO 8601 timestamp")


def check_incremental(incremental: Any) -> dict[str, Any] | None:
    """An Incremental (or its dict form) as its validated dict form."""
    incremental = as_incremental(incremental)
    return None if incremental is None else incremental.to_dict()


def check_pipeline_name(name: Any) -> str | None:
    if name is not None and (not isinstance(name, str) or not name):
        raise ConfigError("pipeline_name", f"{name!r} must be a non-empty string")
    return name


def check_window_overwrite(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError("window_overwrite", f"must be true or false, got {value!r}")
    return value


def check_max_table_nesting(value: Any) -> int | None:
    """None (no limit, dlt's default) or a whole number >= 0 (0: no child tables)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            "max_table_nesting",
            f"{value!r} must be a whole number >= 0 (0: no child tables, arrays kept as JSON) or None",
        )
    return value


def check_nested_layout(value: Any) -> str | None:
    """None (dlt's layout for a new table, the layout an existing one has), or one of NESTED_LAYOUTS."""
    return None if value is None else choice("nested_layout", value, NESTED_LAYOUTS)


def check_root_key(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError("root_key", f"must be true or false, got {value!r}")
    return value


def check_load_id(value: Any) -> str | None:
    if value is None:
        return None
    try:
        valid = isinstance(value, str) and float(value) > 0
    except ValueError:
        valid = False
    if not valid:
        raise ConfigError(
            "load_id", f"{value!r} must be a load id: epoch seconds as text, e.g. '1717171717.123456'"
        )
    return value


def _keys(argument: str, value: Any) -> list[str] | None:
    names = key_tuple(argument, value)
    return list(names) if names else None


def declared_columns(columns: Any, normalize: Callable[[str], str]) -> dict[str, ColumnSchema]:
    """The declared column schema with every name in the naming convention."""
    parsed = parse_columns(columns)
    return {normalize(name): dataclasses.replace(c, name=normalize(name)) for name, c in parsed.items()}


# The canonical form of each load argument; each raises ConfigError naming the argument it rejects.
# Operators run them on arguments known when a DAG is parsed; LoadRequest runs all of them.
ARGUMENT_CHECKS: dict[str, Callable[[Any], Any]] = {
    "source": parse_source,
    "dataset": check_dataset,
    "table_name": check_table_name,
    "write_disposition": lambda value: WriteDisposition.parse(value).to_dict(),
    "primary_key": lambda value: _keys("primary_key", value),
    "merge_key": lambda value: _keys("merge_key", value),
    "sequence_by": check_sequence_by,
    "column_list": lambda value: check_column_list("column_list", value),
    "except_column_list": lambda value: check_column_list("except_column_list", value),
    "apply_as_deletes": lambda value: check_condition("apply_as_deletes", value),
    "apply_as_truncates": lambda value: check_condition("apply_as_truncates", value),
    "tombstone_retention": check_tombstone_retention,
    "ignore_null_updates": check_ignore_null_updates,
    "ignore_null_updates_column_list": lambda value: check_column_list(
        "ignore_null_updates_column_list", value
    ),
    "ignore_null_updates_except_column_list": lambda value: check_column_list(
        "ignore_null_updates_except_column_list", value
    ),
    "track_history_column_list": lambda value: check_column_list("track_history_column_list", value),
    "track_history_except_column_list": lambda value: check_column_list(
        "track_history_except_column_list", value
    ),
    "columns": canonical_columns,
    "schema_contract": check_schema_contract,
    "expectations": check_expectations,
    "pipeline_name": check_pipeline_name,
    "backend": lambda value: choice("backend", value, BACKENDS),
    "naming": lambda value: choice("naming", value, NAMINGS),
    "incremental": check_incremental,
    "window_overwrite": check_window_overwrite,
    "table_properties": check_table_properties,
    "max_table_nesting": check_max_table_nesting,
    "nested_layout": check_nested_layout,
    "root_key": check_root_key,
    "storage_options": check_storage_options,
    "catalog": check_catalog,
    "create_schema": check_create_schema,
}
RUN_CHECKS: dict[str, Callable[[Any], Any]] = {
    "data_interval": check_interval,
    "run_context": lambda value: RunContext.from_value(value).to_dict(),
    "load_id": check_load_id,
}
