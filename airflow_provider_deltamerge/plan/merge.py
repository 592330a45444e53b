"""One MergePlan per load: which commit to make and how its source rows are shaped (pure).

Every strategy becomes exactly one Delta commit. The plan says which operation (write, overwrite,
merge, or nothing), how Spark must shape the merge source from the staged batch (`SourceShape`), the
join condition and the ordered WHEN clauses. Writers translate it; they decide nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

from ..model import null_updates
from ..model.cdc import sequence_columns
from ..model.options import TableHints, WriteDisposition
from .cdc import newer_than_target, not_newer_than
from .expressions import SOURCE, TARGET, Col, Expr, Lit, Not, all_of, eq, keys_equal, same
from .null_updates import Shapes, reset_by_truncate, update_when_newer

ACTION = "__action"  # helper column: 'delete' rows carry keys to delete, 'insert' rows carry data
HARD_DELETE_FLAG = "__hd"  # helper column: non-null boolean, true where the row is a hard delete
KEY_PREFIX = "__k_"  # helper key columns of 'delete' rows
UNIQUE_KEY_STRATEGIES = ("upsert", "insert-only")  # strategies that take one source row per primary key


class Operation(str, Enum):
    NOTHING = "nothing"  # no commit: an empty merge or append batch
    WRITE = "write"  # append rows; creates the table when it does not exist
    OVERWRITE = "overwrite"  # replace the table's rows (all, or those matching replace_where)
    MERGE = "merge"


class SourceShape(str, Enum):
    ROWS = "rows"  # staged rows; rows flagged by hard_delete dropped
    ROWS_WITH_FLAG = "rows_with_flag"  # staged rows with the __hd helper kept (upsert)
    DELETE_KEYS_AND_ROWS = "delete_keys_and_rows"  # distinct staged keys as 'delete' rows + 'insert' rows
    TARGET_KEYS_AND_ROWS = "target_keys_and_rows"  # target keys matching pk OR mk as 'delete' rows + rows
    SCD2_ROWS_AND_RETIRES = "scd2_rows_and_retires"  # scd2 'insert' rows + target versions as 'retire' rows
    SCD2_EVENTS = "scd2_events"  # scd2 of change events: new versions + target versions closed earlier
    SCD2_HISTORY = "scd2_history"  # scd2 of events with tracked columns: the batch keys' histories rebuilt


@dataclass(frozen=True)
class Clause:
    when: str  # "matched" | "not_matched" | "not_matched_by_source"
    action: str  # "delete" | "update_all" | "update" | "insert_all"
    condition: Expr | None = None
    assignments: tuple[tuple[str, Expr], ...] = ()  # for "update": (target column, value)


@dataclass(frozen=True)
class MergePlan:
    operation: Operation
    source: SourceShape = SourceShape.ROWS
    delete_keys: tuple[str, ...] = ()  # columns whose values select target rows to delete (scd2: to retire)
    match_any_of: tuple[tuple[str, ...], ...] = ()  # TARGET_KEYS_AND_ROWS: a target row goes if it matches
    #                                                 the batch on any of these key sets (primary, merge)
    on: Expr | None = None
    clauses: tuple[Clause, ...] = ()
    helper_columns: tuple[str, ...] = ()  # source columns that never reach the table
    replace_where: Expr | None = None  # OVERWRITE only: replace just the rows matching this
    reason: str = ""  # one line for the log: why this plan
    retire: object | None = None  # SCD2_ROWS_AND_RETIRES: scd2.RetireScope, which target rows retire;
    #                               SCD2_EVENTS: scd2_feed.FeedScope, the versions events fall into;
    #                               SCD2_HISTORY: scd2_history.HistoryScope, the tracked columns too
    cluster_by: tuple[str, ...] = ()  # WRITE / OVERWRITE: lay rows out in files ordered by these columns
    unique_key: tuple[str, ...] = ()  # the source must hold each value of these at most once; the writer
    #                                   refuses it otherwise, before committing
    strategy: str = ""  # the merge strategy, for the errors that name it
    on_snapshot: bool = False  # the commit lands on the very version planned on, or fails (and is planned
    #                            again): change events filtered by tombstones read at that version

    @property
    def needs_target_read(self) -> bool:
        return self.operation is Operation.MERGE and self.source in (
            SourceShape.TARGET_KEYS_AND_ROWS,
            SourceShape.SCD2_ROWS_AND_RETIRES,
            SourceShape.SCD2_EVENTS,
            SourceShape.SCD2_HISTORY,
        )


def key_helpers(columns: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(KEY_PREFIX + c for c in columns)


def plan_load(
    disposition: WriteDisposition,
    hints: TableHints,
    *,
    table_exists: bool,
    batch_empty: bool,
    hard_delete: bool,
    replace_where: Expr | None = None,
    table_columns: tuple[str, ...] | None = None,
    truncate: tuple | None = None,
    source_columns: tuple[str, ...] = (),
    shapes: Shapes | None = None,
) -> MergePlan:
    """The plan for one load of a non-scd2 disposition.

    `table_columns`: the columns the table has, where known (an upsert of events compares the
    sequence columns the table has: plan/cdc.py); `source_columns`: the merge source's, which an upsert
    of partial updates assigns one by one (plan/null_updates.py), and `shapes` the fields of its and the
    table's struct columns, which it assigns field by field.
    `hard_delete` says whether the staged batch carries the __hd flag (merge strategies only).
    `replace_where` turns an append into an overwrite of just the matching rows (window re-runs).
    `truncate`: the sequence of the batch's truncate event (apply_as_truncates), which removes the rows
    not newer than it.
    """
    cluster_by = hints.primary_key or hints.merge_key  # files a later merge can skip by key
    if disposition.disposition == "replace":
        if batch_empty and not table_exists:
            return MergePlan(Operation.NOTHING, reason="replace of an empty batch into a missing table")
        return MergePlan(
            Operation.OVERWRITE, cluster_by=cluster_by, reason="replace: the table holds exactly this batch"
        )
    if disposition.disposition == "append" and replace_where is not None and table_exists:
        return MergePlan(
            Operation.OVERWRITE,
            replace_where=replace_where,
            reason="append of a window: replace the window's rows",
        )
    if batch_empty:
        return MergePlan(Operation.NOTHING, reason=f"{disposition.label} of an empty batch changes nothing")
    if disposition.disposition == "append":
        return MergePlan(Operation.WRITE, reason="append")
    flag = (HARD_DELETE_FLAG,) if hard_delete else ()
    strategy = disposition.strategy
    unique = hints.primary_key if strategy in UNIQUE_KEY_STRATEGIES else ()
    if not table_exists:
        return MergePlan(
            Operation.WRITE,
            helper_columns=flag,
            cluster_by=cluster_by,
            unique_key=unique,
            strategy=strategy,
            reason=f"{disposition.label} into a new table",
        )
    if strategy == "upsert":
        upsert = _plan_upsert(hints, flag, table_columns, source_columns, truncate, shapes)
        return dataclasses.replace(upsert, unique_key=unique, strategy=strategy)
    if strategy == "insert-only":
        return MergePlan(
            Operation.MERGE,
            on=keys_equal(hints.primary_key, hints.primary_key),
            clauses=(Clause("not_matched", "insert_all"),),
            helper_columns=flag,
            unique_key=unique,
            strategy=strategy,
            reason="insert-only: insert keys not yet present",
        )
    return _plan_delete_insert(hints, flag)


def _plan_upsert(
    hints: TableHints, flag: tuple[str, ...], table_columns, source_columns, truncate=None, shapes=None
):
    on = keys_equal(hints.primary_key, hints.primary_key)
    if hints.sequence_by:  # change events: a matched row changes only for a newer event (plan/cdc.py)
        if null_updates.active(hints):  # partial updates: column by column
            plan = _plan_partial_updates(hints, on, flag, table_columns, source_columns, truncate, shapes)
        else:
            plan = _plan_events(hints, on, flag, table_columns)
        return _with_truncate(plan, hints, table_columns, truncate, shapes) if truncate is not None else plan
    if not flag:
        clauses = (Clause("matched", "update_all"), Clause("not_matched", "insert_all"))
        return MergePlan(Operation.MERGE, on=on, clauses=clauses, reason="upsert")
    flagged = Col(HARD_DELETE_FLAG, SOURCE)
    clauses = (
        Clause("matched", "delete", condition=flagged),
        Clause("matched", "update_all"),
        Clause("not_matched", "insert_all", condition=Not(flagged)),
    )
    return MergePlan(
        Operation.MERGE,
        SourceShape.ROWS_WITH_FLAG,
        on=on,
        clauses=clauses,
        helper_columns=flag,
        reason="upsert with hard deletes",
    )


def _plan_partial_updates(
    hints: TableHints, on: Expr, flag, table_columns, source_columns, truncate=None, shapes=None
) -> MergePlan:
    """Partial updates (plan/null_updates.py): the update takes each column's newer value; a newer delete
    event deletes the row (apply_as_deletes), and a key the table lacks is inserted unless it is one."""
    condition, assignments = update_when_newer(hints, table_columns, source_columns, truncate, shapes)
    update = Clause("matched", "update", condition=condition, assignments=assignments)
    if not flag:
        clauses = (update, Clause("not_matched", "insert_all"))
        return MergePlan(
            Operation.MERGE, on=on, clauses=clauses, on_snapshot=True, reason="upsert of partial updates"
        )
    newer = newer_than_target(sequence_columns(len(hints.sequence_by)), table_columns)
    deleted_at = null_updates.deleted_at(len(hints.sequence_by))
    helpers = (*flag, *(c for c in deleted_at if c in source_columns))
    return _plan_events_with_deletes(on, newer, update, helpers, "upsert of partial updates")


def _plan_events(hints: TableHints, on: Expr, flag: tuple[str, ...], table_columns) -> MergePlan:
    """Change events: a newer event updates its row, or deletes it where it is a delete event (flagged
    by apply_as_deletes); a key the table lacks is inserted unless its event is a delete. Events older
    than their key's tombstone never reach the source (load/tombstones.py), so the commit must land on
    the version whose tombstones were read."""
    newer = newer_than_target(sequence_columns(len(hints.sequence_by)), table_columns)
    if not flag:
        clauses = (Clause("matched", "update_all", condition=newer), Clause("not_matched", "insert_all"))
        return MergePlan(
            Operation.MERGE, on=on, clauses=clauses, on_snapshot=True, reason="upsert of newer events"
        )
    update = Clause("matched", "update_all", condition=newer)
    return _plan_events_with_deletes(on, newer, update, flag, "upsert of newer events")


def _plan_events_with_deletes(
    on: Expr, newer: Expr | None, update: Clause, helpers: tuple[str, ...], reason: str
) -> MergePlan:
    """Change events, delete events (flagged by apply_as_deletes) among them: a newer delete deletes its
    row, other events `update` theirs, and a key the table lacks is inserted unless its event is a
    delete."""
    flagged = Col(HARD_DELETE_FLAG, SOURCE)
    clauses = (
        Clause("matched", "delete", condition=all_of(flagged, newer) if newer is not None else flagged),
        update,
        Clause("not_matched", "insert_all", condition=Not(flagged)),
    )
    return MergePlan(
        Operation.MERGE,
        SourceShape.ROWS_WITH_FLAG,
        on=on,
        clauses=clauses,
        helper_columns=helpers,
        on_snapshot=True,
        reason=reason + ", deletes among them",
    )


def _with_truncate(
    plan: MergePlan, hints: TableHints, table_columns, truncate: tuple, shapes=None
) -> MergePlan:
    """A truncate event at `truncate`: the rows no event of the batch matches, not newer than it, are
    deleted too. The batch holds no event as old as the truncate (load/tombstones.py), so an event that
    matches a row is newer than the truncate and updates or deletes that row as usual. With partial
    updates, the rows left keep no value as old as the truncate (plan/null_updates.py)."""
    older = not_newer_than(sequence_columns(len(hints.sequence_by)), truncate, table_columns)
    clauses = (*plan.clauses, Clause("not_matched_by_source", "delete", condition=older))
    active = null_updates.active(hints)
    reset = reset_by_truncate(hints, table_columns or (), truncate, shapes) if active else None
    if reset is not None:  # partial updates: the rows that outlive it keep no value as old as it
        clauses += (Clause("not_matched_by_source", "update", condition=reset[0], assignments=reset[1]),)
    return dataclasses.replace(plan, clauses=clauses, reason=plan.reason + ", a truncate among them")


def _plan_delete_insert(hints: TableHints, flag: tuple[str, ...]) -> MergePlan:
    if not hints.primary_key and not hints.merge_key:
        return MergePlan(Operation.WRITE, helper_columns=flag, reason="delete-insert without keys appends")
    if hints.primary_key and hints.merge_key:
        shape = SourceShape.TARGET_KEYS_AND_ROWS
        keys = hints.primary_key + tuple(c for c in hints.merge_key if c not in hints.primary_key)
        reason = (
            "delete-insert: delete target rows matching the primary key or the merge key, insert survivors"
        )
    else:
        shape, keys = SourceShape.DELETE_KEYS_AND_ROWS, hints.primary_key or hints.merge_key
        kind = "primary key" if hints.primary_key else "merge key"
        reason = f"delete-insert: delete target rows matching the staged {kind}, insert survivors"
    is_insert_row = eq(Col(ACTION, SOURCE), Lit("insert"))
    from_target = shape is SourceShape.TARGET_KEYS_AND_ROWS
    return MergePlan(
        Operation.MERGE,
        shape,
        delete_keys=keys,
        match_any_of=(hints.primary_key, hints.merge_key) if from_target else (),
        on=_target_tuples_equal(keys) if from_target else keys_equal(keys, key_helpers(keys)),
        clauses=(Clause("matched", "delete"), Clause("not_matched", "insert_all", condition=is_insert_row)),
        helper_columns=(ACTION, *key_helpers(keys), *flag),
        reason=reason,
    )


def _target_tuples_equal(keys: tuple[str, ...]) -> Expr:
    """Delete rows carry (pk, mk) tuples read from the target, where one part may be NULL (a key column
    added later): compare them NULL-safely, and on 'delete' rows only, so no 'insert' row ever matches."""
    tuples = (same(Col(k, TARGET), Col(h, SOURCE)) for k, h in zip(keys, key_helpers(keys), strict=True))
    return all_of(*tuples, eq(Col(ACTION, SOURCE), Lit("delete")))
