"""A delta-rs table's commit history, read steadily while other writers commit, and a load's own commit
found in it: the commit a load just made (`landed_commit`), or one an earlier attempt of the load made
(`already_applied`)."""

from __future__ import annotations

import random
import time

from deltalake import DeltaTable

from ..errors import ConflictError
from .writer import CommitRequest, commit_metadata

APPLIED_SEARCH_DEPTH = 50  # commits searched for a load id whose txn version the table has recorded
_HISTORY_READ_ATTEMPTS = 10
_HISTORY_READ_PAUSE_SECONDS = 0.05  # the longest pause after the first unsteady read; it grows with each


def history(table: DeltaTable, limit: int | None = None, after: int = -1) -> list[dict]:
    """The table's commits newer than version `after`, newest first, at most `limit` of them.

    delta-rs reads the commits from the log as it is now but numbers them from the version the table
    object holds, so the table is brought up to date before the read and checked after it: a commit
    landing in between would shift every number. Concurrent loads commit in bursts, so an unsteady read is
    tried again after a short random pause, which outlasts a burst.
    """
    for attempt in range(1, _HISTORY_READ_ATTEMPTS + 1):
        table.update_incremental()
        latest = table.version()
        count = latest - after if limit is None else min(limit, latest - after)
        entries = table.history(count) if count > 0 else []
        table.update_incremental()
        if table.version() == latest:
            return entries
        time.sleep(random.uniform(0, _HISTORY_READ_PAUSE_SECONDS * attempt))
    raise ConflictError(
        f"table {table.table_uri} changed during each of {_HISTORY_READ_ATTEMPTS} reads of its history "
        "while other writers committed to it; retry the load."
    )


def find_commit(table: DeltaTable, load_id: str, limit: int | None = None, after: int = -1) -> dict | None:
    return next(
        (e for e in history(table, limit, after) if commit_metadata(e).get("load_id") == load_id), None
    )


def landed_commit(table: DeltaTable, read_version: int, load_id: str) -> dict:
    """The history entry of this load's commit, among the commits after the version the load read.

    Two writers creating a table at the same moment can both believe they wrote its first version while
    only one did, so a commit counts only once it is seen. `table` is brought up to date.
    """
    entry = find_commit(table, load_id, after=read_version)
    if entry is not None:
        return entry
    raise ConflictError(
        f"the commit of load {load_id} is not in the history of {table.table_uri}: a concurrent writer "
        "replaced it. Nothing of this load is visible; retry the load."
    )


def already_applied(table: DeltaTable, request: CommitRequest, storage_options: dict | None) -> bool:
    """Whether this load id already committed. delta-rs records txn versions but does not enforce them,
    and loads of one table may commit out of load-id order, so look for the load's own commit."""
    applied = table.transaction_version(request.app_id)
    if applied is None or applied < request.txn_version:
        return False
    # the snapshot's own table stays pinned for the commit
    latest = DeltaTable(table.table_uri, storage_options=storage_options)
    return find_commit(latest, request.load_id, limit=APPLIED_SEARCH_DEPTH) is not None
