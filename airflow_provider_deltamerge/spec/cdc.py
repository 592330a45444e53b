"""Change data capture options: `sequence_by`, which orders a change feed's events (pure).

An upsert given `sequence_by` applies events, not rows: within a batch the newest event per primary key
wins, and against the table an event applies only if it is newer than the sequence the table holds for
its key. The table keeps that sequence in system columns (SEQUENCE, then SEQUENCE_2, ... for a sequence
of several columns, compared in order); see docs/CDC.md.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .checks import key_tuple
from .naming import SYSTEM_PREFIX
from .options import TableHints, WriteDisposition

SEQUENCE = SYSTEM_PREFIX + "_sequence"  # the sequence of the event a row was last changed by


def check_sequence_by(value: Any) -> list[str] | None:
    """A column, or a list of columns compared in order for ties; None: rows are not events."""
    names = key_tuple("sequence_by", value)
    return list(names) if names else None


def sequence_columns(count: int) -> tuple[str, ...]:
    """The system columns that keep a sequence of `count` columns in the table."""
    return tuple(SEQUENCE if i == 1 else f"{SEQUENCE}_{i}" for i in range(1, count + 1))


def check_column_list(argument: str, value: Any) -> list[str] | None:
    """`column_list` / `except_column_list`: a column or a list of columns, or None."""
    names = key_tuple(argument, value)
    return list(names) if names else None


def check_cdc(disposition: WriteDisposition, hints: TableHints) -> None:
    """Refuse `sequence_by` (and the options of change events) where they have no meaning (or a
    meaning not built yet), saying why."""
    _check_column_lists(hints)
    sequence = hints.sequence_by
    if not sequence:
        return
    if disposition.disposition != "merge" or disposition.strategy != "upsert":
        raise ConfigError(
            "sequence_by",
            f"orders the events an upsert applies by key; write disposition {disposition.label!r} does not "
            "apply events by key. Use write_disposition={'disposition': 'merge', 'strategy': 'upsert'}",
        )
    if hints.hard_delete:
        raise ConfigError(
            "sequence_by",
            f"cannot be combined with the hard_delete hint on {hints.hard_delete!r}: a deleted key would "
            "not be remembered, so a late, older event would bring it back and the result would depend "
            "on arrival order. Load deletes without sequence_by",
        )
    taken = [c for c in sequence if c in hints.primary_key]
    if taken:
        raise ConfigError(
            "sequence_by",
            f"column(s) {taken} are in the primary key; one key's events cannot be ordered by the key. "
            "Name the column(s) that order the events (a log position, a change timestamp)",
        )


def event_metrics(sequence: tuple[str, ...], events: int, commit_metrics: dict) -> dict[str, int]:
    """What a load of `events` change events did: applied (inserted or updated a row), or skipped as
    stale (older than, or the same as, the newest event of its key in the batch or the table)."""
    if not sequence:
        return {}
    applied = sum(int(commit_metrics.get(k) or 0) for k in ("numTargetRowsInserted", "numTargetRowsUpdated"))
    return {"numEventsApplied": applied, "numEventsSkippedStale": events - applied}


def _check_column_lists(hints: TableHints) -> None:
    given = [a for a in ("column_list", "except_column_list") if getattr(hints, a)]
    for argument in given:
        if not hints.sequence_by:
            raise ConfigError(argument, "selects the columns of change events: give sequence_by too")
    if len(given) == 2:
        raise ConfigError("except_column_list", "give column_list or except_column_list, not both")
    lacking = [c for c in hints.primary_key if hints.column_list and c not in hints.column_list]
    if lacking:
        raise ConfigError("column_list", f"lacks the primary key column(s) {lacking}; rows are found by them")
    excluded = [c for c in hints.primary_key if c in hints.except_column_list]
    if excluded:
        raise ConfigError(
            "except_column_list", f"names primary key column(s) {excluded}; rows are found by them"
        )
