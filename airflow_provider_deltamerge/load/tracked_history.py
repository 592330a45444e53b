"""The kept events of an scd2 history with tracked columns (model/track_history.py), in a load's commit step.

Each attempt of a load's commit (load/__init__.py plans again when another writer committed first):
1. `with_kept_events`: the companion table `_dlt_events_<table>` read for the batch's merge keys, and the
   events that count (written by a load whose commit of the table landed, as tombstones count:
   delta/tombstones.py's `honoured`) joined to the staged events, marked KEPT;
2. `rebuilt`: the keys' histories rebuilt from all their events against the table's versions
   (spark/scd2_history.py);
3. `commit_kept_events`: the events not kept yet (the batch's new ones, and the table's versions no kept
   event opened, which the rebuild may absorb) written as this load's, in one commit of the companion
   table, BEFORE the table's commit; an earlier attempt's of the same load id replaced;
4. the table's commit, planned `on_snapshot`: any load whose commit of the table landed up to the version
   planned on wrote its events before it, so they were read. A load stopped between 3 and 4 leaves events
   nobody honours; its retry writes them again.
The companion table is written with delta-rs from the driver whatever the data writer, like the
tombstones, and never expires a row: a forgotten event would let a late one split its version wrongly.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..delta.delta_rs import spark_to_arrow
from ..delta.tombstones import TombstoneRead, read_tombstones, write_tombstones
from ..model import track_history
from ..model.cdc import TOMBSTONE_LOAD_ID, TOMBSTONE_WRITTEN_AT, sequence_columns
from ..model.naming import table_path
from ..model.request import LoadRequest
from ..plan.merge import HARD_DELETE_FLAG, Operation
from ..plan.scd2 import Scd2Settings
from ..spark import scd2_history
from ..spark.extract import arrow_to_spark
from ..spark.names import col, cols
from .tombstones import NEVER, completed_loads


@dataclass(frozen=True)
class KeptEvents:
    staged: object  # spark.stage.StagedBatch: the batch's events, and the kept events of their keys
    read: TombstoneRead  # the companion table as read, for the batch's keys


def with_kept_events(spark, writer, request: LoadRequest, staged, load_id: str, stored) -> KeptEvents | None:
    """The staged events and the kept events of their keys that count; None where the load keeps none."""
    if not track_history.rebuilds_history(request.disposition, request.hints) or staged.empty:
        return None
    keys = list(request.hints.merge_key)
    df = staged.df.withColumn(scd2_history.ORIGIN, F.lit(scd2_history.BATCH))
    batch_keys = df.select(*cols(keys)).distinct().collect()
    only = {k: sorted({r[k] for r in batch_keys}, key=repr) for k in keys}
    path = table_path(request.dataset, track_history.events_table(request.table))
    read = read_tombstones(path, request.store_options, only)
    rows = read.honoured_rows(completed_loads(writer, request, stored), load_id, NEVER)
    if rows is not None:
        kept = arrow_to_spark(spark, rows.drop_columns([TOMBSTONE_LOAD_ID, TOMBSTONE_WRITTEN_AT]))
        kept = kept.join(df.select(*cols(keys)).distinct(), on=keys, how="left_semi")
        df, kept = _typed_alike(df, kept)
        kept = kept.withColumn(scd2_history.ORIGIN, F.lit(scd2_history.KEPT))
        if HARD_DELETE_FLAG in df.columns:
            kept = kept.withColumn(HARD_DELETE_FLAG, F.lit(False))
        df = df.unionByName(kept, allowMissingColumns=True)
    return KeptEvents(dataclasses.replace(staged, df=df), read)


def _typed_alike(df, kept):
    """The batch's events and the kept ones with one type per column: the batch's, but where a column
    is null in every event of the batch (a delete's empty payload, a partial update), which gives it no
    type: the kept events' type then, so that whether a load succeeds does not depend on batching."""
    kinds = {f.name: f.dataType for f in kept.schema.fields}
    for field in df.schema.fields:
        column = col(field.name)
        if field.name not in kinds:
            continue
        if isinstance(field.dataType, T.NullType):
            df = df.withColumn(field.name, column.cast(kinds[field.name]))
        else:
            kept = kept.withColumn(field.name, column.cast(field.dataType))
    return df, kept


def rebuilt(staged_df, target, plan, request: LoadRequest, load_id: str) -> scd2_history.Rebuilt:
    """The histories of the batch's keys rebuilt against the table's versions (`target`, None for a
    WRITE)."""
    settings = Scd2Settings.from_options(request.disposition.scd2)
    versions = target if plan.operation is Operation.MERGE else None
    return scd2_history.rebuild(staged_df, versions, plan.retire, settings, load_id, request.table)


def commit_kept_events(kept: KeptEvents, events, request: LoadRequest, load_id: str) -> int:
    """Write the events not kept yet as this load's (replacing an earlier attempt's), in one commit of
    the companion table; how many."""
    rows = spark_to_arrow(events)
    earlier = kept.read.rows is not None and load_id in set(kept.read.rows[TOMBSTONE_LOAD_ID].to_pylist())
    if rows.num_rows or earlier:
        keys = [*request.hints.merge_key, *sequence_columns(len(request.hints.sequence_by))]
        write_tombstones(kept.read, rows, load_id, NEVER, request.store_options, keys=keys)
    return rows.num_rows
