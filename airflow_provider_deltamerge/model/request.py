"""LoadRequest: everything one load needs, validated once, frozen and JSON-serialisable.

The one request type. `run_load` builds it from its arguments; an operator builds it from its rendered
arguments and Airflow's context; the hook runs it in process, over Spark Connect, or ships it as JSON to
the spark-submit job, which reads it back with `from_json`. Every path constructs it, so every path goes
through the one validation in `__post_init__`.

A request holds its arguments in their canonical JSON form (what travels), and the views the job
uses, derived from them once: the stored table name, the parsed disposition and hints, the incremental
cursor, the interval as datetimes and the run context. No Airflow, no Spark, no Delta here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..errors import ConfigError
from ..spark.normalize import LAYOUTS
from .cdc import (
    DEFAULT_TOMBSTONE_RETENTION,
    check_cdc,
    check_column_list,
    check_condition,
    check_scd2_retention,
    check_sequence_by,
    check_tombstone_retention,
)
from .change_feed import check_feed_load, feed_incremental
from .checks import choice, key_tuple
from .columns import ColumnSchema, canonical_columns
from .contract import SchemaContract, check_schema_contract
from .incremental import Incremental, as_incremental, parse_incremental, parse_instant
from .naming import (
    NAMINGS,
    NOT_IN_NAMES,
    SYSTEM_PREFIX,
    check_folder_name,
    check_table_location,
    naming_convention,
    table_path,
    table_uri,
)
from .null_updates import check_ignore_null_updates, check_null_updates
from .options import (
    BACKENDS,
    TableHints,
    WriteDisposition,
    effective_hints,
    parse_columns,
    resolve_hints,
    validate_disposition,
)
from .run import RunContext
from .secrets import credential_values, redact_text
from .sources import is_change_feed, parse_source
from .storage import check_storage_options, delta_rs_options
from .table_properties import check_loading_allowed, check_table_properties
from .track_history import check_track_history

FORMAT_VERSION = 1
DEFAULT_PIPELINE = "deltamerge"
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
    if not isinstance(table_name, str) or not table_name or any(c in table_name for c in NOT_IN_NAMES):
        raise ConfigError("table_name", f"{table_name!r} must be a non-empty name without '/' or '\\'")
    if table_name in (".", ".."):
        raise ConfigError("table_name", f"{table_name!r} is not one folder inside the dataset")
    return table_name


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
    """None (dlt's layout for a new table, the layout it has for an existing one), or one of LAYOUTS."""
    return None if value is None else choice("nested_layout", value, LAYOUTS)


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
}
# Arguments that never travel in the request's JSON: credentials (see `to_json`).
NOT_SERIALISED = ("storage_options",)
RUN_CHECKS: dict[str, Callable[[Any], Any]] = {
    "data_interval": check_interval,
    "run_context": lambda value: RunContext.from_value(value).to_dict(),
    "load_id": check_load_id,
}


def _derived() -> Any:
    return field(init=False, repr=False, compare=False)


