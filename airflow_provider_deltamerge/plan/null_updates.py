"""The update of an upsert of partial updates (`ignore_null_updates`), per column (pure).

The merge source holds one row per key: the key's newest event, and in each chosen column the newest value
an event of the batch carried, with its sequence in `sequence_of(column)` (spark/null_updates.py). A
matched row is updated where the event is newer than the row, or carries a value newer than a stored one:
- the row's other columns (and its sequence) take the event's values only where the event is newer than
  the row, else they keep theirs;
- a chosen column takes the event's value only where the event's sequence for it is newer than the stored
  one, else it keeps its value (and sequence), unless the batch holds a delete of the key newer than that
  value (its sequence in the `deleted_at` helpers): a delete resets the row, the value becomes null.
A delete event newer than the row deletes it (the first clause); a key the table lacks is inserted
unless its newest event is a delete. A truncate in the batch (apply_as_truncates) resets every row: a stored
value not newer than it stays only where it is replaced; in the rows no event matches that outlive it,
`reset_by_truncate` makes such values null (load/truncates.py).
A stored value's sequence is in its `sequences_of` columns (one per sequence_by column, compared in
order); where they are null (or the table has no such columns yet) and the value is not, the row's
sequence (the value was loaded by the row's event); where both are null, there is no value to keep and
any event's value is newer.
"""

from __future__ import annotations

from ..model.cdc import sequence_columns
from ..model.naming import HELPER_PREFIX, LOAD_ID, ROW_ID
from ..model.null_updates import deleted_at, sequence_of, sequence_owner, sequences_of, subject_columns
from ..model.options import TableHints
from .cdc import at_most, greater, newer_than_target
from .expressions import SOURCE, TARGET, Case, Col, Expr, IsNull, Lit, Not, Or, all_of

Assignments = tuple[tuple[str, Expr], ...]
Sequence = tuple[Expr, ...]  # a sequence's parts, one per sequence_by column, compared in order


def update_when_newer(
    hints: TableHints,
    table_columns: tuple[str, ...] | None,
    source_columns: tuple[str, ...],
    truncate: tuple | None = None,
) -> tuple[Expr | None, Assignments]:
    """The condition and the assignments of the matched update (None: every matched row is updated);
    `truncate`: the sequence of the batch's truncate, which no stored value it kept may be as old as."""
    table = tuple(table_columns or ())
    row_sequence = sequence_columns(len(hints.sequence_by))
    row_newer = newer_than_target(row_sequence, table_columns)
    chosen = subject_columns(hints, (*source_columns, *table))
    newer = {c: _value_newer(c, table, source_columns, row_sequence) for c in chosen}
    stored = {c: _stored_sequence(c, table, row_sequence) for c in chosen}
    helpers = deleted_at(len(row_sequence))
    deleted = tuple(Col(c, SOURCE) for c in helpers) if helpers[0] in source_columns else None
    keeps = {c: _keeps(stored[c], deleted, truncate) for c in chosen}
    assignments = []
    for column in source_columns:
        owner = sequence_owner(column)
        if column.startswith(HELPER_PREFIX) or column in hints.primary_key:  # the key matched already
            continue
        if column in (LOAD_ID, ROW_ID):
            assignments.append((column, Col(column, SOURCE)))
        elif column in newer:  # a column the table lacks has no value to keep: the event's, or null
            kept = Col(column, TARGET) if column in table else None
            assignments.append((column, _either(newer[column], Col(column, SOURCE), keeps[column], kept)))
        elif owner is not None:
            value, part = owner
            if value in newer:
                carried, held = Col(column, SOURCE), stored[value]
                kept = held[part - 1] if held is not None else None
                assignments.append((column, _either(newer[value], carried, keeps[value], kept)))
        else:
            assignments.append((column, _pick(row_newer, column, table)))
    conditions = [n for n in newer.values() if n != Lit(False)]
    reset = [c for c in chosen if c in table and keeps[c] is not None]
    conditions += [  # a stored value older than a delete of its key in the batch goes
        all_of(Not(IsNull(Col(c, TARGET))), Not(keeps[c])) for c in reset
    ]
    condition = Or((row_newer, *conditions)) if row_newer is not None else None
    return condition, tuple(assignments)


