"""The batch collected to the driver by staging's own pass, for a writer that commits Arrow (delta-rs).

A load's floor is: Spark computes the batch once, hands it to delta-rs as Arrow, one merge. Staging
otherwise materialises the batch in Spark (a local checkpoint) and the writer reads it back: two passes
over the rows. Where the writer takes Arrow and the commit's source is the staged rows themselves, the
staging pass is the collection: the batch, aligned to the table's schema, arrives on the driver as one
Arrow table while Spark observes its counts, null keys, dates and key ranges (spark/profile.py). Every
check runs on those aggregates or on the Arrow data, still before anything is committed.

Used when all of these hold, else staging materialises in Spark as before:
- the writer takes Arrow, and the session observes aggregates in a pass (classic, or Connect on PySpark 4);
- Spark's own estimate of the batch is known and at most COLLECT_ESTIMATE_BYTES: the collection
  receives each partition whole in the driver's JVM, so a large batch (whose partitions may be large)
  takes the materialised path, whose transfer is sized from the batch's measured size;
- the plan's source is the staged rows (append, replace, upsert, insert-only, any load into a new
  table), not rows Spark derives from them and the target (delete-insert, scd2);
- the batch makes no child tables and the table has none.

Being small, the collection runs without whole-stage code generation, and a very small one with its
expressions interpreted (spark/codegen.py): a fresh JVM compiles slowly, and a Spark Connect server
compiles again for each client session. A session that sets either setting keeps its own. A small
batch's row ids keyed by its primary key are hashed on the driver, from the key's JSON text that Spark
spells (spark/driver_row_ids.py).

The batch is held whole: a batch beyond the driver's budget is refused while it arrives
(BatchTooLargeError). A retry that finds the table's schema changed, or a plan that needs Spark after
all, takes the batch back into Spark from the Arrow table, never from the source again.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import NullType

from ..delta import unique_keys
from ..delta.arrow_stream import collected
from ..model.naming import LOAD_ID, ROW_ID
from ..model.request import LoadRequest
from ..plan.merge import HARD_DELETE_FLAG, MergePlan, Operation, SourceShape, plan_load
from ..spark import driver_row_ids
from ..spark.codegen import small_batch_codegen
from ..spark.extract import arrow_to_spark
from ..spark.nested import root_rows
from ..spark.profile import COLLECT_ESTIMATE_BYTES, estimated_bytes, observes_in_pass
from ..spark.schema import align_to_table
from ..spark.stage import StagedBatch, row_id_key
from .nested_tables import plan_without_child_tables

log = logging.getLogger(__name__)


_STAGED_ROWS = (SourceShape.ROWS, SourceShape.ROWS_WITH_FLAG)


def staging_collection(
    spark, writer, request: LoadRequest, batch, table, replace_where, child_tables: tuple[str, ...]
) -> Callable | None:
    """The collection staging runs as its pass: the staged DataFrame as the root table's rows, aligned
    to `table` (a snapshot, or None for a new table; `child_tables` are those it has), as one Arrow
    table on the driver. None where staging materialises in Spark instead (see the module's conditions)."""
    if not getattr(writer, "takes_arrow", False) or not observes_in_pass(batch):
        return None
    if request.disposition.scd2 is not None:
        return None
    plan = plan_load(
        request.disposition,
        request.hints,
        table_exists=table is not None,
        batch_empty=False,
        hard_delete=bool(request.hints.hard_delete),
        replace_where=replace_where,
    )
    nested = plan_without_child_tables(request, batch, child_tables) if _takes_staged_rows(plan) else None
    estimate = _small_estimate(batch, request.table_path) if nested is not None else None
    if estimate is None:
        return None
    schema = table.schema if table is not None else None
    hashed_key = _row_ids_hashed_on_driver(request, batch, estimate)

    def collect(staged_df) -> pa.Table:
        rows = root_rows(staged_df, nested)
        if hashed_key:  # the key's text as the batch types it, before alignment casts it: as Spark hashes it
            rows = driver_row_ids.with_row_id_text(rows, hashed_key)
        aligned = align_to_table(rows, schema, request.table, keep=(HARD_DELETE_FLAG,))
        what = f"staging's collection of the batch for {request.table_path}"
        with small_batch_codegen(spark, what, estimate):
            arrow = collected(spark, request.table_path, aligned)
        return driver_row_ids.filled(arrow) if hashed_key else arrow

    return collect


def collects_as_batch(request: LoadRequest, batch, table, child_tables: tuple[str, ...]) -> bool:
    """Whether staging's collection holds each column of the batch as the batch has it, so that a row
    the driver sets aside from it is the batch's own (spark/expectations.py): every column of the table's
    type already or new to it (none widened or filled by the alignment, none without a type), none kept
    as JSON text, and no `_dlt_load_id` of the batch's own (the load's replaces it)."""
    nested = plan_without_child_tables(request, batch, child_tables)
    if nested is None or nested.json_columns or LOAD_ID in batch.columns:
        return False
    types = {f.name: f.dataType for f in table.schema.fields} if table is not None else {}
    return all(
        not isinstance(f.dataType, NullType) and types.get(f.name, f.dataType) == f.dataType
        for f in batch.schema.fields
    )


def _row_ids_hashed_on_driver(request: LoadRequest, batch, estimate: int) -> tuple[str, ...]:
    """The primary key whose hash makes the batch's row ids, where the driver hashes it
    (spark/driver_row_ids.py); () where Spark does, or the ids are the batch's own or not keyed."""
    key = row_id_key(request.disposition, request.hints)
    if not key or ROW_ID in batch.columns or not driver_row_ids.hashes_on_driver(batch, estimate):
        return ()
    log.info("batch for %s: its row ids are hashed on the driver from its keys' JSON", request.table_path)
    return key


def checked(staged: StagedBatch, request: LoadRequest, table) -> StagedBatch:
    """The collected batch, its upsert keys checked with its hard deletes counted (the writer checks
    only what it commits, and a new table gets no flagged rows), and the schema it was aligned to."""
    hints = request.hints
    if request.disposition.strategy == "upsert" and hints.hard_delete:
        unique_keys.check_arrow_key(staged.arrow, hints.primary_key, "upsert")
    return dataclasses.replace(staged, aligned_to=table.schema if table is not None else None)


def needs_spark(staged: StagedBatch, plan: MergePlan, table_schema) -> bool:
    """Whether a collected batch must go back into Spark for this plan: the table's schema changed since
    it was aligned (another writer committed first), or the plan derives its source in Spark."""
    return staged.arrow is not None and (table_schema != staged.aligned_to or not _takes_staged_rows(plan))


def in_spark(spark, staged: StagedBatch) -> StagedBatch:
    """The collected batch as a DataFrame again (from the Arrow table, not from the source)."""
    rows = staged.arrow.num_rows
    log.info("the table changed since the batch was staged: its %s rows go back into Spark", rows)
    return dataclasses.replace(staged, df=arrow_to_spark(spark, staged.arrow), arrow=None, aligned_to=None)


def source_rows(arrow: pa.Table, plan: MergePlan) -> pa.Table:
    """The rows the writer commits for `plan`: the flag kept where the merge reads it, else flagged rows
    dropped with it."""
    if HARD_DELETE_FLAG not in arrow.column_names:
        return arrow
    if plan.operation is Operation.MERGE and plan.source is SourceShape.ROWS_WITH_FLAG:
        return arrow
    kept = arrow.filter(pc.invert(arrow[HARD_DELETE_FLAG]))
    return kept.drop_columns([HARD_DELETE_FLAG])


def _small_estimate(batch, table: str) -> int | None:
    """Spark's estimate of the batch's bytes where it is known and small enough to collect, else None."""
    estimate = estimated_bytes(batch)
    small = estimate is not None and estimate <= COLLECT_ESTIMATE_BYTES
    shown = "unknown" if estimate is None else f"{estimate / 2**20:,.1f} MiB"
    how = "collected to the driver by staging's pass" if small else "materialised in Spark first"
    log.info("batch for %s: Spark estimates its size as %s: %s", table, shown, how)
    return estimate if small else None


def _takes_staged_rows(plan: MergePlan) -> bool:
    return plan.source in _STAGED_ROWS and not plan.needs_target_read
