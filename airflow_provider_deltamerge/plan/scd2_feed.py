"""scd2 of change events (`sequence_by`): every event a version of its merge key, in one MERGE (pure).

Each event opens a version valid from its sequence until the sequence of the next event of its key
(null for the newest): the history is what applying the events one by one in sequence order builds,
whatever their batching and arrival order. So a load:
- inserts a version per new event, valid until the next event of its key in the batch or the table;
- closes earlier (sets `valid_to` on) each table version a new event falls into: the current version
  of a key, or, for a late event, the closed version it splits;
- skips an event whose key and sequence the table holds a version at already (delivered again).
A delete event (a flagged row, see spark/scd2_feed.py) closes the version it falls into at its
sequence and opens none; a table version closed before the next version opens ends at a delete. The
deletes of earlier loads (remembered at their place, load/tombstones.py) join a load's own as such
points, so the commit lands on the version they were read at or is planned again.

Target versions are found by (merge key, valid_from), which is unique in such a table. Options and
their checks are in model/cdc.py; Spark builds the source in spark/scd2_feed.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.naming import HELPER_PREFIX
from .expressions import SOURCE, TARGET, Col, Expr, Field, Lit, all_of, eq
from .merge import ACTION, Clause, MergePlan, Operation, SourceShape
from .scd2 import RETIRE_AT, Scd2Settings, retire_assignments

SPLIT = HELPER_PREFIX + "split"  # helper column of 'retire' rows: the version was closed, and closes earlier
BY_DELETE = HELPER_PREFIX + "by_delete"  # helper column: the version (new or retired) ends at a delete


@dataclass(frozen=True)
class FeedScope:
    """Which columns find a key's versions in the table and bound them (SourceShape.SCD2_EVENTS)."""

    merge_key: tuple[str, ...]
    valid_from: str
    valid_to: str
    active_column: str | None = None

    @property
    def target_columns(self) -> tuple[str, ...]:
        return (*self.merge_key, self.valid_from, self.valid_to)


def versions_found(merge_key: tuple[str, ...], valid_from: str, sequence_fields: tuple[str, ...]) -> Expr:
    """A table version found by merge key and valid_from; a valid_from of several sequence columns (a
    struct) compared field by field, `sequence_fields` (delta-rs cannot push a struct's equality down)."""
    found = [eq(Col(c, TARGET), Col(c, SOURCE)) for c in merge_key]
    if not sequence_fields:
        return all_of(*found, eq(Col(valid_from, TARGET), Col(valid_from, SOURCE)))
    bounds = (Col(valid_from, TARGET), Col(valid_from, SOURCE))
    return all_of(*found, *(eq(Field(bounds[0], f), Field(bounds[1], f)) for f in sequence_fields))


def plan_scd2_events(
    settings: Scd2Settings,
    merge_key: tuple[str, ...],
    *,
    table_exists: bool,
    batch_empty: bool,
    sequence_fields: tuple[str, ...] = (),
) -> MergePlan:
    """The one commit of an scd2 load of change events. The staged rows carry valid_from (their
    sequence; with `sequence_fields`, a struct of them), valid_to (the next event's of the batch) and
    the active flag."""
    if batch_empty:
        return MergePlan(Operation.NOTHING, reason="scd2 of no events inserts and closes nothing")
    if not table_exists:
        return MergePlan(Operation.WRITE, reason="scd2 of events into a new table: every event is a version")
    scope = FeedScope(merge_key, settings.valid_from, settings.valid_to, settings.active_column)
    return MergePlan(
        Operation.MERGE,
        SourceShape.SCD2_EVENTS,
        delete_keys=scope.target_columns,
        on=versions_found(merge_key, settings.valid_from, sequence_fields),
        clauses=(
            Clause(
                "matched",
                "update",
                eq(Col(ACTION, SOURCE), Lit("retire")),
                retire_assignments(settings, Col(RETIRE_AT, SOURCE)),
            ),
            Clause("not_matched", "insert_all", eq(Col(ACTION, SOURCE), Lit("insert"))),
        ),
        helper_columns=(ACTION, RETIRE_AT, SPLIT, BY_DELETE),
        retire=scope,
        on_snapshot=True,  # the deletes of other loads, read with the plan, count up to this version
        reason=f"scd2 of events by merge key {list(merge_key)}: insert new versions, close the versions "
        "they fall into",
    )
