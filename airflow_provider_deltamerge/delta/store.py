"""The dataset's own tables: `_dlt_loads` (one row per completed load) and `_dlt_pipeline_state`.

Both are Delta tables beside the data, written with delta-rs from the driver whatever the data writer.
A load reads both ONCE, at its start, into a `StoreSnapshot` that the rest of the load is handed; the
writes below keep that snapshot current. The target table's commit is the source of truth and these
tables index it: every data commit carries its load's metadata and new cursor state, so a load whose
commit landed but whose rows here were not written is recorded from its commit
(`record_unrecorded_loads`), and a cursor state missing here is taken from the commits (`cursor_state`).
Both use the one read of the table's recent history a load makes (`recovery.table_history`).
How one row is written exactly once, and each table compacted, is in delta/state_table.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from ..errors import StoreError
from ..model.naming import LOAD_ID, table_path
from .delta_rs import DeltaRsWriter
from .locking import local_path
from .state_table import all_rows, write_row
from .storage import unreadable_store
from .writer import LoggedCommit

log = logging.getLogger(__name__)

LOADS_TABLE = "_dlt_loads"
STATE_TABLE = "_dlt_pipeline_state"
STATE_ENGINE_VERSION = 1
HISTORY_DEPTH = 25  # commits of a table looked at for unrecorded loads and a lost cursor state
LOADS_SCHEMA = pa.schema(
    [
        ("load_id", pa.string()),
        ("schema_name", pa.string()),
        ("status", pa.int64()),
        ("inserted_at", pa.timestamp("us", tz="UTC")),
        ("schema_version_hash", pa.string()),
        ("table_name", pa.string()),
        ("window_start", pa.string()),
        ("window_end", pa.string()),
        ("table_version", pa.int64()),
        ("metrics", pa.string()),
        ("dag_id", pa.string()),
        ("task_id", pa.string()),
        ("run_id", pa.string()),
        ("try_number", pa.int64()),
    ]
)
STATE_SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        ("engine_version", pa.int64()),
        ("pipeline_name", pa.string()),
        ("table_name", pa.string()),
        ("state", pa.string()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("version_hash", pa.string()),
        (LOAD_ID, pa.string()),
    ]
)


@dataclass(frozen=True)
class LoadRecord:
    """Everything the state tables hold about one completed load."""

    load_id: str
    pipeline_name: str
    table_name: str
    table_version: int
    metrics: dict[str, Any]
    window: dict[str, Any] | None = None
    run: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] | None = None  # the table's new cursor state, if the load changed it
    columns: dict[str, Any] | None = None  # the table's declared column schema after the load


def read_table(path: str, storage_options: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every row of one state table (read by `state_table.all_rows`). A table that is not there yet is empty;
    something else in its place, or a store that refuses the read, is refused before the load commits
    anything."""
    local = local_path(path)
    if local is not None and os.path.exists(local) and not os.path.isdir(local):
        raise StoreError(path, "is a file, where this dataset keeps a Delta table; move the file away")
    try:
        return all_rows(DeltaTable(path, storage_options=storage_options)).to_pylist()
    except TableNotFoundError:
        if local is not None and os.path.isdir(local) and os.listdir(local):
            raise StoreError(path, "holds files but no Delta table (no _delta_log); move them away") from None
        return []
    except (DeltaError, OSError) as exc:
        if local is not None:
            raise
        raise unreadable_store(path, exc, storage_options) from None


@dataclass
class StoreSnapshot:
    """The dataset's `_dlt_loads` and `_dlt_pipeline_state`, read once; writes here keep it current."""

    dataset: str
    loads: list[dict[str, Any]]  # oldest first, `metrics` parsed
    state_rows: list[dict[str, Any]]
    storage_options: dict[str, str] | None = field(default=None, repr=False)  # for delta-rs

    @classmethod
    def read(cls, dataset: str, storage_options: dict[str, str] | None = None) -> StoreSnapshot:
        return cls(
            dataset,
            _parsed_loads(read_table(table_path(dataset, LOADS_TABLE), storage_options)),
            read_table(state_path(dataset), storage_options),
            storage_options,
        )

    def loads_of(self, pipeline_name: str | None = None, table_name: str | None = None) -> list[dict]:
        return [
            r
            for r in self.loads
            if (pipeline_name is None or r["schema_name"] == pipeline_name)
            and (table_name is None or r["table_name"] == table_name)
        ]

    def load(self, load_id: str) -> dict | None:
        return next((r for r in self.loads if r["load_id"] == load_id), None)

    def newest_load_id(self) -> str | None:
        return self.loads[-1]["load_id"] if self.loads else None

    def has_state_row(self, load_id: str) -> bool:
        return any(r[LOAD_ID] == load_id for r in self.state_rows)

    def latest_state(self, pipeline_name: str, table_name: str) -> dict | None:
        """The newest stored state of a table whose load completed (has a `_dlt_loads` row)."""
        row = self.latest_state_row(pipeline_name, table_name)
        return json.loads(row["state"]) if row is not None else None

    def latest_state_row(self, pipeline_name: str, table_name: str) -> dict | None:
        completed = {r["load_id"] for r in self.loads_of(pipeline_name, table_name)}
        rows = [
            r
            for r in self.state_rows
            if r["pipeline_name"] == pipeline_name
            and r["table_name"] == table_name
            and r[LOAD_ID] in completed
        ]
        return max(rows, key=lambda r: float(r[LOAD_ID]), default=None)


