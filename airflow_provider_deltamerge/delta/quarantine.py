"""A table's quarantine table (`_dlt_quarantine_<table>`, model/expectations.py): the rows a load's
`quarantine` expectations set aside, each with its load id, the names of the expectations it failed, when,
and the stream and window of the load that wrote it.

Written with delta-rs from the driver whatever the data writer, like the tombstones, in one commit per load
BEFORE the table's commit: this load's rows inserted, and in the same commit the rows of the loads it
replaces removed (an earlier attempt of it, an interrupted attempt of its run, an earlier load of its
window: load/quarantine.py decides which), so a retry neither doubles nor loses them.
"""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from ..errors import ConflictError
from ..model.expectations import (
    QUARANTINE_LOAD_ID,
    QUARANTINE_STREAM,
    QUARANTINE_TASK,
    QUARANTINE_WINDOW_END,
    QUARANTINE_WINDOW_START,
)
from ..plan.expressions import standard_string
from . import checkpoints
from .locking import creation_lock
from .storage import store_write_errors
from .tombstones import NOT_COMMITTED

_LOADS = (
    QUARANTINE_LOAD_ID,
    QUARANTINE_STREAM,
    QUARANTINE_TASK,
    QUARANTINE_WINDOW_START,
    QUARANTINE_WINDOW_END,
)


def quarantined_loads(path: str, storage_options: dict[str, str] | None = None) -> list[dict] | None:
    """Each load that quarantined rows: its id, stream, task and window, once; None where there is no
    quarantine table yet. Only these columns are read."""
    try:
        table = DeltaTable(path, storage_options=storage_options)
    except TableNotFoundError:
        return None
    rows = table.to_pyarrow_dataset().to_table(columns=list(_LOADS))
    return rows.group_by(list(_LOADS)).aggregate([]).to_pylist()  # each load once


def write_quarantine(
    path: str, rows: pa.Table, replaced: list[str], storage_options: dict[str, str] | None = None
) -> None:
    """One commit: `rows` appended, and the rows of the loads `replaced` (this load's own id among them)
    removed; the table's schema merged with the rows'."""
    try:
        with store_write_errors(path, storage_options, NOT_COMMITTED):
            with creation_lock(path):
                exists = quarantined_loads(path, storage_options) is not None
                if not exists:
                    write_deltalake(path, rows, mode="append", storage_options=storage_options)
                    return
            read_version = DeltaTable(path, storage_options=storage_options).version()
            quoted = ", ".join(standard_string(load_id) for load_id in replaced)
            write_deltalake(
                path,
                rows,
                mode="overwrite",
                predicate=f"{QUARANTINE_LOAD_ID} IN ({quoted})",
                schema_mode="merge",
                storage_options=storage_options,
            )
        checkpoints.after_commits(DeltaTable(path, storage_options=storage_options), read_version)
    except CommitFailedError as exc:
        raise ConflictError(
            f"another load changed the quarantined rows in {path} while this load wrote its own; nothing of "
            f"this load was committed to the table. Retry the load. ({exc})"
        ) from exc
