"""Change events against the table's tombstones (`apply_as_deletes`, docs/CDC.md), in a load's commit step.

Each attempt of a load's commit (load/__init__.py plans again when another writer committed first):
1. `against_tombstones`: the tombstones read, those that count kept (written by a load whose commit of
   the table landed, within the retention), and the staged events not newer than their key's tombstone
   dropped, so they neither insert nor update a row;
2. `commit_tombstones`: the delete events left written as this load's tombstones, expired ones removed,
   in one commit of the companion table, BEFORE the table's commit (delta/tombstones.py);
3. the table's commit, planned `on_snapshot` (plan/merge.py): it lands at the version after the one the
   plan was made on, or the attempt is planned again. A load whose commit landed up to that version
   committed its tombstones before it, so this attempt read them: no event of a key another load
   deleted later is inserted, whichever load committed first.

scd2 of change events remembers every delete at its place (its merge key and sequence), and never
expires one (its history is kept forever, and a forgotten delete would let a late event run past it):
step 1 adds the remembered deletes of the batch's keys to the staged events, flagged, so they end the
versions they fall into like the batch's own (spark/scd2_feed.py); step 2 writes the batch's deletes
not remembered yet.

A truncate (`apply_as_truncates`) is a tombstone of the whole table, its key columns null
(load/truncates.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.compute as pc

from ..delta.delta_rs import spark_to_arrow
from ..delta.store import HISTORY_DEPTH, StoreSnapshot
from ..delta.tombstones import TombstoneRead, read_tombstones, write_tombstones
from ..model import null_updates
from ..model.cdc import TOMBSTONE_LOAD_ID, event_key, sequence_columns, tombstones_table
from ..model.naming import table_path
from ..model.request import LoadRequest
from ..plan.merge import HARD_DELETE_FLAG
from ..spark import cdc
from ..spark.names import col, cols
from . import null_update_tombstones, truncates

NEVER = datetime(1970, 1, 1, tzinfo=timezone.utc)  # scd2's cutoff: no delete is ever expired


@dataclass(frozen=True)
class EventsAgainstTombstones:
    staged: object  # spark.stage.StagedBatch: the events newer than their key's tombstone
    read: TombstoneRead
    cutoff: datetime  # tombstones written before it are expired
    remembered: frozenset = frozenset()  # scd2: (key..., sequence) of the deletes remembered already
    truncate: tuple | None = None  # the sequence of the batch's truncate, newer than the remembered ones


def against_tombstones(
    spark, writer, request: LoadRequest, staged, load_id: str, stored: StoreSnapshot
) -> EventsAgainstTombstones | None:
    """The staged change events less those older than their key's tombstone; None where the load has
    no tombstones to read or write."""
    hints = request.hints
    if not hints.sequence_by or staged.empty:
        return None
    read = read_tombstones(
        table_path(request.dataset, tombstones_table(request.table)), request.store_options
    )
    if read.rows is None and not (hints.apply_as_deletes or hints.apply_as_truncates):
        return None
    scd2 = request.disposition.strategy == "scd2"
    cutoff = NEVER if scd2 else datetime.now(timezone.utc) - timedelta(seconds=request.tombstone_retention)
    completed = completed_loads(writer, request, stored)
    key, sequence = event_key(request.disposition, hints), sequence_columns(len(hints.sequence_by))
    tombstones = read.honoured(completed, load_id, cutoff, [*key, *sequence])
    if scd2:
        remembered = frozenset(tuple(t[c] for c in (*key, *sequence)) for t in tombstones)
        if tombstones:
            staged = _with_remembered_deletes(spark, staged, tombstones, key, sequence)
        return EventsAgainstTombstones(staged, read, cutoff, remembered=remembered)
    tombstones, remembered = truncates.split(tombstones, key, sequence)  # a truncate: a null key
    if hints.apply_as_truncates:
        staged = truncates.with_typed_key(staged, read, key)
    if tombstones:
        staged = _without_tombstoned(spark, staged, tombstones, key, sequence)
    staged, truncate = truncates.against_truncates(staged, remembered, key, sequence)
    newest_truncate = truncate if truncate is not None else remembered
    if null_updates.active(hints) and (tombstones or newest_truncate is not None):
        # partial updates: the values older than a tombstone of their key, or a truncate, go too
        staged = null_update_tombstones.older_values_dropped(
            spark, staged, tombstones, key, sequence, newest_truncate
        )
    return EventsAgainstTombstones(staged, read, cutoff, truncate=truncate)


def completed_loads(writer, request: LoadRequest, stored: StoreSnapshot) -> set[str]:
    """The loads of the table whose commit of it landed: recorded, or carried by one of its commits."""
    completed = {r["load_id"] for r in stored.loads_of(None, request.table)}
    return completed | {c.load_id for c in writer.history(request.table_path, HISTORY_DEPTH) if c.load_id}


def commit_tombstones(events: EventsAgainstTombstones, request: LoadRequest, load_id: str) -> dict[str, int]:
    """Write the delete events left as this load's tombstones (and remove the expired) in one commit of
    the companion table; its metrics."""
    hints = request.hints
    columns = [*event_key(request.disposition, hints), *sequence_columns(len(hints.sequence_by))]
    marked = hints.apply_as_deletes or hints.apply_as_truncates  # a truncate is flagged as a delete
    deletes = None
    if marked and null_updates.active(hints) and request.disposition.scd2 is None:
        # an upsert's partial updates: each key's newest delete, also not its newest
        deletes = _newest_deletes_and_truncate(events.staged, hints, columns)
    elif marked:
        deletes = _delete_events(events.staged, columns)
    if deletes is not None and events.remembered:  # scd2: each delete remembered once
        rows = deletes.to_pylist()
        new = [tuple(r[c] for c in columns) not in events.remembered for r in rows]
        deletes = deletes.filter(pa.array(new, pa.bool_()))
    written = deletes.num_rows if deletes is not None else 0
    expired = events.read.expired(events.cutoff)
    earlier = events.read.rows is not None and load_id in set(events.read.rows[TOMBSTONE_LOAD_ID].to_pylist())
    if written or expired or earlier:
        if deletes is None:
            deletes = events.read.rows.select(columns).slice(0, 0)
        write_tombstones(events.read, deletes, load_id, events.cutoff, request.store_options)
    return {"numTombstonesWritten": written, "numTombstonesExpired": expired}


def _delete_events(staged, columns: list[str]) -> pa.Table:
    """The key and sequence of the staged delete events (flagged by apply_as_deletes)."""
    if staged.arrow is not None:
        flagged = staged.arrow.filter(pc.fill_null(staged.arrow[HARD_DELETE_FLAG], False))
        return flagged.select(columns)
    return spark_to_arrow(staged.df.where(HARD_DELETE_FLAG).select(*cols(columns)))


def _newest_deletes_and_truncate(staged, hints, columns: list[str]) -> pa.Table:
    """Partial updates: each key's newest delete in the batch (load/null_update_tombstones.py), and the
    batch's truncate where it applies (staging flags it after the keys' deletes are taken)."""
    parts = []
    if hints.apply_as_deletes:
        sequence = columns[len(hints.primary_key) :]
        parts.append(null_update_tombstones.newest_deletes(staged, hints.primary_key, sequence))
    if hints.apply_as_truncates:
        flagged = _delete_events(staged, columns)
        parts.append(flagged.filter(pc.is_null(flagged[columns[0]])))
    return pa.concat_tables(parts, promote_options="permissive")


def _with_remembered_deletes(spark, staged, tombstones: list[dict], key, sequence):
    """scd2: the staged events and, flagged as deletes, the remembered deletes of their keys (their
    other columns null: a delete opens no version). Staging keeps scd2 events in Spark."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    schema = StructType([staged.df.schema[c] for c in (*key, *sequence)])
    frame = spark.createDataFrame([tuple(t[c] for c in (*key, *sequence)) for t in tombstones], schema)
    keys = staged.df.select(*(col(k) for k in key)).distinct()
    frame = frame.join(keys, on=list(key), how="left_semi").withColumn(HARD_DELETE_FLAG, F.lit(True))
    df = staged.df
    if HARD_DELETE_FLAG not in df.columns:
        df = df.withColumn(HARD_DELETE_FLAG, F.lit(False))
    return dataclasses.replace(staged, df=df.unionByName(frame, allowMissingColumns=True))


