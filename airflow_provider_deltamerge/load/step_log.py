"""The task log of a load: one line per step, saying what it did and how long it took.

    load of orders | store   | 12 loads recorded in /lake/shop; 0 committed unrecorded (0.21 s)
    load of orders | source  | parquet files at /landing/orders (0.35 s)
    load of orders | window  | data-interval [2024-01-01T00:00:00+00:00, 2024-01-08T00:00:00+00:00) ...
    load of orders | stage   | 5,000 rows read, 4,980 staged (dedup, hard deletes, checks) (2.40 s)
    load of orders | plan    | upsert; merge on (t.`id` = s.`id`) (0.05 s)
    load of orders | commit  | version 13: 120 inserted, 4,860 updated, 0 deleted; files +3 -2 (3.10 s)
    load of orders | record  | load 1717171717.123456 recorded in _dlt_loads (0.30 s)

Sources are named with their credentials masked; SQL queries are not logged whole.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..delta.spark_sql import render_spark
from ..model.secrets import redacted
from ..plan.merge import MergePlan

log = logging.getLogger("airflow_provider_deltamerge.load")


class StepLog:
    """Logs each step of one load with the time since the previous step."""

    def __init__(self, table: str):
        self.table = table
        self._last = time.monotonic()

    def step(self, name: str, message: str, *args: Any) -> None:
        now = time.monotonic()
        log.info("load of %s | %-7s | " + message + " (%.2f s)", self.table, name, *args, now - self._last)
        self._last = now


def describe_source(source: dict[str, Any] | None, data: Any) -> str:
    """Where the batch comes from, safe to log."""
    if source is None:
        return f"data handed to run_load ({type(data).__name__})"
    shown = redacted(source)
    if "format" in shown:
        where = f" at {shown['path']}" if "path" in shown else ""
        return f"{shown['format']} reader{where}"
    if "table" in shown:
        return f"table {shown['table']}"
    if "sql" in shown:
        return f"SQL query ({len(shown['sql'])} characters)"
    if "delta_changes" in shown:
        return f"change data feed of {shown['delta_changes']}"
    return f"callable {shown['callable']}"


def describe_window(window: Any) -> str:
    if window is None:
        return "none: the load is not incremental"
    kind = "stateful" if window.stateful else "stateless"
    left, right = ("[" if window.start_closed else "("), ("]" if window.end_closed else ")")
    return f"{window.rule} {left}{window.start}, {window.end}{right}, {kind}"


def describe_plan(plan: MergePlan) -> str:
    parts = [plan.reason]
    if plan.on is not None:
        parts.append(f"merge on {render_spark(plan.on)}")
    if plan.replace_where is not None:
        parts.append(f"replace where {render_spark(plan.replace_where)}")
    return "; ".join(parts)


def describe_commit(version: int, metrics: dict[str, Any]) -> str:
    def count(name: str) -> str:
        value = metrics.get(name)
        return "?" if value is None else f"{value:,}"

    return (
        f"version {version}: {count('numTargetRowsInserted')} inserted, {count('numTargetRowsUpdated')} "
        f"updated, {count('numTargetRowsDeleted')} deleted; files +{count('numTargetFilesAdded')} "
        f"-{count('numTargetFilesRemoved')}"
    )


def describe_expectations(metrics: dict[str, Any]) -> str:
    """Each expectation's failed rows and action, then the rows dropped and quarantined."""
    each = [
        f"{name} ({counts['action']}): {counts['failed']:,} failed"
        for name, counts in metrics.get("expectations", {}).items()
    ]
    return (
        f"{'; '.join(each)}; {metrics.get('rows_dropped', 0):,} dropped, "
        f"{metrics.get('rows_quarantined', 0):,} quarantined"
    )
