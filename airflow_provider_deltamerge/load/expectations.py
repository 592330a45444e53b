"""A load's expectations (`expectations=`, model/expectations.py): its data quality step, between the
schema step and staging, and its quarantine commit, before the table's.

1. `check`: the conditions checked against the batch (refused before any job), each row flagged with the
   expectations it fails, the rows a `drop`, `quarantine` or `fail` expectation sets aside left out
   before deduplication and planning (so a dropped row never wins a dedup or a change event's
   sequence), the counts riding on staging's one pass (spark/expectations.py);
2. `outcome`, after staging: the counts, and ExpectationError where a row fails a `fail` expectation,
   before anything is committed; else the metrics and the rows to quarantine;
3. `commit_quarantine`, in the commit step before the child tables', tombstones' and table's commits:
   the quarantined rows written as this load's in one commit of `_dlt_quarantine_<table>`, replacing
   the rows of an earlier attempt of this load, of its run's attempts that never completed, and of an
   earlier load of the same task's same window (a replay), so a retry neither doubles nor loses them.

A load stopped after 3 and before its table's commit leaves rows of a load that never completed; its
retry (the same run in Airflow, or the same load id outside it) replaces them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from ..delta.delta_rs import spark_to_arrow
from ..delta.quarantine import quarantined_loads, write_quarantine
from ..errors import ExpectationError
from ..model import expectations as model
from ..model.naming import table_path
from ..model.request import LoadRequest
from ..model.run import app_id
from ..model.secrets import credential_values, redact_text, redacted
from ..plan.merge import MergePlan, Operation
from ..spark import expectations as spark_checks
from ..spark.codegen import small_batch_codegen
from ..spark.profile import COLLECT_ESTIMATE_BYTES, estimated_bytes
from ..spark.stage import collects_every_row
from .staged_arrow import collects_as_batch
from .tombstones import completed_loads

EXAMPLES = 3  # failing rows an ExpectationError shows


@dataclass(frozen=True)
class Outcome:
    """What a load's expectations decided: its metrics, and the rows to quarantine (None: none)."""

    metrics: dict[str, Any] = field(default_factory=dict)
    quarantined: Any = None  # DataFrame of the rows to quarantine, with spark_checks.FAILED


def check(batch, request: LoadRequest, collect=None, table=None, child_tables: tuple[str, ...] = ()):
    """(the batch that goes on to staging, the checks) ; (batch, None) where the load has none. Decided
    on the driver where staging collects (`collect`: load/staging.py) each row of the batch as it is."""
    expectations = model.parse_expectations(request.expectations)
    if not expectations or not batch.columns:  # no expectations, or a batch without columns: no rows
        return batch, None
    on_driver = (
        collect is not None
        and collects_every_row(request.disposition, request.hints)
        and collects_as_batch(request, batch, table, child_tables)
    )
    checks = spark_checks.check(batch, expectations, on_driver=on_driver)
    return checks.kept, checks


def outcome(checks, rows_staged_from: int, request: LoadRequest, table: str | None = None) -> Outcome:
    """The counts of staging's pass (`rows_staged_from`: the rows it read; 0: a job of their own);
    ExpectationError where a row fails a `fail` expectation, naming the table (the load's, or the child
    `table`), each such expectation, its count and a few rows."""
    if checks is None:
        return Outcome()
    counts = checks.counts(rows_staged_from)
    if counts.failing:
        fail = [e.name for e in checks.expectations if e.action == "fail"]
        failed = {name: counts.failed[name] for name in fail if counts.failed[name]}
        secrets = credential_values(request.storage_options or {})
        examples = [
            {k: redact_text(v, secrets) if isinstance(v, str) else v for k, v in redacted(row).items()}
            for row in checks.rows_failing("fail", EXAMPLES)
        ]
        raise ExpectationError(table or request.table, failed, examples)
    metrics = model.expectation_metrics(
        checks.expectations, counts.rows, counts.failed, counts.dropped, counts.quarantined
    )
    return Outcome(metrics, checks.quarantined(counts) if model.quarantines(checks.expectations) else None)


def record_set_aside(plan: MergePlan, result: Outcome | None) -> MergePlan:
    """A load whose expectations set aside every row is still a load: where its plan commits nothing,
    an empty commit carries its load id and counts, so it is recorded (`_dlt_loads`, the CLI), its
    quarantined rows belong to a completed load, and a retry or a replay replaces them as any load's."""
    if plan.operation is not Operation.NOTHING or result is None or not set_aside(result.metrics):
        return plan
    return MergePlan(Operation.WRITE, reason="every row set aside: an empty commit records the load")


