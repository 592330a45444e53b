"""Change data capture options: `sequence_by`, which orders a change feed's events (pure).

An upsert given `sequence_by` applies events, not rows: within a batch the newest event per primary key
wins, and against the table an event applies only if it is newer than the sequence the table holds for
its key. The table keeps that sequence in system columns (SEQUENCE, then SEQUENCE_2, ... for a sequence
of several columns, compared in order). scd2 given `sequence_by` keeps every event as a version of its
merge key, valid from its sequence until the next event's (plan/scd2_feed.py); see docs/CDC.md.

`apply_as_deletes` marks delete events (a SQL condition over an event). A delete that is the newest event
of its key removes the row, and the key is remembered with the delete's sequence (a tombstone, kept in a
companion table for `tombstone_retention` seconds) so that an older event arriving later does not bring
the key back: an event applies only where it is newer than both the row and the key's tombstone. For
scd2 every delete is remembered at its place (key and sequence), as long as the history: a delete ends
the version it falls into, whichever events arrive later.

`apply_as_truncates` marks truncate events (whose key columns may be null): a truncate removes every row
older than it, and is remembered as a tombstone of the whole table (a tombstone row with null key
columns), so that an event of any key older than it is stale, in its batch and in later loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..errors import ConfigError
from .checks import key_tuple
from .naming import SYSTEM_PREFIX
from .options import TableHints, WriteDisposition
from .row_condition import check_row_condition

# scd2 options that set a validity boundary or a version of their own, which the events' sequence sets
FEED_SCD2_REFUSED = (
    "boundary_timestamp",
    "boundary_column",
    "active_record_timestamp",
    "row_version_column_name",
)
SEQUENCE = SYSTEM_PREFIX + "_sequence"  # the sequence of the event a row was last changed by
TOMBSTONES_PREFIX = SYSTEM_PREFIX + "_tombstones_"  # + table name: the table's companion of tombstones
TOMBSTONE_LOAD_ID = SYSTEM_PREFIX + "_load_id"  # the load that wrote a tombstone
TOMBSTONE_WRITTEN_AT = (
    SYSTEM_PREFIX + "_written_at"
)  # when it was written (UTC): its retention counts from it
EVENTS_TRUNCATED = "numEventsTruncated"  # truncate events applied (apply_as_truncates)
ROWS_TRUNCATED = "numTargetRowsTruncated"  # rows of the table they removed
DEFAULT_TOMBSTONE_RETENTION = int(timedelta(days=7).total_seconds())  # Delta's default log retention too


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


def event_key(disposition: WriteDisposition, hints: TableHints) -> tuple[str, ...]:
    """The key whose events `sequence_by` orders: an scd2 table's merge key (its natural key, which
    versions share), else the primary key."""
    return hints.merge_key if disposition.strategy == "scd2" else hints.primary_key


def check_condition(argument: str, value: Any) -> str | None:
    """`apply_as_deletes` / `apply_as_truncates`: a SQL condition over an event's own columns
    (model/row_condition.py), or None. Whether it names columns the events have and is true/false is
    checked on the batch (spark/cdc.py)."""
    return check_row_condition(argument, value)


def check_tombstone_retention(value: Any) -> int:
    """How long a deleted key is remembered: seconds (a number or a timedelta), at least one second."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
        raise ConfigError(
            "tombstone_retention",
            f"{value!r} is not a duration: give seconds (at least 1) or a datetime.timedelta",
        )
    return int(value)


def tombstones_table(table: str) -> str:
    """The name of the table's companion table of tombstones, beside it in the dataset."""
    return TOMBSTONES_PREFIX + table


