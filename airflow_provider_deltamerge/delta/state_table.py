"""One state table (`_dlt_loads` or `_dlt_pipeline_state`, delta/store.py): its rows read whole, a
load's row written into it exactly once however many loads write it at the same moment, and the table
compacted into one file by the writer of a row once it holds more than COMPACT_AT_FILES files.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from ..errors import ConflictError
from ..plan.expressions import standard_string
from . import checkpoints
from .locking import creation_lock
from .read_check import PINNED
from .storage import store_write_errors

log = logging.getLogger(__name__)

_WRITE_ATTEMPTS = 10
# Every row written is a file of its own, and every load reads both tables whole: past this many files
# the writer of a row compacts the table (2,000 one-row files took 2.3 s to read, compacted 0.07 s; at
# 100 a load's read of the two grew from 0.04 s to 0.26 s before each compaction, so loads slowed by a
# third between compactions, while a compaction costs about as much as one such read).
COMPACT_AT_FILES = 20
_WRITTEN_SEARCH_DEPTH = 50  # commits of a state table searched for a row's commit right after making it
_RECORD_KEY = "deltamerge.record"  # commit metadata of a state-table write: the load id it records


def all_rows(table: DeltaTable) -> pa.Table:
    """The table version's rows, on one thread: deltalake 1.6's threaded to_pyarrow_table() can abort
    the process at exit. The only place the state tables' rows are read."""
    return table.to_pyarrow_dataset().to_table(use_threads=False)


ROW_NOT_WRITTEN = "The row was not written."


def write_row(
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
                    compact_if_fragmented(written)
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


def compact_if_fragmented(table: DeltaTable) -> None:
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
    rows = all_rows(table)
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
    return f'"{column}" = {standard_string(text)}'


def _holds_row(table: DeltaTable, key: str, load_id: str) -> bool:
    """Whether the table version holds a row of the load: one column, files pruned by their statistics."""
    return table.to_pyarrow_table(columns=[key], filters=[(key, "=", load_id)]).num_rows > 0