def _either(newer: Expr, carried: Expr, keeps: Expr | None, stored: Expr | None) -> Expr:
    """The event's value where it is newer; else the stored one where it stays (always, where `keeps` is
    None); else null. Without a stored one, the event's (null where it carries none, so not newer)."""
    if stored is None:
        return carried
    if keeps is None:
        return Case(((newer, carried),), stored)
    return Case(((newer, carried), (keeps, stored)))


def _keeps(stored: Sequence | None, deleted: Sequence | None, truncated_at: tuple | None) -> Expr | None:
    """Where a stored value that is not replaced stays: always (None) where the batch has no deletes
    and no truncate; else where its key has no delete in the batch (`deleted`, its sequence), or the
    value is newer than that delete, and the value is newer than the batch's truncate."""
    conditions = []
    if deleted is not None:
        undeleted = IsNull(deleted[0])
        conditions.append(undeleted if stored is None else Or((undeleted, greater(stored, deleted))))
    if truncated_at is not None and stored is not None:
        conditions.append(greater(stored, tuple(Lit(v) for v in truncated_at)))
    return all_of(*conditions) if conditions else None


def reset_by_truncate(
    hints: TableHints, table_columns: tuple[str, ...], truncate: tuple
) -> tuple[Expr, Assignments] | None:
    """The condition and the assignments of the update of the rows no event matches that outlive the
    batch's truncate (newer than it): each chosen column's value not newer than the truncate becomes
    null, its sequence too, as in-order arrival would have left it (the truncate emptied the table, and
    no later event carried a value).
    None where the table keeps no value's sequence."""
    at = tuple(Lit(v) for v in truncate)
    own = {c: sequences_of(c, len(truncate)) for c in subject_columns(hints, table_columns)}
    kept = {c: names for c, names in own.items() if all(n in table_columns for n in names)}
    if not kept:
        return None
    stale = {c: at_most(tuple(Col(n, TARGET) for n in names), at) for c, names in kept.items()}
    assignments = []
    for column, names in kept.items():
        for name in (column, *names):
            assignments.append((name, Case(((stale[column], Lit(None)),), Col(name, TARGET))))
    return Or(tuple(stale.values())), tuple(assignments)


def _pick(newer: Expr | None, column: str, table: tuple[str, ...]) -> Expr:
    """The event's value where `newer` holds, else the stored one (null where the table lacks it)."""
    if newer is None:
        return Col(column, SOURCE)
    stored = Col(column, TARGET) if column in table else None
    return Case(((newer, Col(column, SOURCE)),), stored)


def _value_newer(column: str, table, source, row_sequence: tuple[str, ...]) -> Expr:
    """Whether the event carries a value of `column` newer than the stored one."""
    if sequence_of(column) not in source:  # no event of this batch carries the column
        return Lit(False)
    carried = tuple(Col(name, SOURCE) for name in sequences_of(column, len(row_sequence)))
    stored = _stored_sequence(column, table, row_sequence)
    if stored is None:
        return Not(IsNull(carried[0]))
    return all_of(Not(IsNull(carried[0])), Or((IsNull(stored[0]), greater(carried, stored))))


def _stored_sequence(column: str, table, row_sequence: tuple[str, ...]) -> Sequence | None:
    """The sequence of the stored value of `column` (see the module's docstring); None: none stored."""
    if column not in table:
        return None
    own = sequences_of(column, len(row_sequence))
    sources = []  # (where it holds, the sequence's columns), the first that holds decides
    if all(name in table for name in own):
        sources.append((Not(IsNull(Col(own[0], TARGET))), own))
    if all(name in table for name in row_sequence):
        sources.append((Not(IsNull(Col(column, TARGET))), row_sequence))
    if not sources:
        return None
    parts = range(len(row_sequence))
    return tuple(Case(tuple((where, Col(names[i], TARGET)) for where, names in sources)) for i in parts)
