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
A chosen struct column is updated field by field (plan/null_update_fields.py): `shapes` names the struct
columns' fields.
"""

from __future__ import annotations

from ..model.cdc import sequence_columns
from ..model.naming import HELPER_PREFIX, LOAD_ID, ROW_ID
from ..model.null_updates import (
    Shape,
    deleted_at,
    field_sequences_of,
    field_sequences_owner,
    sequence_of,
    sequence_owner,
    sequences_of,
    sequences_shape,
    subject_columns,
)
from ..model.options import TableHints
from . import null_update_fields as fields
from .cdc import at_most, newer_than_target
from .expressions import SOURCE, TARGET, Case, Col, Expr, IsNull, Lit, Not, Or, all_of

Assignments = tuple[tuple[str, Expr], ...]
Sequence = tuple[Expr, ...]  # a sequence's parts, one per sequence_by column, compared in order
Shapes = tuple[dict[str, Shape], dict[str, Shape]]  # the struct columns' fields: the source's, the table's


def update_when_newer(
    hints: TableHints,
    table_columns: tuple[str, ...] | None,
    source_columns: tuple[str, ...],
    truncate: tuple | None = None,
    shapes: Shapes | None = None,
) -> tuple[Expr | None, Assignments]:
    """The condition and the assignments of the matched update (None: every matched row is updated);
    `truncate`: the sequence of the batch's truncate, which no stored value it kept may be as old as;
    `shapes`: the struct columns' fields, in the merge source and in the table (none: no struct)."""
    table = tuple(table_columns or ())
    row_sequence = sequence_columns(len(hints.sequence_by))
    row_newer = newer_than_target(row_sequence, table_columns)
    chosen = subject_columns(hints, (*source_columns, *table))
    newer = {c: _value_newer(c, table, source_columns, row_sequence) for c in chosen}
    stored = {c: _stored_sequence(c, table, row_sequence) for c in chosen}
    helpers = deleted_at(len(row_sequence))
    deleted = tuple(Col(c, SOURCE) for c in helpers) if helpers[0] in source_columns else None
    keeps = {c: fields.keeps(stored[c], deleted, truncate) for c in chosen}
    by_field, conditions = {}, [n for n in newer.values() if n != Lit(False)]
    for column in chosen:
        struct = _struct(column, hints, table, source_columns, shapes)
        if struct is not None and newer[column] != Lit(False):
            whole = fields.Whole(newer[column], stored[column], keeps[column], deleted, truncate)
            assigned, changes = fields.field_update(struct, whole)
            by_field.update(assigned)
            conditions += changes
    assignments = []
    for column in source_columns:
        owner = sequence_owner(column)
        if column.startswith(HELPER_PREFIX) or column in hints.primary_key:  # the key matched already
            continue
        if column in by_field:
            assignments.append((column, by_field[column]))
        elif column in (LOAD_ID, ROW_ID):
            assignments.append((column, Col(column, SOURCE)))
        elif column in newer:  # a column the table lacks has no value to keep: the event's, or null
            kept = Col(column, TARGET) if column in table else None
            carried = Col(column, SOURCE)
            assignments.append((column, fields.either(newer[column], carried, keeps[column], kept)))
        elif owner is not None:
            value, part = owner
            if value in newer:
                carried, held = Col(column, SOURCE), stored[value]
                kept = held[part - 1] if held is not None else None
                assignments.append((column, fields.either(newer[value], carried, keeps[value], kept)))
        elif field_sequences_owner(column) is None or field_sequences_owner(column)[0] not in newer:
            assignments.append((column, _pick(row_newer, column, table)))
    reset = [c for c in chosen if c in table and keeps[c] is not None]
    conditions += [  # a stored value older than a delete of its key in the batch goes
        all_of(Not(IsNull(Col(c, TARGET))), Not(keeps[c])) for c in reset
    ]
    condition = Or((row_newer, *conditions)) if row_newer is not None else None
    return condition, tuple(assignments)


def _struct(column: str, hints: TableHints, table, source, shapes: Shapes | None):
    """A chosen column as a struct kept field by field; None where it is none (or the merge source
    carries no sequences of its fields)."""
    parts = len(hints.sequence_by)
    shape = (shapes or ({}, {}))[0].get(column)
    if not shape or not all(n in source for n in field_sequences_of(column, parts)):
        return None
    return fields.StructColumn(column, parts, shape, *_in_table(column, parts, table, shapes))


def _in_table(column: str, parts: int, table, shapes: Shapes | None) -> tuple[Shape | None, bool]:
    """The fields of the struct column in the table (None: it lacks the column), and whether the table
    keeps their sequences, in that shape."""
    table_shapes = (shapes or ({}, {}))[1]
    shape = table_shapes.get(column) if column in table else None
    kept = sequences_shape(shape) if shape else None
    names = field_sequences_of(column, parts)
    return shape, kept is not None and all(n in table and table_shapes.get(n) == kept for n in names)


def reset_by_truncate(
    hints: TableHints, table_columns: tuple[str, ...], truncate: tuple, shapes: Shapes | None = None
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
    assignments, conditions = [], list(stale.values())
    for column, names in kept.items():
        shape, held = _in_table(column, len(at), table_columns, shapes)
        by_field: dict[str, Expr] = {}
        if held:  # field by field
            struct = fields.StructColumn(column, len(at), (), shape, held)
            by_field, changes = fields.field_reset(struct, tuple(Col(n, TARGET) for n in names), at)
            conditions += changes
        for name in dict.fromkeys((column, *names, *by_field)):
            whole = Case(((stale[column], Lit(None)),), Col(name, TARGET))
            assignments.append((name, by_field.get(name, whole)))
    return Or(tuple(conditions)), tuple(assignments)


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
    return fields.newer(carried, _stored_sequence(column, table, row_sequence))


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
