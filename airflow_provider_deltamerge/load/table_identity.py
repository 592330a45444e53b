"""Which Delta table a load wrote: its Delta id (`metaData.id`, new for every table Delta creates)
recorded with each load (`table_id` in its metrics), so that a table dropped and recreated under the
same name (in a catalog, or at the same path) is noticed before its old cursor state is reused.
"""

from __future__ import annotations

import logging

from ..delta import store
from ..errors import StoreError
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
    """StoreError where an incremental load would take the cursor state its earlier loads stored for
    another table of this name (the one recorded was dropped, deleted or recreated); a warning where no
    stored state is taken (the load writes the table as it is now)."""
    recorded = recorded_table_id(stored, request)
    current = getattr(table, "table_id", None)
    if recorded is None or recorded == current:
        return
    now = f"Delta id {current}" if current else "no table at all now"
    what = (
        f"table {request.table_name!r} at {request.table_path} ({now}) is not the table its recorded "
        f"loads wrote (Delta id {recorded}): it was dropped, deleted or recreated since"
    )
    uses_state = request.cursor is not None and request.disposition.disposition != "replace"
    if not uses_state:
        log.warning("%s; this load writes the table as it is now", what)
        return
    raise StoreError(
        store.state_path(request.dataset),
        f"{what}, so the cursor state stored for the old table is not taken for it and nothing was loaded. "
        f"To load the new table from initial_value, delete the table's rows from {store.STATE_TABLE} and "
        f"{store.LOADS_TABLE} (DELETE FROM ... WHERE table_name = '{request.table}'), or load it under "
        "another pipeline_name.",
    )
