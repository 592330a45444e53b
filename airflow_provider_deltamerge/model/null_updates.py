"""`ignore_null_updates`: a null in a change event keeps the stored value (pure; docs/CDC.md).

Change data capture tools send partial updates: the columns an update did not touch arrive as null. With
`ignore_null_updates` (all non-key columns), `ignore_null_updates_column_list` (these) or
`ignore_null_updates_except_column_list` (all non-key columns but these), such a column of the row keeps
the value of the newest event that carried one. So that the table still depends only on the set of events,
never on their arrival order, each such column keeps the sequence of the event its value came from, in
system columns of its own (`sequences_of`: one per sequence_by column, compared in order as the row's
sequence is): an event sets the column only where it carries a value newer than the stored one,
whichever event is newest for the rest of the row. A delete (`apply_as_deletes`) resets the row: a
column holds the newest value carried since its key's newest delete.

A struct column is kept field by field, as AUTO CDC keeps nested fields: its `sequences_of` columns keep
the sequence of the newest event that carried the struct (a null struct carries nothing), and its
`field_sequences_of` columns, a struct of the same fields, each leaf field's own sequence (a nested
struct's fields likewise, and its own in a field `NODE_SEQUENCE` first). Arrays and maps, of structs or
not, are one value.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import ConfigError
from .cdc import event_key
from .naming import HELPER_PREFIX, SYSTEM_PREFIX
from .options import TableHints, WriteDisposition

SEQUENCE_OF_PREFIX = SYSTEM_PREFIX + "_sequence_of_"  # + column: the sequence its stored value came from
DELETED_AT = HELPER_PREFIX + "deleted_at"  # helper: the sequence of the key's newest delete in the batch
# sequence_by's second, third ... column: SEQUENCE_PART_OF % (part, column)
SEQUENCE_PART_OF = SYSTEM_PREFIX + "_sequence_%d_of_%s"
FIELD_SEQUENCES_OF = SYSTEM_PREFIX + "_field_sequences_of_"  # + struct column: its fields' sequences
FIELD_SEQUENCES_PART_OF = SYSTEM_PREFIX + "_field_sequences_%d_of_%s"
NODE_SEQUENCE = SYSTEM_PREFIX + "_sequence"  # in a field sequences struct: a nested struct's own sequence
_FIELD_PART = re.compile(
    re.escape(SYSTEM_PREFIX) + r"_field_sequences_(?:([2-9]|[1-9][0-9]+)_)?of_(.+)", re.S
)
_SEQUENCE_PART = re.compile(re.escape(SYSTEM_PREFIX) + r"_sequence_(?:([2-9]|[1-9][0-9]+)_)?of_(.+)", re.S)
LISTS = ("ignore_null_updates_column_list", "ignore_null_updates_except_column_list")


def check_ignore_null_updates(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError("ignore_null_updates", f"{value!r} is not true or false")
    return value


def active(hints: TableHints) -> bool:
    """Whether nulls in events keep stored values (the flag, or one of the lists, turns it on)."""
    return bool(
        hints.ignore_null_updates
        or hints.ignore_null_updates_column_list
        or hints.ignore_null_updates_except_column_list
    )


def sequence_of(column: str, part: int = 1) -> str:
    """The system column that keeps the sequence (its `part`-th column) of the event `column`'s stored
    value came from."""
    return SEQUENCE_OF_PREFIX + column if part == 1 else SEQUENCE_PART_OF % (part, column)


def sequences_of(column: str, count: int) -> tuple[str, ...]:
    """The system columns that keep the sequence of `count` columns `column`'s stored value came from."""
    return tuple(sequence_of(column, part) for part in range(1, count + 1))


def sequence_owner(name: str) -> tuple[str, int] | None:
    """The column and the part whose sequence the system column `name` keeps; None: it keeps none."""
    matched = _SEQUENCE_PART.fullmatch(name)
    return (matched.group(2), int(matched.group(1) or 1)) if matched else None