@dataclass(frozen=True)
class LoadRequest:
    """One load: source, target, write semantics and the Airflow run it belongs to.

    Build it with :meth:`create` (keyword arguments as run_load takes them). `source` is None when
    the data is handed to run_load directly.
    """

    dataset: str
    table_name: str
    source: dict[str, Any] | None = None
    write_disposition: Any = "append"
    primary_key: Any = None
    merge_key: Any = None
    sequence_by: Any = None  # change events: the column(s) that order them (model/cdc.py)
    column_list: Any = None  # change events: the columns stored, or
    except_column_list: Any = None  # the columns not stored
    apply_as_deletes: str | None = None  # change events: a SQL condition marking deletes (model/cdc.py)
    apply_as_truncates: str | None = None  # change events: a SQL condition marking truncates (model/cdc.py)
    tombstone_retention: Any = DEFAULT_TOMBSTONE_RETENTION  # seconds a deleted key is remembered
    ignore_null_updates: bool = False  # change events: a null keeps the stored value (model/null_updates.py)
    ignore_null_updates_column_list: Any = None  # in these columns only, or
    ignore_null_updates_except_column_list: Any = None  # in all non-key columns but these
    track_history_column_list: Any = None  # scd2 of events: only these columns' changes open versions, or
    track_history_except_column_list: Any = None  # all stored columns' but these (model/track_history.py)
    columns: Any = None
    schema_contract: Any = None
    pipeline_name: str | None = None
    backend: str = "auto"
    naming: str = "snake_case"
    incremental: Any = None
    data_interval: Any = None
    run_context: Any = None
    window_overwrite: bool = True
    table_properties: Any = None
    load_id: str | None = None
    max_table_nesting: int | None = None  # child tables up to this depth; deeper arrays kept as JSON
    nested_layout: str | None = None  # a list of dicts' dicts: "flatten" (dlt's) or "struct" columns
    root_key: bool = False  # _dlt_root_id in child tables whatever the disposition
    storage_options: Any = field(default=None, repr=False)  # delta-rs options: may hold credentials

    # What the job uses, derived once from the arguments above (names in the naming convention).
    table: str = _derived()  # the table's name as stored
    pipeline: str = _derived()  # pipeline_name, or the default
    disposition: WriteDisposition = _derived()
    hints: TableHints = _derived()  # the hints this disposition uses
    declared: dict[str, ColumnSchema] = _derived()  # the column schema given to this load
    contract: SchemaContract = _derived()
    cursor: Incremental | None = _derived()  # the incremental, cursor path in the naming convention
    interval: tuple[datetime, datetime] | None = _derived()
    run: RunContext = _derived()
    store_options: dict[str, str] | None = _derived()  # what delta-rs is handed (model/storage.py)

    def __post_init__(self) -> None:
        """The one validation of a load: every argument checked and put in canonical form."""
        for name, check in {**ARGUMENT_CHECKS, **RUN_CHECKS}.items():
            value = getattr(self, name)
            if name == "source" and value is None:
                continue
            object.__setattr__(self, name, check(value))
        if self.data_interval is not None:
            object.__setattr__(self, "data_interval", tuple(self.data_interval))
        normalize = naming_convention(self.naming)
        disposition = WriteDisposition.parse(self.write_disposition)
        hints = resolve_hints(self.primary_key, self.merge_key, parse_columns(self.columns), normalize)
        disposition = validate_disposition(disposition, hints, normalize)
        check_loading_allowed(self.table_properties, disposition.disposition, False, self.table_name)
        events = {
            name: tuple(normalize(c) for c in getattr(self, name) or ())
            for name in (
                "sequence_by",
                "column_list",
                "except_column_list",
                "ignore_null_updates_column_list",
                "ignore_null_updates_except_column_list",
                "track_history_column_list",
                "track_history_except_column_list",
            )
        }
        conditions = {
            "apply_as_deletes": self.apply_as_deletes,
            "apply_as_truncates": self.apply_as_truncates,
            "ignore_null_updates": self.ignore_null_updates,
        }
        events = {**events, **conditions}
        check_cdc(disposition, dataclasses.replace(hints, **events))
        check_scd2_retention(disposition, dataclasses.replace(hints, **events), self.tombstone_retention)
        check_null_updates(disposition, dataclasses.replace(hints, **events))
        check_track_history(disposition, dataclasses.replace(hints, **events))
        if is_change_feed(self.source):  # the upstream's commit version is the cursor
            object.__setattr__(self, "incremental", feed_incremental(self.incremental))
            check_feed_load(disposition.strategy, self.sequence_by)
        derived = {
            "table": check_stored_table_name(self.table_name, normalize(self.table_name), self.dataset),
            "pipeline": self.pipeline_name or DEFAULT_PIPELINE,
            "disposition": disposition,
            "hints": dataclasses.replace(effective_hints(disposition, hints), **events),
            "declared": declared_columns(self.columns, normalize),
            "contract": SchemaContract.parse(self.schema_contract),
            "cursor": parse_incremental(self.incremental, normalize),
            "interval": tuple(parse_instant(v) for v in self.data_interval) if self.data_interval else None,
            "run": RunContext.from_value(self.run_context),
            "store_options": delta_rs_options(self.dataset, self.storage_options),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @classmethod
    def create(cls, **arguments: Any) -> LoadRequest:
        """The validated request; ConfigError names a bad or unknown argument.

        ``arguments``: dataset, table_name (required), source, write_disposition, primary_key,
        merge_key, sequence_by, column_list, except_column_list, apply_as_deletes, apply_as_truncates,
        tombstone_retention, ignore_null_updates, ignore_null_updates_column_list,
        ignore_null_updates_except_column_list, track_history_column_list,
        track_history_except_column_list, columns, schema_contract,
        pipeline_name, backend, naming, incremental, window_overwrite, table_properties,
        max_table_nesting, nested_layout, root_key, storage_options, and the run's data_interval,
        run_context and load_id.
        """
        known = [f.name for f in dataclasses.fields(cls) if f.init]
        unknown = sorted(set(arguments) - set(known))
        if unknown:
            raise ConfigError("request", f"unknown argument(s) {unknown}; valid: {', '.join(known)}")
        missing = [name for name in ("dataset", "table_name") if name not in arguments]
        if missing:
            raise ConfigError(missing[0], "is required")
        return cls(**arguments)

    @property
    def stored_table_name(self) -> str:
        """The table's name after the naming convention: what run_load writes and reports."""
        return self.table

    @property
    def table_path(self) -> str:
        return table_path(self.dataset, self.table)

    @property
    def table_uri(self) -> str:
        return table_uri(self.dataset, self.table_name, self.naming)

    def with_load_id(self, load_id: str) -> LoadRequest:
        return dataclasses.replace(self, load_id=load_id)

    def describe(self) -> str:
        """One line for logs: target, disposition and interval (never the source options)."""
        interval = (
            f" interval {self.data_interval[0]} .. {self.data_interval[1]}" if self.data_interval else ""
        )
        return (
            f"{self.disposition.label} load into {self.table_uri}{interval} (load id {self.load_id or 'new'})"
        )

    def arguments(self) -> dict[str, Any]:
        """The request's arguments in canonical form, as `create` takes them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    def to_json(self) -> str:
        """The request as JSON, without its storage options: the JSON is written to a file and shipped
        to spark-submit, so credentials travel apart from it (see hooks/deltamerge.py)."""
        body = {k: v for k, v in self.arguments().items() if k not in NOT_SERIALISED}
        return json.dumps({**body, "format_version": FORMAT_VERSION}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, storage_options: Any = None) -> LoadRequest:
        """The request `to_json` wrote, with the storage options handed over apart from it."""
        body = json.loads(text)
        version = body.pop("format_version", None)
        if version != FORMAT_VERSION:
            raise ConfigError(
                "request",
                f"format version {version!r} is not {FORMAT_VERSION}; install the same "
                "airflow-provider-deltamerge version on Airflow and on the Spark cluster",
            )
        return cls.create(**body, storage_options=storage_options)