def set_aside(metrics: dict[str, Any]) -> int:
    """The rows a load's expectations left out of it (dropped or quarantined)."""
    return metrics.get("rows_dropped", 0) + metrics.get("rows_quarantined", 0)


def commit_quarantine(writer, request: LoadRequest, result: Outcome, load, stored, table=None) -> None:
    """Write the load's quarantined rows of its table (or of its child `table`) in one commit of that
    table's quarantine table, replacing those of the loads it stands in for (the module's step 3).
    Nothing where the load quarantines nothing and replaces nothing."""
    if result.quarantined is None:
        return
    path = table_path(request.dataset, model.quarantine_table(table or request.table))
    loads = quarantined_loads(path, request.store_options) or []
    stream, task = _stream(request, load.load_id), _task(request)
    window = load.window_dict or {}
    start, end = _text(window.get("start")), _text(window.get("end"))
    replaced = {load.load_id, *load.superseded}
    same_stream = [e for e in loads if e[model.QUARANTINE_STREAM] == stream]
    completed = completed_loads(writer, request, stored) if same_stream else set()  # read where needed
    for earlier in loads:
        unfinished = earlier in same_stream and earlier[model.QUARANTINE_LOAD_ID] not in completed
        same_window = (
            window
            and earlier[model.QUARANTINE_TASK] == task
            and (
                earlier[model.QUARANTINE_WINDOW_START],
                earlier[model.QUARANTINE_WINDOW_END],
            )
            == (start, end)
        )
        if unfinished or same_window:
            replaced.add(earlier[model.QUARANTINE_LOAD_ID])
    rows = _rows(result.quarantined, load.load_id, stream, task, start, end)
    if rows.num_rows or replaced & {e[model.QUARANTINE_LOAD_ID] for e in loads}:
        write_quarantine(path, rows, sorted(replaced), request.store_options)


def _rows(quarantined, load_id: str, stream: str, task: str, start, end) -> pa.Table:
    """The quarantined rows (Arrow, where the driver set them aside, else a DataFrame) as Arrow, with the
    quarantine table's own columns."""
    if isinstance(quarantined, pa.Table):
        names = [model.QUARANTINE_FAILED if n == spark_checks.FAILED else n for n in quarantined.column_names]
        rows = quarantined.rename_columns(names)
    else:
        rows = _collected(quarantined.withColumnRenamed(spark_checks.FAILED, model.QUARANTINE_FAILED))
    count = rows.num_rows
    now = datetime.now(timezone.utc)
    own = {
        model.QUARANTINE_LOAD_ID: pa.array([load_id] * count, pa.string()),
        model.QUARANTINE_AT: pa.array([now] * count, pa.timestamp("us", "UTC")),
        model.QUARANTINE_STREAM: pa.array([stream] * count, pa.string()),
        model.QUARANTINE_TASK: pa.array([task] * count, pa.string()),
        model.QUARANTINE_WINDOW_START: pa.array([start] * count, pa.string()),
        model.QUARANTINE_WINDOW_END: pa.array([end] * count, pa.string()),
    }
    for name, values in own.items():
        if name in rows.column_names:
            rows = rows.drop_columns([name])
        rows = rows.append_column(name, values)
    return rows


def _collected(quarantined) -> pa.Table:
    """The quarantined rows of a DataFrame as Arrow."""
    estimate = estimated_bytes(quarantined)
    if estimate is None or estimate > COLLECT_ESTIMATE_BYTES:
        return spark_to_arrow(quarantined)
    # a small batch's job compiles less, as staging's collection (a fresh JVM compiles slowly)
    with small_batch_codegen(quarantined.sparkSession, "the quarantined rows' collection", estimate):
        return spark_to_arrow(quarantined)


def _stream(request: LoadRequest, load_id: str) -> str:
    """The stream of commits the load belongs to: its Airflow task run, or outside Airflow the load."""
    return app_id(request.pipeline, request.table, request.run, load_id)


def _task(request: LoadRequest) -> str:
    """The task a window belongs to (its runs replay it): pipeline, table, dag, task and map index."""
    run = request.run
    stream = f"deltamerge:{request.pipeline}:{request.table}"
    return stream if run.dag_id is None else f"{stream}:{run.dag_id}:{run.task_id}:{run.map_index}"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
