"""Expectations (`expectations=`): named SQL conditions over a row's own columns, each with the action
taken on a row that fails it (pure).

The shape declarative pipelines group them in: ``{action: {name: condition}}``, e.g.
``{"drop": {"positive_amount": "amount > 0"}, "fail": {"has_id": "id IS NOT NULL"}}``. A row passes an
expectation where its condition is true; false or null fails it. The actions, loosest first:

- `warn`: the row is loaded, and counted;
- `drop`: the row is left out, and counted;
- `quarantine`: the row is left out, and written with the names of the expectations it failed to the
  table's quarantine table (`_dlt_quarantine_<table>`) before the table's commit;
- `fail`: nothing is committed; the error names the expectation, how many rows failed it and a few.

A row failing several expectations takes the strictest action among them. A run's conf may make an
expectation stricter or add one, never loosen or change one (`tightened`), as with the schema contract.
Names are unique per table, whatever their action.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .row_condition import check_row_condition

ACTIONS = ("warn", "drop", "quarantine", "fail")  # loosest first
ARGUMENT = "expectations"
# The quarantine table's own columns, beside the row's: the load, the expectations it failed, when, and
# what a later load replaces its rows by (the stream of the run, its window).
QUARANTINE_LOAD_ID = "_dlt_load_id"
QUARANTINE_FAILED = "_dlt_expectations"
QUARANTINE_AT = "_dlt_quarantined_at"
QUARANTINE_STREAM = "_dlt_stream"
QUARANTINE_TASK = "_dlt_task"
QUARANTINE_WINDOW_START = "_dlt_window_start"
QUARANTINE_WINDOW_END = "_dlt_window_end"
QUALITY_METRICS = (
    "expectations",
    "rows_dropped",
    "rows_quarantined",
    "child_expectations",
)  # a load's metrics of them
QUARANTINE_COLUMNS = (
    QUARANTINE_LOAD_ID,
    QUARANTINE_FAILED,
    QUARANTINE_AT,
    QUARANTINE_STREAM,
    QUARANTINE_TASK,
    QUARANTINE_WINDOW_START,
    QUARANTINE_WINDOW_END,
)


@dataclass(frozen=True)
class Expectation:
    name: str
    condition: str
    action: str

    @property
    def sets_aside(self) -> bool:
        """Whether a row failing it is left out of the table (dropped or quarantined)."""
        return self.action in ("drop", "quarantine")


def check_expectations(value: Any) -> dict[str, dict] | None:
    """The canonical form of `expectations`: ``{action: {name: condition}}`` in ACTIONS' order, each
    condition checked (model/row_condition.py), names unique, then a child table's own expectations under
    its name as dlt names it (``{"orders__items": {action: {name: condition}}}``); None for none.
    ConfigError otherwise."""
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise ConfigError(
            ARGUMENT,
            f"{value!r} must be a dict of actions ({', '.join(ACTIONS)}) to dicts of named conditions, "
            'e.g. {"drop": {"positive_amount": "amount > 0"}}',
        )
    canonical: dict[str, dict] = _checked_actions(ARGUMENT, value, children=True)
    for child in sorted(k for k in value if k not in ACTIONS):
        own = value[child]
        if not isinstance(own, dict):
            raise ConfigError(
                f"{ARGUMENT}.{child}",
                f"{own!r} must be the child table's own expectations, {{action: {{name: condition}}}}",
            )
        checked = _checked_actions(f"{ARGUMENT}.{child}", own, children=False)
        if checked:
            canonical[child] = checked
    return canonical or None


def _checked_actions(argument: str, value: dict, children: bool) -> dict[str, dict[str, str]]:
    """One table's ``{action: {name: condition}}`` checked; other keys are refused, but for the child
    tables' names (``<table>__<list>``) at the top level (`children`)."""
    unknown = sorted(str(a) for a in value if a not in ACTIONS and not (children and _child_key(a)))
    if unknown:
        where = " or a child table's name as dlt names it (orders__items)" if children else ""
        raise ConfigError(argument, f"unknown action(s) {unknown}; valid: {', '.join(ACTIONS)}{where}")
    canonical: dict[str, dict[str, str]] = {}
    seen: dict[str, str] = {}  # name (case-insensitive) -> its action
    for action in ACTIONS:
        named = value.get(action)
        if named is None:
            continue
        if not isinstance(named, dict):
            raise ConfigError(
                f"{argument}.{action}",
                f'{named!r} must be a dict of names to conditions, e.g. {{"positive_amount": "amount > 0"}}',
            )
        for name, condition in named.items():
            if not isinstance(name, str) or not name.strip():
                raise ConfigError(
                    f"{argument}.{action}", f"{name!r} is not a name; give each expectation one"
                )
            if name.lower() in seen:
                raise ConfigError(
                    f"{argument}.{action}.{name}",
                    f"the name is already given to an expectation under {seen[name.lower()]!r}; names are "
                    "unique per table (ignoring case): rename one of them",
                )
            seen[name.lower()] = action
            checked = check_row_condition(f"{argument}.{action}.{name}", condition)
            if checked is None:
                raise ConfigError(f"{argument}.{action}.{name}", 'needs a condition, such as "amount > 0"')
            canonical.setdefault(action, {})[name] = checked
    return canonical


