"""The dataset's own tables: `_dlt_loads` (one row per completed load) and `_dlt_pipeline_state`.

Both are Delta tables beside the data, written with delta-rs from the driver whatever the data writer.
A load reads both ONCE, at its start, into a `StoreSnapshot` that the rest of the load is handed; the
writes below keep that snapshot current. The target table's commit is the source of truth and these
tables index it: every data commit carries its load's metadata and new cursor state, so a load whose
commit landed but whose rows here were not written is recorded from its commit
(`record_unrecorded_loads`), and a cursor state missing here is taken from the commits (`cursor_state`).
Both use the one read of the table's recent history a load makes (`recent_commits`).
Every row written is a file of its own, so a table past COMPACT_AT_FILES files is compacted by the load
whose row it just took, keeping the read of both tables fast however many loads the dataset has had.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from ..errors import ConflictError, StoreError
from ..model.naming import LOAD_ID, table_path
from . import checkpoints
from .delta_rs import DeltaRsWriter
from .locking import creation_lock, local_path
from .read_check import PINNED
from .storage import store_write_errors, unreadable_store
from .writer import LoggedCommit

log = logging.getLogger(__name__)

LOADS_TABLE = "_dlt_loads"
STATE_TABLE = "_dlt_pipeline_state"
STATE_ENGINE_VERSION = 1
HISTORY_DEPTH = 25  # commits of a table looked at for unrecorded loads and a lost cursor state
_WRITE_ATTEMPTS = 10
# Every row written is a file of its own, and every load reads both tables whole: past this many files
# the writer of a row compacts the table (2,000 one-row files took 2.3 s to read, compacted 0.07 s; at
# 100 a load's read of the two grew from 0.04 s to 0.26 s before each compaction, so loads slowed by a
# third between compactions, while a compaction costs about as much as one such read).
COMPACT_AT_FILES = 20
_WRITTEN_SEARCH_DEPTH = 50  # commits of a state table searched for a row's commit right after making it
_RECORD_KEY = "deltamerge.record"  # commit metadata of a state-table write: the load id it records

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
    """Every row of one state table (read by `_all_rows`). A table that is not there yet is empty;
    something else in its place, or a store that refuses the read, is refused before the load commits
    anything."""
    local = local_path(path)
    if local is not None and os.path.exists(local) and not os.path.isdir(local):
        raise StoreError(path, "is a file, where this dataset keeps a Delta table; move the file away")
    try:
        return _all_rows(DeltaTable(path, storage_options=storage_options)).to_pylist()
    except TableNotFoundError:
        if local is not None and os.path.isdir(local) and os.listdir(local):
            raise StoreError(path, "holds files but no Delta table (no _delta_log); move them away") from None
        return []
    except (DeltaError, OSError) as exc:
        if local is not None:
            raise
        raise unreadable_store(path, exc, storage_options) from None


def _all_rows(table: DeltaTable) -> pa.Table:
    """The table version's rows, on one thread: deltalake 1.6's threaded to_pyarrow_table() can abort
    the process at exit. The only place the state tables' rows are read."""
    return table.to_pyarrow_dataset().to_table(use_threads=False)


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
    `replace`: see `_write_row`."""
    if record.state is None or snapshot.load(record.load_id) or snapshot.has_state_row(record.load_id):
        return
    row = _state_row(record, datetime.now(timezone.utc))
    path = state_path(snapshot.dataset)
    _write_row(path, STATE_SCHEMA, row, LOAD_ID, replace=replace, storage_options=snapshot.storage_options)
    snapshot.state_rows.append(row)


def write_load_row(snapshot: StoreSnapshot, record: LoadRecord, *, replace: bool = True) -> None:
    """The `_dlt_loads` row that completes the load, unless the load is recorded already.
    `replace`: see `_write_row`."""
    if snapshot.load(record.load_id) is not None:
        return
    row = _loads_row(record, datetime.now(timezone.utc))
    path = table_path(snapshot.dataset, LOADS_TABLE)
    _write_row(path, LOADS_SCHEMA, row, "load_id", replace=replace, storage_options=snapshot.storage_options)
    snapshot.loads.append({**row, "metrics": record.metrics})
    snapshot.loads.sort(key=lambda r: float(r["load_id"]))


def rewrite_load_metrics(snapshot: StoreSnapshot, load_id: str, metrics: dict[str, Any]) -> None:
    """Write a recorded load's `_dlt_loads` row again with other metrics (a retry that finished a load
    recorded from its commit says so: plan/reruns.py)."""
    row = snapshot.load(load_id)
    text = json.dumps(metrics, sort_keys=True, default=str)
    written = {name: text if name == "metrics" else row[name] for name in LOADS_SCHEMA.names}
    path = table_path(snapshot.dataset, LOADS_TABLE)
    _write_row(path, LOADS_SCHEMA, written, "load_id", replace=True, storage_options=snapshot.storage_options)
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


ROW_NOT_WRITTEN = "The row was not written."


def _write_row(
    path: str, schema: pa.Schema, row: dict, key: str, *, replace: bool, storage_options: dict | None = None
) -> None:
    """Write a load's one row into a state table so that the table holds it exactly once, however many
    loads write it at the same moment.

    Two loads do write the same record: a load records from its commit every commit of its table that it
    finds unrecorded, and it cannot tell a load whose job died after its commit from one that is about to
    record itself (nothing records that a job is alive, and any age limit would be a guess). So instead of
    deciding who writes, each write is idempotent. The row replaces whatever rows the table holds for the
    load (a Delta overwrite with the predicate `key = load id`), committed against the version it was
    planned on: Delta's conflict check refuses it when a concurrent commit added a row of the same load
    since, and it is planned again; rows of other loads (other values, told apart by the files'
    statistics) do not conflict. A load's own record (`replace`) replaces a copy another load wrote from
    its commit, and so keeps the metrics of the commit as it ran; a record rebuilt from a commit
    (`replace=False`) is written only where the load has no row yet. The commit is then looked for in the
    table's log: two writers creating a table at the same moment can both believe they wrote its first
    version.
    """
    data = pa.Table.from_pylist([row], schema=schema)
    load_id = row[key]
    properties = CommitProperties(custom_metadata={_RECORD_KEY: load_id})
    with store_write_errors(path, storage_options, ROW_NOT_WRITTEN):
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                table = _open_or_create(path, data, properties, storage_options)
                read_version = table.version() if table is not None else -1
                if table is not None:
                    if not replace and _holds_row(table, key, load_id):
                        return
                    write_deltalake(
                        table,
                        data,
                        mode="overwrite",
                        predicate=_equals(key, load_id),
                        commit_properties=properties,
                    )
                written = DeltaTable(path, storage_options=storage_options)
                if _written(written, load_id):
                    _compact_if_fragmented(written)
                    checkpoints.after_commits(written, read_version)
                    return
                log.warning("a row written to %s was lost to a concurrent writer; writing it again", path)
            except CommitFailedError:
                log.info(
                    "%s changed while load %s's row was written; writing again (%d)", path, load_id, attempt
                )
            time.sleep(random.uniform(0.05, 0.1 * attempt))  # apart from the loads it collided with
        raise ConflictError(
            f"could not write the row of load {load_id} to {path} in {_WRITE_ATTEMPTS} attempts while other "
            "loads wrote to it; retry the load, which records it from its commit"
        )


def _open_or_create(
    path: str, data: pa.Table, properties: CommitProperties, storage_options: dict | None
) -> DeltaTable | None:
    """The table as of now; None after creating it with `data` as its first row, under the creation lock."""
    try:
        return DeltaTable(path, storage_options=storage_options)
    except TableNotFoundError:
        pass
    with creation_lock(path):
        try:
            return DeltaTable(path, storage_options=storage_options)
        except TableNotFoundError:
            write_deltalake(
                path, data, mode="append", commit_properties=properties, storage_options=storage_options
            )
            return None


def _written(table: DeltaTable, load_id: str) -> bool:
    """Whether a commit writing the load's row is among the table's newest."""
    history = table.history(_WRITTEN_SEARCH_DEPTH)
    return any(e.get(_RECORD_KEY) == load_id for e in history)


def _compact_if_fragmented(table: DeltaTable) -> None:
    """One file for the whole table where it is in more than COMPACT_AT_FILES, rows unchanged (see
    `compact_state_table`). The row is written already, so nothing here fails the load: a concurrent
    writer's commit wins over the compaction, and a later load compacts the table."""
    files = len(table.file_uris())
    if files <= COMPACT_AT_FILES:
        return
    try:
        compact_state_table(table)
    except (DeltaError, OSError) as exc:  # CommitFailedError among them
        log.info("%s not compacted, left for a later load (%s)", table.table_uri, exc)


