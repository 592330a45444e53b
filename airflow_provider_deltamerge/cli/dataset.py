"""A dataset as the read commands see it: its Delta tables read with delta-rs, nothing written.

A dataset is the base location loads are given: it holds one folder per table and the dataset's own
tables `_dlt_loads` and `_dlt_pipeline_state`. A location without them is refused with an error that
says what it is instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from ..delta.locking import local_path
from ..delta.store import LOADS_TABLE, STATE_TABLE, StoreSnapshot, read_commits
from ..errors import ConfigError
from ..model.arguments import check_dataset
from ..model.cdc import TOMBSTONES_PREFIX, tombstones_table
from ..model.naming import check_folder_name, table_path

SYSTEM_TABLES = (LOADS_TABLE, STATE_TABLE)


def absolute(location: str) -> str:
    """A location as loads need it: URIs as given, local paths made absolute."""
    return location if "://" in location else os.path.abspath(location)


class Dataset:
    """The tables of one dataset, read with delta-rs and the given object store options."""

    def __init__(self, location: str, storage_options: Iterable[tuple[str, str]] = ()) -> None:
        self.location = check_dataset(absolute(location))
        self.storage_options = dict(storage_options) or None
        self._require_dataset()

    def table(self, name: str, version: int | None = None) -> DeltaTable | None:
        """A table of the dataset (by its stored name), None when there is none."""
        try:
            return DeltaTable(self.path(name), version=version, storage_options=self.storage_options)
        except TableNotFoundError:
            return None

    def path(self, name: str) -> str:
        return table_path(self.location, name)

    def rows(self, name: str) -> list[dict[str, Any]]:
        table = self.table(name)
        return scan(table).to_table(use_threads=False).to_pylist() if table is not None else []

    def store(self) -> StoreSnapshot:
        """`_dlt_loads` (oldest first, metrics parsed) and `_dlt_pipeline_state`, as a load reads them."""
        loads = [
            {**row, "metrics": json.loads(row["metrics"]) if row["metrics"] else {}}
            for row in self.rows(LOADS_TABLE)
        ]
        loads.sort(key=lambda row: float(row["load_id"]))
        return StoreSnapshot(self.location, loads, self.rows(STATE_TABLE))

    def table_names(self, loads: list[dict[str, Any]]) -> list[str]:
        """The dataset's data tables: those its loads name, and on a local disk every Delta table in it."""
        names = {row["table_name"] for row in loads}
        folder = local_path(self.location)
        if folder is not None:
            names.update(
                entry.name
                for entry in os.scandir(folder)
                if entry.is_dir() and os.path.isdir(os.path.join(entry.path, "_delta_log"))
            )
        return sorted(n for n in names - set(SYSTEM_TABLES) if not n.startswith(TOMBSTONES_PREFIX))

    def companion_tables(self, names: list[str]) -> list[str]:
        """The tombstone tables (docs/CDC.md) the data tables `names` have."""
        return [tombstones_table(n) for n in names if self.table(tombstones_table(n)) is not None]

    def commits(self, name: str, limit: int) -> list[dict[str, Any]]:
        """The table's newest commits: version, time, operation and the load id each carries."""
        table = self.table(name)
        if table is None:
            raise ConfigError("TABLE", f"there is no Delta table {name!r} in dataset {self.location}")
        times = {entry["version"]: entry.get("timestamp") for entry in table.history(limit or None)}
        return [
            {
                "version": commit.version,
                "timestamp": times.get(commit.version),
                "operation": commit.operation,
                "load_id": commit.metadata.get("load_id"),
            }
            for commit in read_commits(self.path(name), limit or None, self.storage_options)
        ]

    def _require_dataset(self) -> None:
        if any(self.table(name) is not None for name in SYSTEM_TABLES):
            return
        folder = local_path(self.location)
        if folder is not None and not os.path.exists(folder):
            raise ConfigError("DATASET", f"{self.location} does not exist")
        if self.table_at_location():
            parent = self.location.rsplit("/", 1)[0] or "/"
            raise ConfigError(
                "DATASET",
                f"{self.location} is a Delta table, not a dataset; its dataset is the folder that holds "
                f"it and {LOADS_TABLE}, e.g. {parent}",
            )
        raise ConfigError(
            "DATASET",
            f"{self.location} is not a deltamerge dataset: it has no {LOADS_TABLE} or {STATE_TABLE} table "
            "(no load has completed there). Give the dataset location the loads were given.",
        )

    def table_at_location(self) -> bool:
        return DeltaTable.is_deltatable(self.location, storage_options=self.storage_options)


def table_name(argument: str, name: str) -> str:
    """A table name given on the command line: one folder inside the dataset, as loads name tables (not
    `..`, a path or a URI), so that no command reads beside or above the dataset."""
    return check_folder_name(argument, name)


def scan(table: DeltaTable):
    """The table as a pyarrow dataset, to be read on the calling thread (``use_threads=False``): a
    short-lived process whose reads used pyarrow's thread pool can abort at exit with deltalake 1.6
    ("terminate called without an active exception", delta-io/delta-rs#2184)."""
    return table.to_pyarrow_dataset()


def describe_table(name: str, table: DeltaTable) -> dict[str, Any]:
    """A table's version, row count, files, size, partitioning, properties and schema."""
    actions = table.get_add_actions(flatten=True)
    counts = actions.column("num_records").to_pylist()
    rows = sum(counts) if all(c is not None for c in counts) else scan(table).count_rows(use_threads=False)
    metadata = table.metadata()
    partitions = list(metadata.partition_columns)
    return {
        "table": name,
        "system": name in SYSTEM_TABLES or name.startswith(TOMBSTONES_PREFIX),
        "version": table.version(),
        "rows": rows,
        "files": actions.num_rows,
        "size_bytes": sum(actions.column("size_bytes").to_pylist()),
        "partition_columns": partitions,
        "properties": dict(metadata.configuration or {}),
        "columns": [
            {
                "name": field.name,
                "type": type_name(json.loads(field.type.to_json())),
                "nullable": field.nullable,
                "partition": field.name in partitions,
            }
            for field in table.schema().fields
        ],
    }


def type_name(delta_type: str | Mapping[str, Any]) -> str:
    """Delta's type as SQL spells it: long, decimal(10,2), array<string>, struct<a:long,b:string>."""
    if isinstance(delta_type, str):
        return delta_type
    kind = delta_type["type"]
    if kind == "array":
        return f"array<{type_name(delta_type['elementType'])}>"
    if kind == "map":
        return f"map<{type_name(delta_type['keyType'])},{type_name(delta_type['valueType'])}>"
    fields = ",".join(f"{f['name']}:{type_name(f['type'])}" for f in delta_type["fields"])
    return f"struct<{fields}>"
