"""Frozen, JSON-serialisable descriptions of what a load does: write dispositions, merge strategies,
key and column hints, and which hints each disposition uses (pure).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .checks import choice, key_tuple
from .columns import ColumnSchema, parse_column_schema
from .scd2 import Scd2Options, validate_options

log = logging.getLogger(__name__)

DISPOSITIONS = ("append", "replace", "merge")
MERGE_STRATEGIES = ("delete-insert", "upsert", "insert-only", "scd2")
BACKENDS = ("auto", "delta-rs", "delta-spark")
ID_FROM_PRIMARY_KEY = ("upsert", "insert-only")  # strategies whose row id is a hash of the primary key


@dataclass(frozen=True)
class WriteDisposition:
    """A parsed write_disposition: 'append', 'replace', 'merge' or the dict form."""

    disposition: str = "append"
    strategy: str | None = None
    deduplicated: bool = False
    scd2: Scd2Options | None = None

    @classmethod
    def parse(cls, value: str | dict[str, Any] | WriteDisposition) -> WriteDisposition:
        if isinstance(value, WriteDisposition):
            return value
        if isinstance(value, str):
            value = {"disposition": value}
        if not isinstance(value, dict):
            raise ConfigError("write_disposition", f"{value!r} must be a string or a dict")
        options = dict(value)
        disposition = choice("write_disposition", options.pop("disposition", None), DISPOSITIONS)
        strategy = options.pop("strategy", None)
        deduplicated = options.pop("deduplicated", False)
        if not isinstance(deduplicated, bool):
            raise ConfigError(
                "write_disposition", f"deduplicated must be true or false, got {deduplicated!r}"
            )
        if disposition != "merge":
            if strategy is not None or options or deduplicated:
                raise ConfigError(
                    "write_disposition",
                    f"strategy and its options apply only to 'merge', not {disposition!r}",
                )
            return cls(disposition)
        strategy = choice("write_disposition.strategy", strategy or "delete-insert", MERGE_STRATEGIES)
        if strategy == "scd2":
            return cls(disposition, strategy, deduplicated, Scd2Options.from_dict(options))
        if options:
            raise ConfigError(
                "write_disposition", f"option(s) {sorted(options)} do not apply to strategy {strategy!r}"
            )
        return cls(disposition, strategy, deduplicated)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"disposition": self.disposition}
        if self.strategy:
            out["strategy"] = self.strategy
        if self.deduplicated:
            out["deduplicated"] = True
        if self.scd2:
            out.update({k: v for k, v in dataclasses.asdict(self.scd2).items() if v is not None})
            out["validity_column_names"] = list(self.scd2.validity_column_names)
        return out

    @property
    def label(self) -> str:
        return f"merge/{self.strategy}" if self.strategy else self.disposition


def parse_columns(columns: Any) -> dict[str, ColumnSchema]:
    """Validate `columns` (dlt's column schema, see `model.columns`):
    {column: {"dedup_sort": "desc", ...}}."""
    return parse_column_schema(columns)


@dataclass(frozen=True)
class TableHints:
    """Key and column hints after parsing and naming: what the planner and Spark preparation use."""

    primary_key: tuple[str, ...] = ()
    merge_key: tuple[str, ...] = ()
    hard_delete: str | None = None
    dedup_sort: tuple[str, str] | None = None  # (column, "asc" | "desc")
    sequence_by: tuple[str, ...] = ()  # upsert of change events: the columns that order them (model/cdc.py)
    column_list: tuple[str, ...] = ()  # change events: the event columns that become table columns
    except_column_list: tuple[str, ...] = ()  # change events: the event columns that do not
    apply_as_deletes: str | None = None  # change events: a SQL condition marking a delete event
    apply_as_truncates: str | None = None  # change events: a SQL condition marking a truncate event
    ignore_null_updates: bool = False  # change events: a null in an event keeps the stored value
    ignore_null_updates_column_list: tuple[str, ...] = ()  # ... in these columns only, or
    ignore_null_updates_except_column_list: tuple[str, ...] = ()  # ... in all non-key columns but these
    track_history_column_list: tuple[str, ...] = ()  # scd2 of events: changes of these open versions
    track_history_except_column_list: tuple[str, ...] = ()  # ... all stored columns' but these


def resolve_hints(
    primary_key: str | list[str] | None,
    merge_key: str | list[str] | None,
    columns: dict[str, ColumnSchema],
    normalize,
) -> TableHints:
    """Combine key arguments with column hints; every name goes through the naming convention.

    Column hints `primary_key: True` / `merge_key: True` add columns to a key, `False` removes them
    (hints are not sticky: what this load is given is what it uses).
    """
    keys = {
        "primary_key": list(key_tuple("primary_key", primary_key)),
        "merge_key": list(key_tuple("merge_key", merge_key)),
    }
    for name, hint in columns.items():
        for kind in keys:
            flag = getattr(hint, kind)
            if flag is True and name not in keys[kind]:
                keys[kind].append(name)
            elif flag is False and name in keys[kind]:
                keys[kind].remove(name)
    hard_delete = next((n for n, h in columns.items() if h.hard_delete), None)
    dedup = next(((n, h.dedup_sort) for n, h in columns.items() if h.dedup_sort), None)
    return TableHints(
        primary_key=tuple(normalize(n) for n in keys["primary_key"]),
        merge_key=tuple(normalize(n) for n in keys["merge_key"]),
        hard_delete=normalize(hard_delete) if hard_delete else None,
        dedup_sort=(normalize(dedup[0]), dedup[1]) if dedup else None,
    )


def validate_disposition(
    disposition: WriteDisposition, hints: TableHints, normalize: Callable[[str], str]
) -> WriteDisposition:
    """The disposition with its scd2 options checked and names normalised; other dispositions as given."""
    if disposition.scd2 is None:
        return disposition
    return dataclasses.replace(
        disposition, scd2=validate_options(disposition.scd2, hints.merge_key, normalize)
    )


def effective_hints(disposition: WriteDisposition, hints: TableHints) -> TableHints:
    """The hints this disposition uses; the ones it ignores are dropped with a warning (dlt's rules)."""
    if disposition.disposition != "merge":
        _warn_ignored(hints, ("hard_delete", "dedup_sort"), f"write disposition {disposition.disposition!r}")
        return TableHints(primary_key=hints.primary_key)
    strategy = disposition.strategy
    if strategy == "scd2":
        _warn_ignored(hints, ("primary_key", "hard_delete", "dedup_sort"), "merge strategy 'scd2'")
        return TableHints(merge_key=hints.merge_key)
    if strategy in ID_FROM_PRIMARY_KEY:
        if not hints.primary_key:
            raise ConfigError(
                "primary_key", f"merge strategy {strategy!r} needs a primary key; none was given"
            )
        _warn_ignored(hints, ("merge_key", "dedup_sort"), f"merge strategy {strategy!r}")
        return TableHints(primary_key=hints.primary_key, hard_delete=hints.hard_delete)
    if not hints.primary_key or disposition.deduplicated:
        _warn_ignored(hints, ("dedup_sort",), "delete-insert without a primary key or with deduplicated=True")
        hints = TableHints(hints.primary_key, hints.merge_key, hints.hard_delete)
    if not hints.primary_key and not hints.merge_key:
        log.warning("merge without primary_key or merge_key: rows are appended, nothing is replaced")
    return hints


def _warn_ignored(hints: TableHints, names: tuple[str, ...], where: str) -> None:
    for name in names:
        if getattr(hints, name):
            log.warning("%s hint %r is ignored by %s", name, getattr(hints, name), where)
