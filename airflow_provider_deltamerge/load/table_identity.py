"""Whether the table a load is about to write is the one its recorded loads wrote, or another one under
its name: dropped and recreated (in a catalog, or at the same path), or deleted.

Told by the table's own log, not by its Delta id (`metaData.id`, still recorded as `table_id` in each
load's metrics): delta-rs 1.6 writes a new id when a MERGE evolves the schema, so a changed id proves
nothing. A Delta table's versions only grow and each commit of a load carries its load id, so the table
is the same where the commit at the version the newest recorded load wrote (`table_version`) carries
that load's id. A table whose newest version is older than that, or whose commit there is another's, is
another table. Where the log no longer holds that commit (cleaned up after the log retention period),
nothing can be told, and the table is taken as the same.

A load that would go on from the cursor state stored for the old table is refused before anything is
written (`TableRecreatedError`, saying how to start again); any other load is loaded, and the task log
says so.
"""

from __future__ import annotations

import logging

from ..delta import store
from ..errors import TableRecreatedError
from ..model.request import LoadRequest

log = logging.getLogger(__name__)

TABLE_ID = "table_id"
HISTORY_LIMIT = 500  # commits since the recorded one read to find it; beyond, the table is taken as same


def newest_recorded_load(stored: store.StoreSnapshot, request: LoadRequest) -> dict | None:
    """The `_dlt_loads` row of this pipeline's load of the table at the newest table version."""
    rows = [r for r in stored.loads_of(request.pipeline, request.table) if r.get("table_version") is not None]
    return max(rows, key=lambda r: r["table_version"], default=None)


def another_table(row: dict, table, history) -> str | None:
    """Why the table (a writer's snapshot, or None) is not the one that `row`'s load committed to; None
    where it is, or where its log cannot tell. `history(limit)`: the table's newest commits."""
    version, load_id = row["table_version"], row["load_id"]
    if table is None:
        return "there is no table there now"
    if table.version < version:
        return f"its newest version is {table.version}, older than version {version} of load {load_id}"
    behind = table.version - version + 1
    if behind > HISTORY_LIMIT:
        return None
    commit = next((c for c in history(behind) if c.version == version), None)
    if commit is None or commit.load_id == load_id:  # cleaned from the log, or the load's own commit
        return None
    return f"its version {version} is not the commit of load {load_id} that wrote it, but {_who(commit)}"


def _who(commit) -> str:
    return f"a commit of load {commit.load_id}" if commit.load_id else f"a {commit.operation} no load made"


def check_same_table(stored: store.StoreSnapshot, request: LoadRequest, table, writer, commits) -> None:
    """Refuse a load that would take the cursor state of a table that is not there any more; say it in
    the task log for any other load into a table that is not the one its loads were recorded for.
    `commits`: the pipeline's commits the load has read already (`recovery.recent_commits`), which
    hold the recorded load's commit unless the table is another, so that the table's history is read
    again only then."""
    row = newest_recorded_load(stored, request)
    if row is None:
        return
    read = [c for c in commits if c.version == row["table_version"]]
    why = another_table(row, table, lambda limit: read or writer.history(request.table_path, limit))
    if why is None:
        return
    if _uses_stored_cursor(stored, request):
        raise TableRecreatedError(request.table_path, request.table, request.pipeline, why)
    log.warning(
        "table %r at %s is not the table its recorded loads wrote (%s): it was dropped, deleted or "
        "recreated; this load does not use their cursor state and loads it as it is now",
        request.table_name,
        request.table_path,
        why,
    )


def _uses_stored_cursor(stored: store.StoreSnapshot, request: LoadRequest) -> bool:
    """Whether the load starts from the cursor state its recorded loads stored (an incremental load that
    does not replace the table)."""
    if request.cursor is None or request.disposition.disposition == "replace":
        return False
    return stored.latest_state(request.pipeline, request.table) is not None