def _without_tombstoned(spark, staged, tombstones: list[dict], key, sequence):
    """The staged batch less the events not newer than a tombstone of their key: in the Arrow table on
    the driver where staging collected it, else in Spark."""
    if staged.arrow is not None:
        newest: dict[tuple, list[tuple]] = {}
        for tomb in tombstones:
            newest.setdefault(tuple(tomb[k] for k in key), []).append(tuple(tomb[c] for c in sequence))
        events = staged.arrow.select([*key, *sequence]).to_pylist()
        keep = [not _covered(e, newest, key, sequence) for e in events]
        return dataclasses.replace(staged, arrow=staged.arrow.filter(pa.array(keep, pa.bool_())))
    from pyspark.sql.types import StructField, StructType

    fields = [staged.df.schema[c] for c in (*key, *sequence)]
    renamed = [StructField(cdc.TOMBSTONE_PREFIX + f.name, f.dataType, True) for f in fields]
    rows = [tuple(t[c] for c in (*key, *sequence)) for t in tombstones]
    frame = spark.createDataFrame(rows, StructType(renamed))
    return dataclasses.replace(staged, df=cdc.without_tombstoned(staged.df, frame, key, sequence))


def _covered(event: dict, tombstones: dict, key, sequence) -> bool:
    """Whether a tombstone of the event's key is as new as the event, or newer."""
    at = tuple(event[c] for c in sequence)
    for tomb in tombstones.get(tuple(event[k] for k in key), ()):
        if None not in tomb and at <= tomb:
            return True
    return False
