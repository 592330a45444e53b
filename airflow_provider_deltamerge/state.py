"""The dataset's state tables: `_dlt_loads` (one row per completed load) and `_dlt_pipeline_state`.

Both are Delta tables beside the data, written with delta-rs from the driver whatever the data writer.
The target table's commit is the source of truth; these tables index it. A load whose commit landed but
whose rows here were not written is recorded from the commit's metadata by `record_unrecorded_loads`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from .errors import ConflictError
from .locking import creation_lock

log = logging.getLogger(__name__)

LOADS_TABLE = "_dlt_loads"
STATE_TABLE = "_dlt_pipeline_state"
STATE_ENGINE_VERSION = 1
_WRITE_ATTEMPTS = 5

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
        ("_dlt_load_id", pa.string()),
    ]
)

_clock_lock = threading.Lock()
_last_load_id = 0.0


def table_path(dataset: str, name: str) -> str:
    return dataset.rstrip("/") + "/" + name


def new_load_id(after: str | None = None) -> str:
    """dlt's load id: epoch seconds with microseconds, strictly increasing here and after `after`."""
    global _last_load_id
    with _clock_lock:
        floor = max(_last_load_id, float(after) if after else 0.0) + 1e-6
        _last_load_id = max(time.time(), floor)
        return f"{_last_load_id:.6f}"


def txn_version(load_id: str) -> int:
    """The load id as an integer that grows with it: the Delta txn version of the load's commit."""
    return round(float(load_id) * 1_000_000)


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


def _read(path: str) -> list[dict[str, Any]]:
    try:
        return DeltaTable(path).to_pyarrow_table().to_pylist()
    except TableNotFoundError:
        return []


def read_loads(dataset: str, pipeline_name: str | None = None, table_name: str | None = None) -> list[dict]:
    """Completed loads, oldest first, with `metrics` parsed."""
    rows = [
        {**r, "metrics": json.loads(r["metrics"]) if r["metrics"] else {}}
        for r in _read(table_path(dataset, LOADS_TABLE))
        if (pipeline_name is None or r["schema_name"] == pipeline_name)
        and (table_name is None or r["table_name"] == table_name)
    ]
    return sorted(rows, key=lambda r: float(r["load_id"]))


def read_load(dataset: str, load_id: str) -> dict | None:
    return next((r for r in read_loads(dataset) if r["load_id"] == load_id), None)


def latest_state(dataset: str, pipeline_name: str, table_name: str) -> dict | None:
    """The newest stored state of a table whose load completed (has a `_dlt_loads` row)."""
    completed = {r["load_id"] for r in read_loads(dataset, pipeline_name, table_name)}
    rows = [
        r
        for r in _read(table_path(dataset, STATE_TABLE))
        if r["pipeline_name"] == pipeline_name
        and r["table_name"] == table_name
        and r["_dlt_load_id"] in completed
    ]
    if not rows:
        return None
    return json.loads(max(rows, key=lambda r: float(r["_dlt_load_id"]))["state"])


def record_load(dataset: str, record: LoadRecord) -> None:
    """Write the state row (if the state changed) and then the `_dlt_loads` row that completes the load.

    Idempotent: a load already in `_dlt_loads` is left alone, a state row already written is not repeated.
    """
    if read_load(dataset, record.load_id) is not None:
        return
    now = datetime.now(timezone.utc)
    if record.state is not None and not _has_state_row(dataset, record.load_id):
        _append(
            table_path(dataset, STATE_TABLE),
            STATE_SCHEMA,
            [_state_row(record, now)],
            landed=lambda: _has_state_row(dataset, record.load_id),
        )
    from .faults import reached

    reached("after_state_row")
    _append(
        table_path(dataset, LOADS_TABLE),
        LOADS_SCHEMA,
        [_loads_row(record, now)],
        landed=lambda: read_load(dataset, record.load_id) is not None,
    )


def _has_state_row(dataset: str, load_id: str) -> bool:
    return any(r["_dlt_load_id"] == load_id for r in _read(table_path(dataset, STATE_TABLE)))


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
        "_dlt_load_id": record.load_id,
    }


def _loads_row(record: LoadRecord, now: datetime) -> dict:
    window = record.window or {}
    return {
        "load_id": record.load_id,
        "schema_name": record.pipeline_name,
        "status": 0,
        "inserted_at": now,
        "schema_version_hash": None,
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


def _text(value) -> str | None:
    return None if value is None else str(value)


def _append(path: str, schema: pa.Schema, rows: list[dict], landed: Callable[[], bool]) -> None:
    """Append rows, until `landed` sees them: concurrent loads append too, and two writers creating the
    table at the same moment can both believe they wrote its first version."""
    data = pa.Table.from_pylist(rows, schema=schema)
    for attempt in range(1, _WRITE_ATTEMPTS + 1):
        try:
            if DeltaTable.is_deltatable(path):
                write_deltalake(path, data, mode="append")
            else:
                with creation_lock(path):
                    write_deltalake(path, data, mode="append")
            if landed():
                return
            log.warning("rows appended to %s were lost to a concurrent writer; appending again", path)
        except CommitFailedError:
            log.info("state table %s changed during the append; retrying (%d)", path, attempt)
        time.sleep(0.1 * attempt)
    raise ConflictError(
        f"could not append to {path} in {_WRITE_ATTEMPTS} attempts while other loads wrote to it"
    )
