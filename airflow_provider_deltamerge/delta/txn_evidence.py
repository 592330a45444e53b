"""Whether an earlier attempt of an Airflow task run committed into a table, from evidence that outlives
the table's log: the Delta txn identifier every load's commit carries (application id: the task run,
version: the load id). Delta keeps txn identifiers in every checkpoint for
`delta.setTransactionRetentionDuration` (loads set it to a week or more, or leave it unset: forever),
while log cleanup after a checkpoint deletes the commits older than `delta.logRetentionDuration`.

A retry whose earlier attempt committed and stopped before its record finds that commit among the
table's newest (delta/recovery.py). Where it does not, the txn identifier still tells that the attempt
committed: its commit is then looked for in the whole log, and where log cleanup deleted it the retry
is refused; loading again would load its rows twice.
"""

from __future__ import annotations

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from ..errors import StoreError
from ..model.run import app_id, txn_version
from .writer import LoggedCommit

LOADS_TABLE = "_dlt_loads"


def committed_txn_version(
    table_path: str, application: str, storage_options: dict | None = None
) -> int | None:
    """The txn version (`model.run.txn_version` of a load id) of the newest commit of the txn application
    `application` that the table's current snapshot (checkpoint and log) records; None when it records
    none, or there is no table."""
    try:
        table = DeltaTable(table_path, storage_options=storage_options)
    except TableNotFoundError:
        return None
    return table.transaction_version(application)


def _is_load(load_id: str | None, version: int) -> bool:
    try:
        return load_id is not None and txn_version(load_id) == version
    except ValueError:  # a load id that is no number names no txn version
        return False


def unrecorded_attempt(snapshot, request, commits: list[LoggedCommit], history) -> list[LoggedCommit]:
    """The commit of an earlier attempt of this Airflow task run that neither `snapshot` (the store)
    records nor `commits` (the table's newest) hold, read from `history` (a function giving the table's
    whole history); [] when there is none. StoreError when the table's txn identifiers show one but
    its commit is gone from the log."""
    if request.run.dag_id is None:  # outside Airflow a load id is its own stream (model/run.py)
        return []
    stream = app_id(request.pipeline, request.table, request.run)
    version = committed_txn_version(request.table_path, stream, request.store_options)
    if version is None or any(_is_load(r["load_id"], version) for r in snapshot.loads):
        return []
    if any(_is_load(c.load_id, version) for c in commits):
        return []
    found = [c for c in history() if _is_load(c.load_id, version)]
    if found:
        return found[:1]
    load_id = f"{version // 1_000_000}.{version % 1_000_000:06d}"
    raise StoreError(
        request.table_path,
        f"holds the commit of load {load_id}, made by an earlier attempt of run {request.run.run_id!r} "
        f"of task {request.run.dag_id}.{request.run.task_id} (its Delta transaction identifier says so), "
        f"but {LOADS_TABLE} has no record of it and the table's log no longer holds that commit: log "
        "cleanup deleted it (delta.logRetentionDuration). Loading again would load its rows twice, so "
        f"nothing was loaded. Its rows are in the table (_dlt_load_id = {load_id}): mark this task "
        "instance successful, or delete those rows and clear the task to load them again; keep "
        "delta.logRetentionDuration at 7 days or more.",
    )
