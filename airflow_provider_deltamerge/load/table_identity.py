"""Which Delta table a load wrote: its Delta id (`metaData.id`, new for every table Delta creates)
recorded with each load (`table_id` in its metrics), so that a table dropped and recreated under the
same name (in a catalog, or at the same path) is noticed, and said, before its old cursor state is reused.
"""

from __future__ import annotations

import logging

from ..delta import store
from ..model.request import LoadRequest

log = logging.getLogger(__name__)

TABLE_ID = "table_id"


def recorded_table_id(stored: store.StoreSnapshot, request: LoadRequest) -> str | None:
    """The Delta id of the table the newest recorded load of this table wrote (None: none recorded it)."""
    for row in reversed(stored.loads_of(request.pipeline, request.table)):
        table_id = (row.get("metrics") or {}).get(TABLE_ID)
        if table_id:
            return table_id
    return None


def check_same_table(stored: store.StoreSnapshot, request: LoadRequest, table) -> None:
    """A warning where the table is not the one its recorded loads wrote (another Delta id, or no table):
    it may have been dropped, deleted or recreated, and an incremental load goes on from the cursor
    state stored for the old one. Only a warning: delta-rs (1.6) writes a new Delta id when a MERGE
    evolves the schema, so a changed id alone does not prove the table was recreated."""
    recorded = recorded_table_id(stored, request)
    current = getattr(table, "table_id", None)
    if recorded is None or recorded == current:
        return
    now = f"Delta id {current}" if current else "no table at all now"
    log.warning(
        "table %r at %s (%s) is not the table its recorded loads wrote (Delta id %s): if it was dropped, "
        "deleted or recreated, this load goes on from the cursor state stored for the old table; to load "
        "the new table from initial_value, delete the table's rows from %s and %s (DELETE FROM ... WHERE "
        "table_name = '%s'), or load it under another pipeline_name",
        request.table_name,
        request.table_path,
        now,
        recorded,
        store.STATE_TABLE,
        store.LOADS_TABLE,
        request.table,
    )
