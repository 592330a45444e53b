"""Frozen, JSON-serialisable descriptions of what a load does. Parsing here validates once.

Nothing in this module touches Spark, Delta or Airflow.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

DISPOSITIONS = ("append", "replace", "merge")
MERGE_STRATEGIES = ("delete-insert", "upsert", "insert-only", "scd2")
BACKENDS = ("auto", "delta-rs", "delta-spark")
NAMINGS = ("snake_case", "direct")
COLUMN_HINTS = ("primary_key", "merge_key", "hard_delete", "dedup_sort")
DEDUP_SORT_ORDERS = ("asc", "desc")
SCD2_OPTIONS = (
    "validity_column_names",
    "active_record_timestamp",
    "boundary_timestamp",
    "row_version_column_name",
    "boundary_column",
    "active_column_name",
)


def choice(argument: str, value: Any, allowed: tuple[str, ...]) -> str:
    """Return value if it is one of allowed, else raise a ConfigError listing the valid values."""
    if value not in allowed:
        raise ConfigError(argument, f"{value!r} is not valid; use one of {', '.join(map(repr, allowed))}")
    return value


def key_tuple(argument: str, value: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """A key hint as a tuple of column names: one name, a list of names, or None for no key."""
    if value is None:
        return ()
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(n, str) and n for n in names):
        raise ConfigError(argument, f"{value!r} is not a column name or a list of column names")
    if len(set(names)) != len(names):
        raise ConfigError(argument, f"{list(names)} names a column twice")
    return names


@dataclass(frozen=True)
class Scd2Options:
    """Options of the scd2 merge strategy (validated in full by the scd2 planner)."""

    validity_column_names: tuple[str, str] = ("_dlt_valid_from", "_dlt_valid_to")
    active_record_timestamp: str | None = None
    boundary_timestamp: str | None = None
    row_version_column_name: str | None = None
    boundary_column: str | None = None
    active_column_name: str | None = None

    @classmethod
    def from_dict(cls, options: dict[str, Any]) -> Scd2Options:
        unknown = sorted(set(options) - set(SCD2_OPTIONS))
        if unknown:
            raise ConfigError(
                "write_disposition", f"unknown scd2 option(s) {unknown}; valid: {', '.join(SCD2_OPTIONS)}"
            )
        values = {k: v for k, v in options.items() if v is not None}
        names = values.get("validity_column_names")
        if names is not None:
            if isinstance(names, str) or len(names) != 2 or not all(isinstance(n, str) and n for n in names):
                raise ConfigError(
                    "validity_column_names", f"{names!r} must be a list of two column names (from, to)"
                )
            if names[0] == names[1]:
                raise ConfigError("validity_column_names", f"{list(names)} names the same column twice")
            values["validity_column_names"] = tuple(names)
        for key in ("active_record_timestamp", "boundary_timestamp"):
            if key in values:
                values[key] = str(values[key])
        return cls(**values)


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


@dataclass(frozen=True)
class ColumnHint:
    primary_key: bool | None = None
    merge_key: bool | None = None
    hard_delete: bool = False
    dedup_sort: str | None = None


def parse_columns(columns: dict[str, dict[str, Any]] | None) -> dict[str, ColumnHint]:
    """Validate the `columns` hints: {column: {"dedup_sort": "desc", "hard_delete": True, ...}}."""
    parsed: dict[str, ColumnHint] = {}
    for name, hints in (columns or {}).items():
        if not isinstance(hints, dict):
            raise ConfigError(f"columns[{name!r}]", f"{hints!r} must be a dict of hints")
        unknown = sorted(set(hints) - set(COLUMN_HINTS))
        if unknown:
            raise ConfigError(
                f"columns[{name!r}]", f"unknown hint(s) {unknown}; valid: {', '.join(COLUMN_HINTS)}"
            )
        dedup = hints.get("dedup_sort")
        if dedup is not None:
            choice(f"columns[{name!r}].dedup_sort", dedup, DEDUP_SORT_ORDERS)
        for flag in ("primary_key", "merge_key", "hard_delete"):
            if hints.get(flag) is not None and not isinstance(hints[flag], bool):
                raise ConfigError(f"columns[{name!r}].{flag}", f"must be true or false, got {hints[flag]!r}")
        parsed[name] = ColumnHint(
            hints.get("primary_key"), hints.get("merge_key"), bool(hints.get("hard_delete")), dedup
        )
    for hint in ("hard_delete", "dedup_sort"):
        holders = [n for n, h in parsed.items() if getattr(h, hint)]
        if len(holders) > 1:
            raise ConfigError("columns", f"at most one column may have {hint}; got {holders}")
    return parsed


@dataclass(frozen=True)
class TableHints:
    """Key and column hints after parsing and naming: what the planner and Spark preparation use."""

    primary_key: tuple[str, ...] = ()
    merge_key: tuple[str, ...] = ()
    hard_delete: str | None = None
    dedup_sort: tuple[str, str] | None = None  # (column, "asc" | "desc")


def resolve_hints(
    primary_key: str | list[str] | None,
    merge_key: str | list[str] | None,
    columns: dict[str, ColumnHint],
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


@dataclass(frozen=True)
class RunContext:
    """Where a load was started from: the Airflow run, or nothing outside Airflow."""

    dag_id: str | None = None
    task_id: str | None = None
    run_id: str | None = None
    try_number: int | None = None
    map_index: int | None = None
    run_type: str | None = None
    logical_date: str | None = None
    # Start of the schedule period that ends at this run, from the DAG's timetable (Airflow 3 gives
    # cron-scheduled runs a zero-width data interval; the operator fills this in for them).
    period_start: str | None = None
    conf: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_value(cls, value: RunContext | dict[str, Any] | None) -> RunContext:
        if value is None:
            return cls()
        if isinstance(value, RunContext):
            return value
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError("run_context", f"unknown key(s) {unknown}; valid: {', '.join(sorted(known))}")
        return cls(**value)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
