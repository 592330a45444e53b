"""The planning step of a load: the staged batch aligned to the table as it is now and the plan of its
one commit (`plan_commit`), the partitions a merge condition may name, the table columns a plan reads,
and what an scd2 commit of change events does to the history.
"""

from __future__ import annotations

import dataclasses

from ..model import null_updates, track_history
from ..model.cdc import Scd2EventCounts
from ..model.request import LoadRequest
from ..plan.merge import Operation, SourceShape, plan_load
from ..plan.scd2 import Scd2Settings
from ..plan.scd2_feed import FeedScope
from ..spark import scd2_history
from ..spark.null_update_fields import struct_shapes
from ..spark.scd2 import stage_scd2
from ..spark.scd2_feed import (
    stage_scd2_events,
    versions_closed_by_deletes,
    versions_split,
    written_versions_closed_by_deletes,
)
from ..spark.schema import align_to_table
from . import staged_arrow


def scd2_event_counts(request: LoadRequest, plan, source, staged_df, rebuilt=None) -> Scd2EventCounts | None:
    """For scd2 of change events, what the commit does to the history (None for other loads): the
    closed versions it splits, the versions it makes end at a delete (of a new table: `staged_df`'s);
    with tracked columns (`rebuilt`), the new events and those absorbed."""
    if request.disposition.scd2 is None or not request.hints.sequence_by:
        return None
    if rebuilt is not None:
        done = scd2_history.counts(rebuilt)
        return Scd2EventCounts(
            done["split"],
            closed_by_deletes=done["by_delete"],
            applied=done["new"],
            absorbed=done["absorbed"] if track_history.active(request.hints) else None,
        )
    if plan.source is SourceShape.SCD2_EVENTS:
        return Scd2EventCounts(versions_split(source), closed_by_deletes=versions_closed_by_deletes(source))
    if not request.hints.apply_as_deletes:
        return Scd2EventCounts()
    settings = Scd2Settings.from_options(request.disposition.scd2)
    scope = FeedScope(request.hints.merge_key, settings.valid_from, settings.valid_to)
    return Scd2EventCounts(closed_by_deletes=written_versions_closed_by_deletes(staged_df, scope))


def target_columns(plan, table) -> list[str]:
    """The table's columns a plan reads: its delete keys, or all of them (a rebuilt history compares
    whole versions)."""
    if plan.source is SourceShape.SCD2_HISTORY:
        return list(table.schema.fieldNames())
    return list(plan.delete_keys)


def plan_commit(spark, staged, request: LoadRequest, table, load_id: str, replace_where=None, truncate=None):
    """The staged batch aligned to the table as it is now, and the plan of its commit."""
    if request.disposition.scd2 is not None and track_history.rebuilds_history(
        request.disposition, request.hints
    ):
        return scd2_history.stage_scd2_history(staged, request, table)
    if request.disposition.scd2 is not None and request.hints.sequence_by:
        return stage_scd2_events(staged, request, table, load_id)
    if request.disposition.scd2 is not None:
        return stage_scd2(staged, request, table, load_id)

    def planned(source_columns=(), shapes=None):
        return plan_load(
            request.disposition,
            request.hints,
            table_exists=table is not None,
            batch_empty=staged.empty,
            hard_delete=staged.hard_delete,
            replace_where=replace_where,
            table_columns=tuple(table.schema.fieldNames()) if table is not None else None,
            source_columns=source_columns,
            truncate=truncate,
            shapes=shapes,
        )

    plan = planned()
    table_schema = table.schema if table is not None else None
    if staged_arrow.needs_spark(staged, plan, table_schema):
        staged = staged_arrow.in_spark(spark, staged)
    if staged.arrow is None:  # else aligned to this schema as it was collected
        aligned = align_to_table(staged.df, table_schema, request.table, keep=plan.helper_columns)
        staged = dataclasses.replace(staged, df=aligned)
    if null_updates.active(request.hints):  # its update assigns the source's columns one by one
        if plan.operation is not Operation.MERGE:  # a batch's deletes count against stored rows only
            staged = _without_columns(staged, null_updates.deleted_at(len(request.hints.sequence_by)))
        schema = staged.arrow.schema if staged.arrow is not None else staged.df.schema
        shapes = (struct_shapes(schema), struct_shapes(table_schema) if table_schema is not None else {})
        plan = planned(tuple(schema.names), shapes)  # a struct column field by field
    return staged, plan


def _without_columns(staged, columns: tuple[str, ...]):
    if staged.arrow is not None:
        present = [c for c in columns if c in staged.arrow.column_names]
        return dataclasses.replace(staged, arrow=staged.arrow.drop_columns(present)) if present else staged
    present = [c for c in columns if c in staged.df.columns]
    return dataclasses.replace(staged, df=staged.df.drop(*present)) if present else staged