def compact_state_table(table: DeltaTable) -> dict[str, Any]:
    """Overwrite a state table, brought up to date, with its own rows in one file; what it did, under
    OPTIMIZE's metric names. The compaction of the store, and maintenance's OPTIMIZE of a state table.

    The table is overwritten with its own rows, not OPTIMIZEd: deltalake 1.6 commits two OPTIMIZEs of the
    same files made at once, and an overwrite or a row's write made over an OPTIMIZE, which keeps every
    row twice; it refuses the second of two overwrites (and an overwrite planned before a row's write, and
    a row's write planned before an overwrite). The overwrite may land only at the version after the one
    it read (`PINNED`), so no commit in between, whatever made it, is rebased away by delta-rs's own
    check. CommitFailedError when a concurrent commit came first."""
    table.update_incremental()
    removed = _sizes(table)
    rows = _all_rows(table)
    write_deltalake(
        table, rows, mode="overwrite", commit_properties=CommitProperties(max_commit_retries=PINNED)
    )
    table.update_incremental()
    added = _sizes(table)
    log.info(
        "compacted %s: %d rows from %d files into %d",
        table.table_uri,
        rows.num_rows,
        len(removed),
        len(added),
    )
    return {
        "numFilesAdded": len(added),
        "numFilesRemoved": len(removed),
        "filesAdded": {"totalSize": sum(added)},
        "filesRemoved": {"totalSize": sum(removed)},
    }


def _sizes(table: DeltaTable) -> list[int]:
    return table.get_add_actions(flatten=True).column("size_bytes").to_pylist()


def _equals(column: str, text: str) -> str:
    """A delta-rs (DataFusion SQL) predicate: the column equals the text."""
    quoted = text.replace("'", "''")
    return f"\"{column}\" = '{quoted}'"


def _holds_row(table: DeltaTable, key: str, load_id: str) -> bool:
    """Whether the table version holds a row of the load: one column, files pruned by their statistics."""
    return table.to_pyarrow_table(columns=[key], filters=[(key, "=", load_id)]).num_rows > 0