def check_cdc(disposition: WriteDisposition, hints: TableHints) -> None:
    """Refuse `sequence_by` (and the options of change events) where they have no meaning (or a
    meaning not built yet), saying why."""
    _check_column_lists(hints, event_key(disposition, hints), _key_name(disposition))
    _check_event_conditions(disposition, hints)
    sequence = hints.sequence_by
    if not sequence:
        return
    if disposition.disposition != "merge" or disposition.strategy not in ("upsert", "scd2"):
        raise ConfigError(
            "sequence_by",
            f"orders the events an upsert or an scd2 merge applies by key; write disposition "
            f"{disposition.label!r} does not apply events by key. Use write_disposition="
            "{'disposition': 'merge', 'strategy': 'upsert'} (or 'scd2', to keep every version)",
        )
    if disposition.strategy == "scd2":
        _check_scd2_events(disposition, hints)
    if hints.hard_delete:
        raise ConfigError(
            "sequence_by",
            f"cannot be combined with the hard_delete hint on {hints.hard_delete!r}: a deleted key would "
            "not be remembered, so a late, older event would bring it back and the result would depend "
            "on arrival order. Load deletes without sequence_by",
        )
    key = event_key(disposition, hints)
    taken = [c for c in sequence if c in key]
    if taken:
        raise ConfigError(
            "sequence_by",
            f"column(s) {taken} are in the {_key_name(disposition)}; one key's events cannot be ordered by "
            "the key. Name the column(s) that order the events (a log position, a change timestamp)",
        )


def _check_scd2_events(disposition: WriteDisposition, hints: TableHints) -> None:
    """scd2 of change events: versions of a merge key, bounded by their events' sequences (a sequence of
    several columns as one struct of them, as AUTO CDC's `struct(...)`: spark/scd2_feed.py)."""
    if not hints.merge_key:
        raise ConfigError(
            "merge_key",
            "is needed by scd2 with sequence_by: the events are versions of their merge key (the natural "
            "key; scd2 ignores primary_key). Set merge_key to the key of the change feed",
        )
    given = [o for o in FEED_SCD2_REFUSED if getattr(disposition.scd2, o, None) is not None]
    if given:
        raise ConfigError(
            given[0],
            "cannot be combined with sequence_by: with change events a version is valid from its event's "
            "sequence until the next event's, and the current version's valid_to is null. Remove it",
        )


@dataclass(frozen=True)
class Scd2EventCounts:
    """What an scd2 load of change events did beyond its commit's metrics."""

    versions_split: int = 0  # closed versions of the table closed earlier: a late event fell into them
    deletes: int = 0  # delete events remembered for the first time (at their place in the history)
    closed_by_deletes: int = 0  # versions (new, or of the table) this load made end at a delete
    applied: int | None = None  # tracked columns: the batch's new events (opening a version or absorbed)
    absorbed: int | None = None  # tracked columns: new events that changed a version in place


def event_metrics(
    hints: TableHints,
    events: int,
    commit_metrics: dict,
    scd2: Scd2EventCounts | None = None,
    truncated: dict[str, int] | None = None,
) -> dict[str, int]:
    """What a load of `events` change events did: applied (inserted, updated or deleted a row; for scd2,
    inserted a version or remembered a delete; with tracked columns, a new event that opened a version or
    was absorbed into one), or skipped as stale (older than, or the same as, the
    newest event of its key in the batch, the row the table holds or the key's tombstone; for scd2, a
    version or a delete the table remembers already; a delete of a key the table does not hold changes
    no row and counts here, though its tombstone is written). With apply_as_deletes: the rows deleted
    (scd2: the deletes remembered, and the versions they closed). `scd2`, for scd2 only. `truncated`,
    with apply_as_truncates: the truncate events applied (EVENTS_TRUNCATED, an applied event too) and
    the rows they removed (ROWS_TRUNCATED, which are no event's delete)."""
    if not hints.sequence_by:
        return {}
    truncated = truncated or {}
    removed = truncated.get(ROWS_TRUNCATED, 0)
    if scd2 is not None and scd2.applied is not None:
        applied = scd2.applied + scd2.deletes
    elif scd2 is not None:
        applied = int(commit_metrics.get("numTargetRowsInserted") or 0) + scd2.deletes
    else:
        changed = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
        applied = sum(int(commit_metrics.get(k) or 0) for k in changed) - removed
        applied += truncated.get(EVENTS_TRUNCATED, 0)
    metrics = {"numEventsApplied": applied, "numEventsSkippedStale": events - applied}
    if hints.apply_as_deletes:
        deleted = (
            scd2.deletes
            if scd2 is not None
            else int(commit_metrics.get("numTargetRowsDeleted") or 0) - removed
        )
        metrics["numEventsDeleted"] = int(deleted or 0)
    metrics.update(truncated)
    if scd2 is not None:
        metrics["numVersionsSplit"] = scd2.versions_split
    if scd2 is not None and scd2.absorbed is not None:
        metrics["numEventsAbsorbed"] = scd2.absorbed
    if scd2 is not None and hints.apply_as_deletes:
        metrics["numVersionsClosedByDeletes"] = scd2.closed_by_deletes
    return metrics


