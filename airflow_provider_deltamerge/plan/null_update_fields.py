"""Partial updates (`ignore_null_updates`) of one value, and of a struct column field by field (pure).

A value is replaced only by a newer one carried (`newer`); a stored value stays where no delete or
truncate of the batch is newer than it (`keeps`); else it becomes null (`either`).

A struct column is kept as AUTO CDC keeps nested fields (model/null_updates.py): the MERGE's update builds
it field by field, each leaf field a CASE of its own over its own sequence (in the `field_sequences_of`
columns), each nested struct present where an event carried it newer or the stored one stays. A stored
field's sequence is its own; where the table keeps none (a table loaded before, or its field sequences
in another shape), that of the struct it is in (so, as before, the whole struct's).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.null_updates import NODE_SEQUENCE, Shape, field_sequences_of
from .cdc import at_most, greater
from .expressions import SOURCE, TARGET, Case, Col, Expr, Field, IsNull, Lit, Not, Or, Struct, all_of

Sequence = tuple[Expr, ...]  # a sequence's parts, one per sequence_by column, compared in order


def newer(carried: Sequence, stored: Sequence | None) -> Expr:
    """Whether the event carries a value (`carried`, its sequence) newer than the stored one's."""
    if stored is None:
        return Not(IsNull(carried[0]))
    return all_of(Not(IsNull(carried[0])), Or((IsNull(stored[0]), greater(carried, stored))))


def keeps(stored: Sequence | None, deleted: Sequence | None, truncated_at: tuple | None) -> Expr | None:
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


def either(newer: Expr, carried: Expr, keeps: Expr | None, stored: Expr | None) -> Expr:
    """The event's value where it is newer; else the stored one where it stays (always, where `keeps` is
    None); else null. Without a stored one, the event's (null where it carries none, so not newer)."""
    if stored is None:
        return carried
    if keeps is None:
        return Case(((newer, carried),), stored)
    return Case(((newer, carried), (keeps, stored)))


@dataclass(frozen=True)
class StructColumn:
    """A chosen struct column as the MERGE finds it."""

    column: str
    parts: int  # sequence_by's columns
    shape: Shape  # its fields in the merge source
    table_shape: Shape | None  # in the table; None: the table lacks it
    table_sequences: bool  # whether the table keeps its fields' sequences, in its shape


@dataclass(frozen=True)
class Whole:
    """What the update knows of the struct as one value (plan/null_updates.py)."""

    newer: Expr
    stored: Sequence | None
    keeps: Expr | None
    deleted: Sequence | None
    truncated_at: tuple | None


@dataclass(frozen=True)
class _Node:
    path: tuple[str, ...]
    in_table: bool
    carried: Sequence
    stored: Sequence | None
    newer: Expr
    keeps: Expr | None


def field_update(struct: StructColumn, whole: Whole) -> tuple[dict[str, Expr], tuple[Expr, ...]]:
    """The assignments of the struct column and of its field sequences columns, and the conditions
    under which a matched row changes for a field: a newer value carried, or a stored one going."""
    column, parts = struct.column, range(struct.parts)
    nodes: dict[tuple[str, ...], _Node] = {}
    for path, sub in _walk(struct.shape):
        above = nodes[path[:-1]].stored if len(path) > 1 else whole.stored
        in_table = struct.table_shape is not None and _has(struct.table_shape, path)
        carried = tuple(_sequence(column, i, path, sub is not None, SOURCE) for i in parts)
        stored = _stored(struct, path, sub is not None, above) if in_table else None
        kept = keeps(stored, whole.deleted, whole.truncated_at)
        nodes[path] = _Node(path, in_table, carried, stored, newer(carried, stored), kept)
    root = _present(whole.newer, whole.keeps, column, (), struct.table_shape is not None)

    def present(node: _Node) -> Expr:
        return _present(node.newer, node.keeps, column, node.path, node.in_table)

    def value(path, shape) -> Struct:
        fields = []
        for name, sub in shape:
            node = nodes[(*path, name)]
            if sub is None:
                stored = _value(column, node.path, TARGET) if node.in_table else None
                carried = _value(column, node.path, SOURCE)
                fields.append((name, either(node.newer, carried, node.keeps, stored)))
            else:
                fields.append((name, Case(((present(node), value(node.path, sub)),))))
        return Struct(tuple(fields))

    def sequences(path, shape, i) -> Struct:
        fields = []
        for name, sub in shape:
            node = nodes[(*path, name)]
            stored = node.stored[i] if node.stored is not None else None
            own = either(node.newer, node.carried[i], node.keeps, stored)
            if sub is None:
                fields.append((name, own))
            else:
                built = Struct(((NODE_SEQUENCE, own), *sequences(node.path, sub, i).fields))
                fields.append((name, Case(((present(node), built),))))
        return Struct(tuple(fields))

    assignments = {column: Case(((root, value((), struct.shape)),))}
    for i in parts:
        assignments[_sequences_name(column, i)] = Case(((root, sequences((), struct.shape, i)),))
    conditions = [n.newer for n in nodes.values()]
    conditions += [
        all_of(Not(IsNull(_value(column, n.path, TARGET))), Not(n.keeps))
        for n in nodes.values()
        if n.in_table and n.keeps is not None
    ]
    return assignments, tuple(conditions)


