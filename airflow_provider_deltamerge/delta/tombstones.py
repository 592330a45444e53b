"""A table's tombstones: the keys its delete events removed, with their sequence (docs/CDC.md).

They live in a companion Delta table beside the table (`_dlt_tombstones_<table>`, model/cdc.py), never in
the table itself, so its readers never see them; it is written with delta-rs from the driver whatever the
data writer, like the state tables. A row holds the key columns, the sequence system columns, the load
that wrote it and when. A load commits its tombstones BEFORE its commit of the table, which is the load's
commit point: a tombstone counts only once its load's commit of the table landed (`honoured`), so a load
stopped between the two commits leaves tombstones nobody honours, and its retry writes them again. The
load's tombstone commit also removes the tombstones older than the retention, and those an earlier
attempt of the same load wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from ..errors import ConflictError
from ..model.cdc import TOMBSTONE_LOAD_ID, TOMBSTONE_WRITTEN_AT
from ..plan.expressions import SOURCE, TARGET, Cmp, Col, Lit, Or, all_of, eq, render
from . import checkpoints
from .datafusion import DataFusionDialect, spelled_copies
from .locking import creation_lock
from .storage import store_write_errors


@dataclass(frozen=True)
class TombstoneRead:
    """The tombstone table as one load read it: all its rows (None: there is no such table yet)."""

    path: str
    rows: pa.Table | None
    version: int | None

    def honoured(self, completed: set[str], load_id: str, cutoff: datetime, columns: list[str]) -> list[dict]:
        """The `columns` (key and sequence) of the tombstones that count for `load_id`: written by a load
        whose commit of the table landed (`completed`), not by this load (its own are the deletes it is
        applying), and within the retention (written at or after `cutoff`)."""
        kept = self.honoured_rows(completed, load_id, cutoff)
        if kept is None:
            return []
        present = [c for c in columns if c in kept.column_names]
        return [{c: row.get(c) for c in columns} for row in kept.select(present).to_pylist()]

    def honoured_rows(self, completed: set[str], load_id: str, cutoff: datetime) -> pa.Table | None:
        """The rows that count for `load_id` (see `honoured`), all their columns; None where none do."""
        if self.rows is None or self.rows.num_rows == 0:
            return None
        others = sorted(completed - {load_id})
        counts = pc.and_(
            pc.is_in(
                pc.cast(self.rows[TOMBSTONE_LOAD_ID], pa.string()), value_set=pa.array(others, pa.string())
            ),
            pc.greater_equal(self.rows[TOMBSTONE_WRITTEN_AT], pa.scalar(cutoff, pa.timestamp("us", "UTC"))),
        )
        kept = self.rows.filter(pc.fill_null(counts, False))
        return kept if kept.num_rows else None

    def expired(self, cutoff: datetime) -> int:
        """How many tombstones are older than the retention: the next tombstone commit removes them."""
        if self.rows is None or self.rows.num_rows == 0:
            return 0
        cut = pa.scalar(cutoff, pa.timestamp("us", "UTC"))
        return int(pc.sum(pc.fill_null(pc.less(self.rows[TOMBSTONE_WRITTEN_AT], cut), False)).as_py() or 0)


def read_tombstones(
    path: str, storage_options: dict[str, str] | None = None, only: dict[str, list] | None = None
) -> TombstoneRead:
    """The companion table's rows; `only` ({column: values}): those rows whose columns hold one of the
    values (each column's, a superset for several), read by filtering its files."""
    try:
        table = DeltaTable(path, storage_options=storage_options)
    except TableNotFoundError:
        return TombstoneRead(path, None, None)
    if not only:
        return TombstoneRead(path, table.to_pyarrow_table(), table.version())
    wanted = None
    for column, values in only.items():
        kind = pa.schema(table.schema().to_arrow()).field(column).type
        test = pc.field(column).isin(pa.array(values).cast(kind))
        wanted = test if wanted is None else wanted & test
    return TombstoneRead(path, table.to_pyarrow_dataset().to_table(filter=wanted), table.version())


def write_tombstones(
    read: TombstoneRead,
    deletes: pa.Table,
    load_id: str,
    cutoff: datetime,
    storage_options: dict[str, str] | None = None,
    keys: list[str] | None = None,
) -> None:
    """One commit: `deletes` (key and sequence columns) written as this load's tombstones, replacing any
    an earlier attempt of it wrote, and the tombstones older than the retention removed. `keys`: the
    columns that identify a row, where not all of `deletes`' (kept events: key and sequence)."""
    now = datetime.now(timezone.utc)
    rows = deletes.append_column(TOMBSTONE_LOAD_ID, pa.array([load_id] * deletes.num_rows, pa.string()))
    rows = rows.append_column(
        TOMBSTONE_WRITTEN_AT, pa.array([now] * deletes.num_rows, pa.timestamp("us", "UTC"))
    )
    try:
        with store_write_errors(read.path, storage_options, NOT_COMMITTED):
            if read.rows is None:
                with creation_lock(read.path):
                    if _absent(read.path, storage_options):
                        write_deltalake(read.path, rows, mode="append", storage_options=storage_options)
                        return
            table = DeltaTable(read.path, storage_options=storage_options)
            read_version = table.version()
            _merge(table, rows, keys or deletes.column_names, load_id, cutoff)
        checkpoints.after_commits(table, read_version)
    except CommitFailedError as exc:
        raise ConflictError(
            f"another load changed the tombstones in {read.path} while this load wrote its own; nothing of "
            f"this load was committed to the table. Retry the load. ({exc})"
        ) from exc


NOT_COMMITTED = "Nothing of this load was committed to its table. Retry the load."


def _absent(path: str, storage_options) -> bool:
    try:
        DeltaTable(path, storage_options=storage_options)
    except TableNotFoundError:
        return True
    return False


def _merge(table: DeltaTable, rows: pa.Table, keys: list[str], load_id: str, cutoff: datetime) -> None:
    """Insert the rows (a row of this load's key already there is updated); delete, of the others, this
    load's (an earlier attempt's, no longer deleted) and the expired."""
    dialect = DataFusionDialect()
    existing = pa.schema(table.schema().to_arrow())
    names = set(existing.names)
    fields = [existing.field(c) if c in names else rows.schema.field(c) for c in rows.column_names]
    try:
        rows = rows.cast(pa.schema(fields))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass  # a changed key type: written as it is, the table's schema merged
    same = all_of(*(eq(Col(c, TARGET), Col(c, SOURCE)) for c in (*keys, TOMBSTONE_LOAD_ID)))
    removed = Or(
        (
            Cmp("<", Col(TOMBSTONE_WRITTEN_AT, TARGET), Lit(cutoff)),
            eq(Col(TOMBSTONE_LOAD_ID, TARGET), Lit(load_id)),
        )
    )
    merger = table.merge(
        rows, render(same, dialect), source_alias=SOURCE, target_alias=TARGET, merge_schema=True
    )
    copied = spelled_copies(rows.column_names, (), dialect)  # key columns named with a backtick
    if copied is not None:
        merger = merger.when_matched_update(copied).when_not_matched_insert(copied)
    else:
        merger = merger.when_matched_update_all().when_not_matched_insert_all()
    merger.when_not_matched_by_source_delete(render(removed, dialect)).execute()
