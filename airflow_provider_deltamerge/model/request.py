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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..errors import ConfigError
from .arguments import (
    ARGUMENT_CHECKS,
    RUN_CHECKS,
    check_stored_table_name,
    declared_columns,
)
from .cdc import (
    DEFAULT_TOMBSTONE_RETENTION,
    check_cdc,
    check_scd2_retention,
)
from .change_feed import check_feed_load, feed_incremental
from .columns import ColumnSchema
from .contract import SchemaContract
from .incremental import Incremental, parse_incremental, parse_instant
from .naming import (
    naming_convention,
    table_path,
    table_uri,
)
from .null_updates import check_null_updates
from .options import (
    TableHints,
    WriteDisposition,
    effective_hints,
    parse_columns,
    resolve_hints,
    validate_disposition,
)
from .run import RunContext
from .sources import is_change_feed
from .storage import delta_rs_options
from .table_names import TableName, catalog_uri, parse_table_name
from .table_properties import check_loading_allowed
from .track_history import check_track_history

FORMAT_VERSION = 1
DEFAULT_PIPELINE = "deltamerge"
# Arguments that never travel in the request's JSON: credentials (see `to_json`).
NOT_SERIALISED = ("storage_options",)


def _derived() -> Any:
    return field(init=False, repr=False, compare=False)


@dataclass(frozen=True)
class LoadRequest:
    """One load: source, target, write semantics and the Airflow run it belongs to.

    Build it with :meth:`create` (keyword arguments as run_load takes them). `source` is None when
    the data is handed to run_load directly.
    """

    dataset: str | None  # None only for a catalog table: it then lives where its catalog says
    table_name: (
        str  # `table` (under dataset), `schema.table` or `catalog.schema.table` (model/table_names.py)
    )
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
    expectations: Any = None  # {action: {name: condition}}: data quality checks (model/expectations.py)
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
    catalog: str = "spark"  # who names a `schema.table`: the session's catalog, or "glue" (AWS Glue's API)
    create_schema: bool = False  # a catalog table's missing schema created, not refused

    # What the job uses, derived once from the arguments above (names in the naming convention).
    table: str = _derived()  # the table's name as stored
    target: TableName = _derived()  # table_name's parts (a catalog's schema and catalog, where named)
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
            if name in ("source", "dataset") and value is None:
                continue
            object.__setattr__(self, name, check(value))
        if self.data_interval is not None:
            object.__setattr__(self, "data_interval", tuple(self.data_interval))
        normalize = naming_convention(self.naming)
        target = parse_table_name(self.table_name)
        if self.dataset is None and not target.in_catalog:
            raise ConfigError(
                "dataset",
                f"is required for table {self.table_name!r}: a table named without a schema lives under "
                "the dataset; give a dataset, or name the table through a catalog (schema.table)",
            )
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
            "table": check_stored_table_name(self.table_name, normalize(target.table), self.dataset),
            "target": target,
            "pipeline": self.pipeline_name or DEFAULT_PIPELINE,
            "disposition": disposition,
            "hints": dataclasses.replace(effective_hints(disposition, hints), **events),
            "declared": declared_columns(self.columns, normalize),
            "contract": SchemaContract.parse(self.schema_contract),
            "cursor": parse_incremental(self.incremental, normalize),
            "interval": tuple(parse_instant(v) for v in self.data_interval) if self.data_interval else None,
            "run": RunContext.from_value(self.run_context),
            "store_options": (
                delta_rs_options(self.dataset, self.storage_options) if self.dataset is not None else None
            ),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @classmethod
    def create(cls, **arguments: Any) -> LoadRequest:
        """The validated request; ConfigError names a bad or unknown argument.

        ``arguments``: table_name (required), dataset (required unless the table is named through a
        catalog: `schema.table`), source, write_disposition, primary_key,
        merge_key, sequence_by, column_list, except_column_list, apply_as_deletes, apply_as_truncates,
        tombstone_retention, ignore_null_updates, ignore_null_updates_column_list,
        ignore_null_updates_except_column_list, track_history_column_list,
        track_history_except_column_list, columns, schema_contract, expectations,
        pipeline_name, backend, naming, incremental, window_overwrite, table_properties,
        max_table_nesting, nested_layout, root_key, storage_options, catalog, create_schema, and the
        run's data_interval, run_context and load_id.
        """
        known = [f.name for f in dataclasses.fields(cls) if f.init]
        unknown = sorted(set(arguments) - set(known))
        if unknown:
            raise ConfigError("request", f"unknown argument(s) {unknown}; valid: {', '.join(known)}")
        if "table_name" not in arguments:
            raise ConfigError("table_name", "is required")
        return cls(**{"dataset": None, **arguments})

    @property
    def stored_table_name(self) -> str:
        """The table's name after the naming convention: what run_load writes and reports."""
        return self.table

    @property
    def table_path(self) -> str:
        return table_path(self.dataset, self.table)

    @property
    def table_uri(self) -> str:
        """The table's URI: a catalog table's by its name (model/table_names.catalog_uri)."""
        if self.target.in_catalog:
            return catalog_uri(self.target, self.table, self.catalog)
        return table_uri(self.dataset, self.target.table, self.naming)

    def placed(self, dataset: str) -> LoadRequest:
        """A catalog table's request with the folder its catalog keeps it in (and its bookkeeping)."""
        return dataclasses.replace(self, dataset=dataset)

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