def _child_key(key: Any) -> bool:
    return isinstance(key, str) and "__" in key.strip("_")


def parse_expectations(value: Any) -> tuple[Expectation, ...]:
    """The root table's expectations of a canonical (or any accepted) value, in ACTIONS' order."""
    canonical = check_expectations(value) or {}
    return _parsed(canonical)


def child_expectations(value: Any) -> dict[str, tuple[Expectation, ...]]:
    """Each child table's own expectations (by its name as dlt names it), in ACTIONS' order."""
    canonical = check_expectations(value) or {}
    return {table: _parsed(own) for table, own in canonical.items() if table not in ACTIONS}


def _parsed(canonical: dict) -> tuple[Expectation, ...]:
    return tuple(
        Expectation(name, condition, action)
        for action in ACTIONS
        for name, condition in (canonical.get(action) or {}).items()
    )


def tightened(declared: Any, override: Any) -> dict[str, dict] | None:
    """The expectations a run uses when its conf sets `expectations` over the task's own, table by table
    (the root's, each child table's): each of the task's at the stricter of its action and the conf's,
    and the conf's new ones added. A conf giving one of the task's names another condition is refused:
    a condition can loosen as well as tighten."""
    task, conf = check_expectations(declared) or {}, check_expectations(override) or {}
    merged: dict[str, dict] = _tightened(ARGUMENT, _parsed(task), _parsed(conf))
    for child in sorted((set(task) | set(conf)) - set(ACTIONS)):
        merged[child] = _tightened(
            f"{ARGUMENT}.{child}", _parsed(task.get(child) or {}), _parsed(conf.get(child) or {})
        )
    return check_expectations(merged)


def _tightened(argument: str, declared: tuple, override: tuple) -> dict[str, dict[str, str]]:
    task = {e.name.lower(): e for e in declared}
    merged = dict(task)
    for wanted in override:
        own = task.get(wanted.name.lower())
        if own is None:
            merged[wanted.name.lower()] = wanted
            continue
        if own.condition != wanted.condition:
            raise ConfigError(
                f"{argument}.{wanted.action}.{wanted.name}",
                f"dag_run.conf gives {wanted.condition!r}, the task {own.condition!r}: a run's conf may make "
                "an expectation's action stricter or add one, never change its condition. Give the task's "
                "condition, or a new name",
            )
        stricter = max(own.action, wanted.action, key=ACTIONS.index)
        merged[own.name.lower()] = Expectation(own.name, own.condition, stricter)
    grouped: dict[str, dict[str, str]] = {}
    for expectation in merged.values():
        grouped.setdefault(expectation.action, {})[expectation.name] = expectation.condition
    return grouped


def quarantines(expectations: tuple[Expectation, ...]) -> bool:
    """Whether any of `expectations` quarantines the rows failing it."""
    return any(e.action == "quarantine" for e in expectations)


def quarantine_table(table: str) -> str:
    """The companion table of a table's quarantined rows."""
    return f"_dlt_quarantine_{table}"


def expectation_metrics(
    expectations: tuple[Expectation, ...], rows: int, failed: dict[str, int], dropped: int, quarantined: int
) -> dict[str, Any]:
    """The load's metrics of its expectations: per expectation its action and the rows that passed and
    failed it (of `rows` checked), and the rows dropped and quarantined (each row once)."""
    return {
        "expectations": {
            e.name: {"action": e.action, "passed": rows - failed[e.name], "failed": failed[e.name]}
            for e in expectations
        },
        "rows_dropped": dropped,
        "rows_quarantined": quarantined,
    }
