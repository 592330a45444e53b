"""`track_history_column_list` / `track_history_except_column_list`: which changes open a version of
an scd2 history of change events (pure; docs/CDC.md).

With either list, an event opens a version only where its TRACKED columns differ from those of the
version it follows (or where it follows a delete, or is its key's first); an event that changes only
other columns updates those of the version it falls into in place (it is absorbed). The history stays
what applying all events one by one in sequence order builds: a late event may split a version that
absorbed later events, so every event is kept, in a companion table `_dlt_events_<table>`
(events_table), and a load rebuilds its keys' histories from all their events (plan/scd2_history.py).
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from . import null_updates
from .naming import HELPER_PREFIX, SYSTEM_PREFIX
from .options import TableHints, WriteDisposition

LISTS = ("track_history_column_list", "track_history_except_column_list")
EVENTS_PREFIX = SYSTEM_PREFIX + "_events_"  # + table name: the table's companion table of kept events


def active(hints: TableHints) -> bool:
    """Whether only changes of the tracked columns open versions (one of the lists is given)."""
    return bool(hints.track_history_column_list or hints.track_history_except_column_list)


def rebuilds_history(disposition: WriteDisposition, hints: TableHints) -> bool:
    """Whether an scd2 load of change events rebuilds its keys' histories from all their kept events
    (plan/scd2_history.py): with tracked columns, and with partial updates (`ignore_null_updates`),
    where a late event's value fills the versions after it that carried none."""
    return (
        disposition.strategy == "scd2"
        and bool(hints.sequence_by)
        and (active(hints) or null_updates.active(hints))
    )


def events_table(table: str) -> str:
    """The name of the table's companion table of kept events, beside it in the dataset."""
    return EVENTS_PREFIX + table


def tracked_columns(hints: TableHints, columns, system_columns=()) -> tuple[str, ...]:
    """Of the stored event `columns`, those whose change opens a version: the listed ones, or all but
    the key, the sequence, system and helper columns and the listed ones."""
    if hints.track_history_column_list:
        return tuple(c for c in hints.track_history_column_list if c in columns)
    left_out = {
        *hints.merge_key,
        *hints.sequence_by,
        *hints.track_history_except_column_list,
        *system_columns,
    }
    return tuple(c for c in columns if c not in left_out and not c.startswith((SYSTEM_PREFIX, HELPER_PREFIX)))


def missing_tracked(hints: TableHints, columns) -> list[str]:
    """The `track_history_column_list` columns the events lack."""
    return [c for c in hints.track_history_column_list if c not in columns]


def check_track_history(disposition: WriteDisposition, hints: TableHints) -> None:
    """Refuse the lists where they make no sense, saying why and what to do."""
    given = [a for a in LISTS if getattr(hints, a)]
    if not given:
        return
    argument = given[0]
    if not hints.sequence_by or disposition.strategy != "scd2":
        raise ConfigError(
            argument,
            "chooses which changes open a version of an scd2 history of change events; it needs "
            "write_disposition={'disposition': 'merge', 'strategy': 'scd2'} with merge_key and sequence_by "
            f"(this load is {disposition.label!r}{'' if hints.sequence_by else ' without sequence_by'})",
        )
    if len(given) == 2:
        raise ConfigError(LISTS[1], f"give {LISTS[0]} or {LISTS[1]}, not both")
    validity = _validity_columns(disposition)
    for listed in given:
        names = getattr(hints, listed)
        _refuse(
            listed, [c for c in names if c in hints.merge_key], "merge key column(s)", "versions are per key"
        )
        _refuse(
            listed,
            [c for c in names if c in hints.sequence_by],
            "sequence_by column(s)",
            "the sequence changes with every event and bounds the versions; it is never tracked",
        )
        _refuse(
            listed,
            [c for c in names if c.startswith((SYSTEM_PREFIX, HELPER_PREFIX)) or c in validity],
            "system column(s)",
            "the load writes them itself",
        )
    unstored = [
        c
        for c in hints.track_history_column_list
        if (hints.column_list and c not in hints.column_list) or c in hints.except_column_list
    ]
    _refuse(
        LISTS[0],
        unstored,
        "column(s) that column_list / except_column_list leave out of the table",
        "only stored event columns can be tracked",
    )


def _refuse(argument: str, columns: list[str], what: str, why: str) -> None:
    if columns:
        raise ConfigError(argument, f"names {what} {columns}: {why}. Remove them from {argument}")


def _validity_columns(disposition: WriteDisposition) -> tuple[str, ...]:
    options: Any = disposition.scd2
    names = tuple(getattr(options, "validity_column_names", ()) or ())
    active_column = getattr(options, "active_column_name", None)
    return names + ((active_column,) if active_column else ())
