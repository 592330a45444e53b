"""A child table's own expectations (`expectations={"orders__items": {action: {name: condition}}}`,
model/expectations.py): conditions over the child row's own columns, checked on the child rows the load
builds from its staged root rows, before any table's commit.

- `check_names`, before any job: each child table named is one the batch makes or the table has;
- `apply`, once the child rows are built: each child table's rows flagged and counted (a job per table),
  ExpectationError where a row fails a `fail` expectation, the rows a `drop` or `quarantine` expectation
  sets aside left out with their own child rows (at every depth), their parents kept;
- `commit_all_quarantines`, the root table's own first: each child table's quarantined rows in one commit of
  `_dlt_quarantine_<child table>`, before the child tables' commits, replacing as the root's do.

A child row set aside is, to its table, an element its list no longer has: an upsert removes the stored
row of that element, a delete-insert or a replace does not bring it back, as dlt treats a shorter list.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from ..errors import ConfigError
from ..model import expectations as model
from ..model.naming import ROW_ID
from ..model.request import LoadRequest
from ..model.row_condition import check_row_condition
from ..plan.nested import CHILD_SYSTEM_COLUMNS, PARENT_ID, NestedPlan
from ..spark import expectations as spark_checks
from . import expectations as load_expectations
from .step_log import describe_expectations


def check_names(request: LoadRequest, plan: NestedPlan, existing: tuple[str, ...]) -> None:
    """Each child table named in `expectations` is one of the batch's (`plan`) or the table's
    (`existing`), each condition over its columns as far as the names go; ConfigError otherwise."""
    own = model.child_expectations(request.expectations)
    tables = {t.name: t for t in plan.tables}
    for name, expectations in own.items():
        argument = f"{model.ARGUMENT}.{name}"
        if name not in tables and name not in existing:
            known = sorted(set(tables) | set(existing))
            raise ConfigError(
                argument,
                f"{request.table!r} has no child table {name!r} (its child tables: {known or 'none'}); "
                "nothing was loaded. Name a child table as dlt names it, the table and the list's column "
                f"joined by '__' ({request.table}__items), or give its expectations to the table itself",
            )
        if name in tables:
            columns = [c.name for c in tables[name].columns] + list(CHILD_SYSTEM_COLUMNS)
            for e in expectations:
                check_row_condition(f"{argument}.{e.action}.{e.name}", e.condition, columns)


def apply(
    request: LoadRequest, plan: NestedPlan, rows: dict[str, DataFrame]
) -> tuple[dict[str, DataFrame], dict[str, Any]]:
    """The child tables' rows less those their expectations set aside (and those rows' own child rows),
    and each checked table's outcome (load/expectations.py's Outcome); ExpectationError for a `fail`."""
    own = model.child_expectations(request.expectations)
    if not own:
        return rows, {}
    kept = dict(rows)
    outcomes: dict[str, Any] = {}
    narrowed: dict[str, DataFrame] = {}  # table -> the ids of its rows kept, where some may be set aside
    for table in plan.tables:  # parents first
        frame = kept.get(table.name)
        if frame is None:
            continue
        parents = narrowed.get(table.parent)
        if parents is not None:  # a set-aside row takes its child rows with it
            frame = frame.join(parents.withColumnRenamed(ROW_ID, PARENT_ID), on=PARENT_ID, how="left_semi")
        expectations = own.get(table.name, ())
        if expectations:
            argument = f"{model.ARGUMENT}.{table.name}"
            checks = spark_checks.check(frame, expectations, argument, counted_in_pass=False)
            outcomes[table.name] = load_expectations.outcome(checks, 0, request, table.name)
            frame = checks.kept
        if parents is not None or any(e.action != "warn" for e in expectations):
            narrowed[table.name] = frame.select(ROW_ID)
        kept[table.name] = frame
    return kept, outcomes


def metrics(nested) -> dict[str, Any]:
    """The load's `child_expectations` metric: each checked child table's counts (none without any)."""
    outcomes = getattr(nested, "expected", None) or {}
    return {"child_expectations": {n: o.metrics for n, o in outcomes.items()}} if outcomes else {}


def log_counts(steps, nested) -> None:
    """The task log's `expect` line of each checked child table."""
    for name, outcome in (getattr(nested, "expected", None) or {}).items():
        steps.step("expect", "%s: %s", name, describe_expectations(outcome.metrics))


def commit_all_quarantines(writer, request: LoadRequest, load, checkpoint) -> None:
    """The load's quarantined rows, of its table and then of each child table, each in a commit of its
    quarantine table (see the module), before the table's commit; then `checkpoint("after_quarantine")`
    where the load has expectations."""
    if load.expected is not None:
        load_expectations.commit_quarantine(writer, request, load.expected, load, load.stored)
    outcomes = getattr(load.nested, "expected", None) or {}
    for name, outcome in outcomes.items():
        load_expectations.commit_quarantine(writer, request, outcome, load, load.stored, name)
    if outcomes or load.expected is not None:
        checkpoint("after_quarantine")