def field_reset(
    struct: StructColumn, own: Sequence, at: Sequence
) -> tuple[dict[str, Expr], tuple[Expr, ...]]:
    """A late truncate's update of a row that outlives it (plan/null_updates.reset_by_truncate): each
    field whose own sequence (`own`: the struct's) is not newer than the truncate (`at`) made null, its
    sequence too; the assignments of the struct and of its field sequences, and where they change."""
    column, stale = struct.column, {}
    stored: dict[tuple[str, ...], Sequence] = {(): own}
    for path, sub in _walk(struct.table_shape or ()):
        stored[path] = _stored(struct, path, sub is not None, stored[path[:-1]])
        stale[path] = at_most(stored[path], at)
    whole = at_most(own, at)

    def rebuilt(path, shape, i) -> Struct:  # i: the part of the sequences; None: the value
        fields = []
        for name, sub in shape:
            p = (*path, name)
            if sub is None:
                held = _value(column, p, TARGET) if i is None else _sequence(column, i, p, False, TARGET)
                fields.append((name, Case(((stale[p], Lit(None)),), held)))
                continue
            inner = rebuilt(p, sub, i).fields
            if i is not None:
                inner = ((NODE_SEQUENCE, _sequence(column, i, p, True, TARGET)), *inner)
            gone = Or((IsNull(_value(column, p, TARGET)), stale[p]))
            fields.append((name, Case(((gone, Lit(None)),), Struct(inner))))
        return Struct(tuple(fields))

    gone = Or((IsNull(Col(column, TARGET)), whole))
    shape = struct.table_shape or ()
    assignments = {column: Case(((gone, Lit(None)),), rebuilt((), shape, None))}
    for i in range(struct.parts):
        assignments[_sequences_name(column, i)] = Case(((gone, Lit(None)),), rebuilt((), shape, i))
    return assignments, tuple(stale.values())


def _present(newer: Expr, keeps: Expr | None, column: str, path, in_table: bool) -> Expr:
    """Where a struct (the column, or a nested one) is not null after the update: an event carried it
    newer than the stored one, or the stored one stays."""
    if not in_table:
        return newer
    held = Not(IsNull(_value(column, path, TARGET)))
    return Or((newer, held if keeps is None else all_of(held, keeps)))


def _stored(struct: StructColumn, path, is_struct: bool, above: Sequence | None) -> Sequence | None:
    """The sequence of a stored field: its own where the table keeps it, else (where the field holds a
    value) that of the struct it is in (`above`)."""
    sources = []  # (where it holds, the sequence's parts), the first that holds decides
    if struct.table_sequences:
        own = tuple(_sequence(struct.column, i, path, is_struct, TARGET) for i in range(struct.parts))
        sources.append((Not(IsNull(own[0])), own))
    if above is not None:
        sources.append((Not(IsNull(_value(struct.column, path, TARGET))), above))
    if not sources:
        return None
    return tuple(Case(tuple((where, parts[i]) for where, parts in sources)) for i in range(struct.parts))


def _walk(shape: Shape, path: tuple[str, ...] = ()):
    """Every field of `shape` (its path, its own fields or None), each struct before its fields."""
    for name, sub in shape:
        here = (*path, name)
        yield here, sub
        if sub is not None:
            yield from _walk(sub, here)


def _has(shape: Shape, path: tuple[str, ...]) -> bool:
    fields: Shape | None = shape
    for name in path:
        found = dict(fields or ()).get(name, ...)
        if found is ...:
            return False
        fields = found
    return True


def _value(column: str, path, side: str) -> Expr:
    expr: Expr = Col(column, side)
    for name in path:
        expr = Field(expr, name)
    return expr


def _sequences_name(column: str, i: int) -> str:
    """The field sequences column of part `i` (from 0)."""
    return field_sequences_of(column, i + 1)[i]


def _sequence(column: str, i: int, path, is_struct: bool, side: str) -> Expr:
    """Part `i` of the own sequence of the field at `path`: a nested struct's in its NODE_SEQUENCE."""
    expr = _value(_sequences_name(column, i), path, side)
    return Field(expr, NODE_SEQUENCE) if is_struct else expr