def _parsed_loads(rows: list[dict]) -> list[dict]:
    parsed = [{**r, "metrics": json.loads(r["metrics"]) if r["metrics"] else {}} for r in rows]
    return sorted(parsed, key=lambda r: float(r["load_id"]))


def state_path(dataset: str) -> str:
    return table_path(dataset, STATE_TABLE)


# -- reading outside a load (the hook, tests, tools) ---------------------------------------------------


def read_loads(
    dataset: str,
    pipeline_name: str | None = None,
    table_name: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> list[dict]:
    """Completed loads, oldest first, with `metrics` parsed."""
    loads = _parsed_loads(read_table(table_path(dataset, LOADS_TABLE), storage_options))
    return StoreSnapshot(dataset, loads, []).loads_of(pipeline_name, table_name)


def read_load(dataset: str, load_id: str, storage_options: dict[str, str] | None = None) -> dict | None:
    return next(
        (r for r in read_loads(dataset, storage_options=storage_options) if r["load_id"] == load_id), None
    )


def latest_state(
    dataset: str, pipeline_name: str, table_name: str, storage_options: dict[str, str] | None = None
) -> dict | None:
    return StoreSnapshot.read(dataset, storage_options).latest_state(pipeline_name, table_name)


def read_commits(
    table_path: str, limit: int | None = None, storage_options: dict[str, str] | None = None
) -> list[LoggedCommit]:
    """A table's newest commits (all when `limit` is None), newest first, each with the load id and
    metadata its load gave it, whichever writer made it: read with delta-rs, which shows both forms."""
    return DeltaRsWriter(storage_options).history(table_path, limit)


# -- writing: the state row, then the `_dlt_loads` row that completes the load ----------------------------


def record_load(snapshot: StoreSnapshot, record: LoadRecord, *, replace: bool = True) -> None:
    """Both rows of a load; idempotent (a recorded load is left alone, a state row is not repeated)."""
    write_state_row(snapshot, record, replace=replace)
    write_load_row(snapshot, record, replace=replace)


def write_state_row(snapshot: StoreSnapshot, record: LoadRecord, *, replace: bool = True) -> None:
    """The load's new cursor state, unless it has none, is recorded, or has its state row already.
    `replace`: see `state_table.write_row`."""
    if record.state is None or snapshot.load(record.load_id) or snapshot.has_state_row(record.load_id):
        return
    row = _state_row(record, datetime.now(timezone.utc))
    path = state_path(snapshot.dataset)
    write_row(path, STATE_SCHEMA, row, LOAD_ID, replace=replace, storage_options=snapshot.storage_options)
    snapshot.state_rows.append(row)


def write_load_row(snapshot: StoreSnapshot, record: LoadRecord, *, replace: bool = True) -> None:
    """The `_dlt_loads` row that completes the load, unless the load is recorded already.
    `replace`: see `state_table.write_row`."""
    if snapshot.load(record.load_id) is not None:
        return
    row = _loads_row(record, datetime.now(timezone.utc))
    path = table_path(snapshot.dataset, LOADS_TABLE)
    write_row(path, LOADS_SCHEMA, row, "load_id", replace=replace, storage_options=snapshot.storage_options)
    snapshot.loads.append({**row, "metrics": record.metrics})
    snapshot.loads.sort(key=lambda r: float(r["load_id"]))


def rewrite_load_metrics(snapshot: StoreSnapshot, load_id: str, metrics: dict[str, Any]) -> None:
    """Write a recorded load's `_dlt_loads` row again with other metrics (a retry that finished a load
    recorded from its commit says so: plan/reruns.py)."""
    row = snapshot.load(load_id)
    text = json.dumps(metrics, sort_keys=True, default=str)
    written = {name: text if name == "metrics" else row[name] for name in LOADS_SCHEMA.names}
    path = table_path(snapshot.dataset, LOADS_TABLE)
    write_row(path, LOADS_SCHEMA, written, "load_id", replace=True, storage_options=snapshot.storage_options)
    row["metrics"] = metrics


def _state_row(record: LoadRecord, now: datetime) -> dict:
    text = json.dumps(record.state, sort_keys=True, default=str)
    return {
        "version": 1,
        "engine_version": STATE_ENGINE_VERSION,
        "pipeline_name": record.pipeline_name,
        "table_name": record.table_name,
        "state": text,
        "created_at": now,
        "version_hash": hashlib.sha256(text.encode()).hexdigest()[:20],
        LOAD_ID: record.load_id,
    }


def _loads_row(record: LoadRecord, now: datetime) -> dict:
    window = record.window or {}
    return {
        "load_id": record.load_id,
        "schema_name": record.pipeline_name,
        "status": 0,
        "inserted_at": now,
        "schema_version_hash": _schema_hash(record.columns),
        "table_name": record.table_name,
        "window_start": _text(window.get("start")),
        "window_end": _text(window.get("end")),
        "table_version": record.table_version,
        "metrics": json.dumps(record.metrics, sort_keys=True, default=str),
        "dag_id": record.run.get("dag_id"),
        "task_id": record.run.get("task_id"),
        "run_id": record.run.get("run_id"),
        "try_number": record.run.get("try_number"),
    }


def _schema_hash(columns: dict[str, Any] | None) -> str | None:
    """A short hash of the table's declared column schema (the schema itself is in the load's commit)."""
    if not columns:
        return None
    return hashlib.sha256(json.dumps(columns, sort_keys=True).encode()).hexdigest()[:20]


def _text(value) -> str | None:
    return None if value is None else str(value)