def check_scd2_retention(disposition: WriteDisposition, hints: TableHints, retention: int) -> None:
    """scd2 of change events keeps its deletes as long as its history: a retention would let a late event
    run past a forgotten delete, so one other than the default is refused."""
    if disposition.strategy == "scd2" and hints.sequence_by and retention != DEFAULT_TOMBSTONE_RETENTION:
        raise ConfigError(
            "tombstone_retention",
            "does not apply to scd2: its deletes are kept as long as its history, or a late event would "
            "run past a forgotten delete and reopen the version it closed. Remove tombstone_retention",
        )


def _check_event_conditions(disposition: WriteDisposition, hints: TableHints) -> None:
    """apply_as_deletes needs events (sequence_by) and stands in for hard_delete; so do truncates.
    For scd2, every delete is remembered at its place in the history (load/tombstones.py)."""
    if hints.apply_as_truncates:
        _check_truncates(disposition, hints)
    if not hints.apply_as_deletes:
        return
    if not hints.sequence_by:
        raise ConfigError(
            "apply_as_deletes",
            "marks delete events, which are ordered against later-arriving older events by their "
            "sequence: give sequence_by too (without it, use the hard_delete column hint)",
        )
    if hints.hard_delete:
        raise ConfigError(
            "apply_as_deletes",
            f"and the hard_delete hint on {hints.hard_delete!r} both mark deletes; give apply_as_deletes "
            "alone, e.g. apply_as_deletes=\"op = 'D'\"",
        )


def _check_truncates(disposition: WriteDisposition, hints: TableHints) -> None:
    """apply_as_truncates: a truncate removes the rows older than it, so it needs events (sequence_by) of
    an upsert (SCD type 1, as in AUTO CDC)."""
    if not hints.sequence_by:
        raise ConfigError(
            "apply_as_truncates",
            "marks truncate events, which remove the rows older than them and make older events arriving "
            "later stale: give sequence_by too, the order of the events (to empty a table without events, "
            "load it with write_disposition='replace')",
        )
    if disposition.strategy == "scd2":
        raise ConfigError(
            "apply_as_truncates",
            "is for an upsert of change events (SCD type 1), not scd2: a history keeps the versions a "
            "truncate would remove. Use strategy 'upsert', or load the scd2 history without it",
        )


def _key_name(disposition: WriteDisposition) -> str:
    return "merge key" if disposition.strategy == "scd2" else "primary key"


def _check_column_lists(hints: TableHints, key: tuple[str, ...], key_name: str) -> None:
    given = [a for a in ("column_list", "except_column_list") if getattr(hints, a)]
    for argument in given:
        if not hints.sequence_by:
            raise ConfigError(argument, "selects the columns of change events: give sequence_by too")
    if len(given) == 2:
        raise ConfigError("except_column_list", "give column_list or except_column_list, not both")
    lacking = [c for c in key if hints.column_list and c not in hints.column_list]
    if lacking:
        raise ConfigError("column_list", f"lacks the {key_name} column(s) {lacking}; rows are found by them")
    excluded = [c for c in key if c in hints.except_column_list]
    if excluded:
        raise ConfigError(
            "except_column_list", f"names {key_name} column(s) {excluded}; rows are found by them"
        )
