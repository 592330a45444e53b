"""run_load: one load, in the same steps wherever it runs (local Spark, spark-submit, Spark Connect).

window -> extract -> stage -> plan -> one Delta commit -> state rows. This module never imports Airflow.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import state
from .errors import ConflictError
from .faults import reached
from .incremental import Incremental
from .locking import creation_lock
from .naming import naming_convention
from .planning import MergePlan, Operation, plan_load
from .recovery import record_unrecorded_loads
from .specs import RunContext, TableHints, WriteDisposition, parse_columns, resolve_hints
from .windowing import (
    filter_to_window,
    open_load_window,
    parse_incremental,
    parse_interval,
    record_empty_window,
    replace_where_for,
)
from .writers import select_writer
from .writers.base import CommitRequest

log = logging.getLogger(__name__)

COMMIT_ATTEMPTS = 4  # another writer committed first: plan again on the new version, this many times in all


@dataclass(frozen=True)
class LoadInfo:
    """What a load did. `load_id` is None when there was nothing to load (no commit, no load record)."""

    load_id: str | None
    table_path: str
    table_name: str
    table_version: int | None
    metrics: dict[str, Any] = field(default_factory=dict)
    window: dict[str, Any] | None = None

    @property
    def loaded(self) -> bool:
        return self.load_id is not None


@dataclass(frozen=True)
class ResolvedLoad:
    """A validated load, everything but the data, with names already in the naming convention.

    (request.LoadRequest is the JSON form an operator ships to a job; this is what the job resolves.)"""

    dataset: str
    table_name: str  # as stored (after naming)
    disposition: WriteDisposition
    hints: TableHints
    pipeline_name: str
    backend: str
    naming: str
    run_context: RunContext
    load_id: str | None = None
    incremental: Incremental | None = None
    data_interval: tuple[datetime | None, datetime | None] | None = None
    window_overwrite: bool = True

    @property
    def table_path(self) -> str:
        return state.table_path(self.dataset, self.table_name)

    @property
    def app_id(self) -> str:
        """The Delta txn application id of this load's stream of commits.

        Delta treats txn versions as a high-water mark per application, so the id names a stream whose
        loads run one after another: one Airflow task run (its retries reuse it), or the pipeline's table
        outside Airflow. Loads of different task runs may then commit in any order.
        """
        run = self.run_context
        stream = f"deltamerge:{self.pipeline_name}:{self.table_name}"
        if run.dag_id is None:
            return stream
        return f"{stream}:{run.dag_id}:{run.task_id}:{run.map_index}:{run.run_id}"


def build_request(
    *,
    dataset: str,
    table_name: str,
    write_disposition: str | dict = "append",
    primary_key: str | list[str] | None = None,
    merge_key: str | list[str] | None = None,
    columns: dict[str, dict[str, Any]] | None = None,
    pipeline_name: str | None = None,
    backend: str = "auto",
    naming: str = "snake_case",
    run_context: RunContext | dict | None = None,
    load_id: str | None = None,
    incremental: Incremental | dict | None = None,
    data_interval: tuple | None = None,
    window_overwrite: bool = True,
) -> ResolvedLoad:
    """Validate every argument up front; nothing is read or written before this passes."""
    from .errors import ConfigError

    if not isinstance(dataset, str) or not dataset:
        raise ConfigError("dataset", f"{dataset!r} must be a path or URI where the tables live")
    if not isinstance(table_name, str) or not table_name:
        raise ConfigError("table_name", f"{table_name!r} must be a non-empty table name")
    normalize = naming_convention(naming)
    disposition = WriteDisposition.parse(write_disposition)
    hints = resolve_hints(primary_key, merge_key, parse_columns(columns), normalize)
    from .scd2 import validate_disposition
    from .staging import effective_hints

    disposition = validate_disposition(disposition, hints, normalize)

    return ResolvedLoad(
        dataset=dataset.rstrip("/") or dataset,
        table_name=normalize(table_name),
        disposition=disposition,
        hints=effective_hints(disposition, hints),
        pipeline_name=pipeline_name or "deltamerge",
        backend=backend,
        naming=naming,
        run_context=RunContext.from_value(run_context),
        load_id=load_id,
        incremental=parse_incremental(incremental, normalize),
        data_interval=parse_interval(data_interval),
        window_overwrite=bool(window_overwrite),
    )


def run_load(data, *, spark=None, **arguments) -> LoadInfo:
    """Load `data` (a DataFrame, a list of dicts, or a callable (spark, window) -> DataFrame) into Delta.

    See `build_request` for the arguments; `spark` defaults to one shared local session.
    """
    request = build_request(**arguments)
    if spark is None:
        from .session import default_session

        spark = default_session()
    return execute(spark, request, data)


def execute(spark, request: ResolvedLoad, data) -> LoadInfo:
    writer = select_writer(request.backend, spark)
    finished = _finish_interrupted_attempt(request, record_unrecorded_loads(request, writer))
    finished = finished or _already_loaded(request)
    if finished is not None:
        return finished
    snapshot = writer.snapshot(spark, request.table_path)
    load_id = request.load_id or state.new_load_id(after=_newest_load_id(request))
    opened = open_load_window(request, snapshot)
    reached("extract")
    batch = _extract(spark, data, request, opened.window if opened else None)
    batch, opened, new_state = filter_to_window(batch, request, opened)
    reached("stage")
    from .staging import stage_batch

    staged = stage_batch(batch, request.disposition, request.hints, load_id)
    load = _StagedLoad(request, load_id, staged, opened.window if opened else None, new_state)
    attempt = 1
    while True:
        try:
            if snapshot is not None:
                return _plan_and_commit(spark, writer, snapshot, load)
            with creation_lock(request.table_path):  # the first commit of a table: one writer at a time
                snapshot = writer.snapshot(spark, request.table_path)
                return _plan_and_commit(spark, writer, snapshot, load)
        except ConflictError as conflict:
            if attempt == COMMIT_ATTEMPTS:
                raise
            attempt += 1
            log.warning(
                "load %s: %s; planning again on the new version (attempt %d of %d)",
                load_id,
                conflict,
                attempt,
                COMMIT_ATTEMPTS,
            )
            time.sleep(0.2 * attempt)
            snapshot = writer.snapshot(spark, request.table_path)


@dataclass(frozen=True)
class _StagedLoad:
    """A load between staging and its commit: what stays the same if the commit has to be planned again."""

    request: ResolvedLoad
    load_id: str
    staged: object  # staging.StagedBatch
    window: object  # window.Window or None
    new_state: dict | None

    @property
    def window_dict(self) -> dict | None:
        return self.window.as_dict() if self.window is not None else None


def _plan_and_commit(spark, writer, snapshot, load: _StagedLoad) -> LoadInfo:
    """Plan against the table as it is now, make the one commit, record the load."""
    request, load_id, window = load.request, load.load_id, load.window_dict
    staged, plan = _plan(load.staged, request, snapshot, load_id, replace_where_for(request, load.window))
    plan = record_empty_window(plan, load.window)
    base_metrics = {
        "table": request.table_name,
        "rows_extracted": staged.rows_extracted,
        "rows_staged": staged.rows_staged,
        "writer": writer.name,
    }
    log.info("load %s of %s: %s", load_id, request.table_path, plan.reason)
    if plan.operation is Operation.NOTHING:
        version = snapshot.version if snapshot is not None else None
        metrics = {**base_metrics, "load_id": None, "table_version": version}
        return LoadInfo(None, request.table_path, request.table_name, version, metrics, window)
    reached("plan")
    source = _shape(spark, writer, snapshot, staged.df, plan)
    metadata = {**_commit_metadata(request, load_id, base_metrics, window), "state": load.new_state}
    commit_request = CommitRequest(load_id, request.app_id, state.txn_version(load_id), metadata)
    reached("commit")
    result = writer.commit(spark, request.table_path, snapshot, plan, source, commit_request)
    if result.already_applied:  # a concurrent submission of the same load id committed first
        record_unrecorded_loads(request, writer)
        loaded = _already_loaded(request)
        if loaded is None:
            raise ConflictError(
                f"Delta skipped load {load_id} as already applied (txn {request.app_id}) but no commit of it "
                f"is in the history of {request.table_path}; nothing was written. Retry the load."
            )
        return loaded
    reached("after_commit")
    metrics = {
        **result.metrics,
        **base_metrics,
        "load_id": load_id,
        "table_version": result.version,
        "window_start": (window or {}).get("start"),
        "window_end": (window or {}).get("end"),
    }
    record = state.LoadRecord(
        load_id,
        request.pipeline_name,
        request.table_name,
        result.version,
        metrics,
        window,
        request.run_context.to_dict(),
        load.new_state,
    )
    state.record_load(request.dataset, record)
    log.info("load %s committed version %s of %s: %s", load_id, result.version, request.table_path, metrics)
    return LoadInfo(load_id, request.table_path, request.table_name, result.version, metrics, window)


def _finish_interrupted_attempt(request: ResolvedLoad, recovered: list[state.LoadRecord]) -> LoadInfo | None:
    """A retry of an Airflow task whose earlier attempt committed but stopped before its load record:
    that load was just recorded from the commit, so this attempt returns it instead of loading again."""
    identity = ("dag_id", "task_id", "run_id", "map_index", "conf")  # conf: a backfill chunk's window
    ours = request.run_context.to_dict()
    if ours.get("run_id") is None:
        return None
    for record in reversed(recovered):
        if all(record.run.get(k) == ours.get(k) for k in identity):
            log.warning(
                "attempt %s of run %s finishes load %s, which an earlier attempt committed",
                ours.get("try_number"),
                ours.get("run_id"),
                record.load_id,
            )
            return LoadInfo(
                record.load_id,
                request.table_path,
                request.table_name,
                record.table_version,
                record.metrics,
                record.window,
            )
    return None


def _already_loaded(request: ResolvedLoad) -> LoadInfo | None:
    """A request naming a load id that was loaded before returns that load: submissions are idempotent."""
    if request.load_id is None:
        return None
    row = state.read_load(request.dataset, request.load_id)
    if row is None:
        return None
    log.warning(
        "load %s was already loaded into %s; nothing is applied again", request.load_id, request.table_path
    )
    window = (
        {"start": row["window_start"], "end": row["window_end"]}
        if row["window_start"] or row["window_end"]
        else None
    )
    return LoadInfo(
        request.load_id, request.table_path, request.table_name, row["table_version"], row["metrics"], window
    )


def _newest_load_id(request: ResolvedLoad) -> str | None:
    loads = state.read_loads(request.dataset)
    return loads[-1]["load_id"] if loads else None


def _extract(spark, data, request: ResolvedLoad, window):
    from . import prepare

    if callable(data) and not hasattr(data, "sparkSession"):
        data = data(spark, window)
    df = prepare.with_input_order(prepare.to_dataframe(spark, data))
    return prepare.rename_columns(df, naming_convention(request.naming))


def _plan(staged, request: ResolvedLoad, snapshot, load_id: str, replace_where=None):
    """The staged batch aligned to the table as it is now, and the plan of its commit."""
    from .schema import align_to_table

    if request.disposition.scd2 is not None:
        from .scd2_stage import stage_scd2

        return stage_scd2(staged, request, snapshot, load_id)
    plan = plan_load(
        request.disposition,
        request.hints,
        table_exists=snapshot is not None,
        batch_empty=staged.empty,
        hard_delete=staged.hard_delete,
        replace_where=replace_where,
    )
    table_schema = snapshot.schema if snapshot is not None else None
    aligned = align_to_table(staged.df, table_schema, request.table_name, keep=plan.helper_columns)
    return type(staged)(aligned, staged.rows_extracted, staged.rows_staged), plan


def _shape(spark, writer, snapshot, staged_df, plan: MergePlan):
    from .shaping import shape_source

    target_keys = (
        writer.read_columns(spark, snapshot, list(plan.delete_keys)) if plan.needs_target_read else None
    )
    return shape_source(staged_df, plan, target_keys)


def _commit_metadata(request: ResolvedLoad, load_id: str, base_metrics: dict, window) -> dict[str, Any]:
    return {
        "load_id": load_id,
        "pipeline": request.pipeline_name,
        "table": request.table_name,
        "disposition": request.disposition.label,
        "rows_extracted": base_metrics["rows_extracted"],
        "rows_staged": base_metrics["rows_staged"],
        "writer": base_metrics["writer"],
        "window": window,
        "run": request.run_context.to_dict(),
    }
