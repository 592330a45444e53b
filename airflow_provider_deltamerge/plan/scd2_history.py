"""scd2 of change events with tracked columns (`track_history_column_list` / `_except_column_list`) or
partial updates (`ignore_null_updates`): a load rebuilds its keys' histories from all their events, in
one MERGE (pure).

With partial updates, an event's null in a chosen column keeps the value the key's event before it held
(since the key's newest delete before it): a late event carrying a value fills the versions after it
that carried none, so here too every event is kept and a key's history rebuilt from them.

Only an event whose tracked columns differ from those of the version it follows opens a version (a key's
first event, and the first after a delete, always do); an event that changes only other columns is
absorbed: the version it falls into takes its values, keeping its valid_from. Where a late event falls
into a version that absorbed events, those after it belong to the versions it opens, so a history
built from its versions alone would depend on arrival order. Every event is therefore kept (companion
table, load/tracked_history.py), and a load:
- takes, for each key of its batch, all its events: kept ones, the batch's new ones, the remembered
  deletes, and the table's versions no kept event opens (loaded before the lists were used) as events;
- rebuilds the key's versions from them in sequence order (spark/scd2_history.py): each version valid
  from its opening event until the next point of its key that is not absorbed into it, its values
  those of its newest absorbed event;
- makes one MERGE on (merge key, valid_from) against the table's versions of those keys: a version whose
  values or valid_to changed is updated, a new one inserted, one that no longer opens a version deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.naming import HELPER_PREFIX
from .expressions import SOURCE, Col, Lit, eq
from .merge import ACTION, Clause, MergePlan, Operation, SourceShape
from .scd2 import Scd2Settings
from .scd2_feed import BY_DELETE, SPLIT, FeedScope, versions_found

NEW_EVENTS = HELPER_PREFIX + "new_events"  # per version: the batch's new events in it (opener or absorbed)
NEW_OPENER = HELPER_PREFIX + "new_opener"  # per version: 1 where a new event of the batch opens it
INSERT, UPDATE, DELETE, SAME = "insert", "update", "delete", "same"  # ACTION of a rebuilt version
HELPERS = (ACTION, SPLIT, BY_DELETE, NEW_EVENTS, NEW_OPENER)


@dataclass(frozen=True)
class HistoryScope(FeedScope):
    """FeedScope, and the tracked columns: those whose change opens a version (None: every event opens
    one, as without the lists); the columns whose nulls keep the value before (ignore_null_updates)."""

    tracked: tuple[str, ...] | None = ()
    filled: tuple[str, ...] = ()


def plan_scd2_history(
    settings: Scd2Settings,
    merge_key: tuple[str, ...],
    tracked: tuple[str, ...] | None,
    *,
    table_exists: bool,
    batch_empty: bool,
    filled: tuple[str, ...] = (),
    sequence_fields: tuple[str, ...] = (),
) -> MergePlan:
    """The one commit of an scd2 load of change events with tracked columns (`tracked`; None: every
    event opens a version) or partial updates (`filled`: the columns whose nulls keep the value before)."""
    scope = HistoryScope(
        merge_key, settings.valid_from, settings.valid_to, settings.active_column, tracked, filled
    )
    changes = "every event" if tracked is None else f"a version per change of {list(tracked)}"
    if batch_empty:
        return MergePlan(Operation.NOTHING, reason="scd2 of no events inserts and closes nothing")
    if not table_exists:
        return MergePlan(
            Operation.WRITE,
            SourceShape.SCD2_HISTORY,
            retire=scope,
            helper_columns=HELPERS,
            reason=f"scd2 of events into a new table: {changes}",
        )
    action = Col(ACTION, SOURCE)
    return MergePlan(
        Operation.MERGE,
        SourceShape.SCD2_HISTORY,
        delete_keys=(),  # the writer reads the table's versions whole (spark/scd2_history.py)
        on=versions_found(merge_key, settings.valid_from, sequence_fields),
        clauses=(
            Clause("matched", "delete", eq(action, Lit(DELETE))),
            Clause("matched", "update_all", eq(action, Lit(UPDATE))),
            Clause("not_matched", "insert_all", eq(action, Lit(INSERT))),
        ),
        helper_columns=HELPERS,
        retire=scope,
        on_snapshot=True,  # the kept events and deletes of other loads, read with the plan, count up to it
        reason=f"scd2 of events by merge key {list(merge_key)}, {changes}: "
        "the batch's keys' histories rebuilt from all their events",
    )
