"""scd2 of change events with tracked columns (`track_history_column_list` / `_except_column_list`):
a load rebuilds its keys' histories from all their events, in one MERGE (pure).

Only an event whose tracked columns differ from those of the version it follows opens a version (a key's
first event, and the first after a delete, always do); an event that changes only other columns is
absorbed: the version it falls into takes its values, keeping its valid_from. Where a late event falls
into a version that absorbed events, those after it belong to the versions it opens, so a history
built from its versions alone would depend on arrival order. Every event is therefore kept (companion
table, tracked_history_load.py), and a load:
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

from ..spec.naming import HELPER_PREFIX
from .expressions import SOURCE, TARGET, Col, Lit, all_of, eq
from .merge import ACTION, Clause, MergePlan, Operation, SourceShape
from .scd2 import Scd2Settings
from .scd2_feed import BY_DELETE, SPLIT, FeedScope

NEW_EVENTS = HELPER_PREFIX + "new_events"  # per version: the batch's new events in it (opener or absorbed)
NEW_OPENER = HELPER_PREFIX + "new_opener"  # per version: 1 where a new event of the batch opens it
INSERT, UPDATE, DELETE, SAME = "insert", "update", "delete", "same"  # ACTION of a rebuilt version
HELPERS = (ACTION, SPLIT, BY_DELETE, NEW_EVENTS, NEW_OPENER)


@dataclass(frozen=True)
class HistoryScope(FeedScope):
    """FeedScope, and the tracked columns: those whose change opens a version."""

    tracked: tuple[str, ...] = ()


def plan_scd2_history(
    settings: Scd2Settings,
    merge_key: tuple[str, ...],
    tracked: tuple[str, ...],
    *,
    table_exists: bool,
    batch_empty: bool,
) -> MergePlan:
    """The one commit of an scd2 load of change events with tracked columns."""
    scope = HistoryScope(merge_key, settings.valid_from, settings.valid_to, settings.active_column, tracked)
    if batch_empty:
        return MergePlan(Operation.NOTHING, reason="scd2 of no events inserts and closes nothing")
    if not table_exists:
        return MergePlan(
            Operation.WRITE,
            SourceShape.SCD2_HISTORY,
            retire=scope,
            helper_columns=HELPERS,
            reason=f"scd2 of events into a new table: a version per change of {list(tracked)}",
        )
    found = (eq(Col(c, TARGET), Col(c, SOURCE)) for c in (*merge_key, settings.valid_from))
    action = Col(ACTION, SOURCE)
    return MergePlan(
        Operation.MERGE,
        SourceShape.SCD2_HISTORY,
        delete_keys=(),  # the writer reads the table's versions whole (spark/scd2_history.py)
        on=all_of(*found),
        clauses=(
            Clause("matched", "delete", eq(action, Lit(DELETE))),
            Clause("matched", "update_all", eq(action, Lit(UPDATE))),
            Clause("not_matched", "insert_all", eq(action, Lit(INSERT))),
        ),
        helper_columns=HELPERS,
        retire=scope,
        on_snapshot=True,  # the kept events and deletes of other loads, read with the plan, count up to it
        reason=f"scd2 of events by merge key {list(merge_key)}, a version per change of {list(tracked)}: "
        "the batch's keys' histories rebuilt from all their events",
    )