def field_sequences_of(column: str, count: int) -> tuple[str, ...]:
    """The system columns that keep, per part of the sequence, the sequence of each field of the struct
    column `column` (a struct of its fields, see the module)."""
    return tuple(
        FIELD_SEQUENCES_OF + column if part == 1 else FIELD_SEQUENCES_PART_OF % (part, column)
        for part in range(1, count + 1)
    )


def field_sequences_owner(name: str) -> tuple[str, int] | None:
    """The struct column and the part whose fields' sequences the system column `name` keeps; None:
    it keeps none."""
    matched = _FIELD_PART.fullmatch(name)
    return (matched.group(2), int(matched.group(1) or 1)) if matched else None


# A struct's fields, in order, each with its own fields where it is a struct (None: a leaf value)
Shape = tuple[tuple[str, "Shape | None"], ...]


def sequences_shape(shape: Shape) -> Shape:
    """The shape of a struct's field sequences (see the module): each leaf a sequence, each nested
    struct its own sequence (`NODE_SEQUENCE`) first, then its fields'."""
    return tuple(
        (name, None if sub is None else ((NODE_SEQUENCE, None), *sequences_shape(sub))) for name, sub in shape
    )


def deleted_at(count: int) -> tuple[str, ...]:
    """The helpers that carry the sequence (of `count` columns) of the key's newest delete in the batch."""
    return tuple(DELETED_AT if part == 1 else f"{DELETED_AT}_{part}" for part in range(1, count + 1))


def subject_columns(hints: TableHints, columns) -> tuple[str, ...]:
    """Of `columns` (the events' or the table's), those whose nulls keep the stored value: data columns,
    not in the key or the sequence, stored (column_list / except_column_list), and chosen."""
    if not active(hints):
        return ()
    taken = (
        set(hints.primary_key) | set(hints.merge_key) | set(hints.sequence_by) | set(hints.except_column_list)
    )
    taken |= set(hints.ignore_null_updates_except_column_list)
    chosen = []
    for column in columns:
        if column.startswith((SYSTEM_PREFIX, HELPER_PREFIX)) or column in taken or column in chosen:
            continue
        if hints.column_list and column not in hints.column_list:
            continue
        listed = hints.ignore_null_updates_column_list
        if listed and column not in listed:
            continue
        chosen.append(column)
    return tuple(chosen)


def check_null_updates(disposition: WriteDisposition, hints: TableHints) -> None:
    """Refuse ignore_null_updates where it has no meaning (or one not built yet), saying why."""
    if not active(hints):
        return
    argument = next((a for a in LISTS if getattr(hints, a)), "ignore_null_updates")
    if not hints.sequence_by:
        raise ConfigError(
            argument,
            "keeps a stored value where a change event carries null, which needs the events ordered: give "
            "sequence_by too (without it, the newest of two partial updates would depend on arrival order)",
        )
    if disposition.disposition != "merge" or disposition.strategy not in ("upsert", "scd2"):
        raise ConfigError(
            argument,
            f"applies to an upsert or an scd2 history of change events; write disposition "
            f"{disposition.label!r} is not one. Use write_disposition={{'disposition': 'merge', "
            "'strategy': 'upsert'} (or 'scd2')",
        )
    if all(getattr(hints, a) for a in LISTS):
        raise ConfigError(LISTS[1], f"give {LISTS[0]} or {LISTS[1]}, not both")
    key = event_key(disposition, hints)
    key_name = "merge key" if disposition.strategy == "scd2" else "primary key"
    for listed in LISTS:
        keys = [c for c in getattr(hints, listed) if c in key]
        if keys:
            raise ConfigError(
                listed, f"names {key_name} column(s) {keys}; rows are found by them, they are never null"
            )
    ordering = [c for c in hints.ignore_null_updates_column_list if c in hints.sequence_by]
    if ordering:
        raise ConfigError(
            LISTS[0], f"names sequence_by column(s) {ordering}, which are never null; remove them"
        )
    unstored = [
        c
        for c in hints.ignore_null_updates_column_list
        if (hints.column_list and c not in hints.column_list) or c in hints.except_column_list
    ]
    if unstored:
        raise ConfigError(
            LISTS[0],
            f"names column(s) {unstored} that column_list / except_column_list leave out of the table",
        )
