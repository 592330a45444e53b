"""run_load: one load, in the same steps wherever it runs (local Spark, spark-submit, Spark Connect).

window -> extract -> stage -> plan -> one Delta commit -> state rows. This module never imports Airflow.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from . import state
from .faults import reached
from .naming import naming_convention
from .planning import MergePlan, Operation, plan_load
from .recovery import record_unrecorded_loads
from .specs import RunContext, TableHints, WriteDisposition, parse_columns, resolve_hints
from .writers import select_writer
from .writers.base import CommitRequest

log = logging.getLogger(__name__)


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
class LoadRequest:
    """A validated load, everything but the data."""

    dataset: str
    table_name: str  # as stored (after naming)
    disposition: WriteDisposition
    hints: TableHints
    pipeline_name: str
    backend: str
    naming: str
    run_context: RunContext
    load_id: str | None = None

    @property
    def table_path(self) -> str:
        return state.table_path(self.dataset, self.table_name)

    @property
    def app_id(self) -> str:
        return f"deltamerge:{self.pipeline_name}:{self.table_name}"


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
) -> LoadRequest:
    """Validate every argument up front; nothing is read or written before this passes."""
    from .errors import ConfigError

    if not isinstance(dataset, str) or not dataset:
        raise ConfigError("dataset", f"{dataset!r} must be a path or URI where the tables live")
    if not isinstance(table_name, str) or not table_name:
        raise ConfigError("table_name", f"{table_name!r} must be a non-empty table name")
    normalize = naming_convention(naming)
    disposition = WriteDisposition.parse(write_disposition)
    hints = resolve_hints(primary_key, merge_key, parse_columns(columns), normalize)
    from .staging import effective_hints

    return LoadRequest(
        dataset=dataset.rstrip("/") or dataset,
        table_name=normalize(table_name),
        disposition=disposition,
        hints=effective_hints(disposition, hints),
        pipeline_name=pipeline_name or "deltamerge",
        backend=backend,
        naming=naming,
        run_context=RunContext.from_value(run_context),
        load_id=load_id,
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


def execute(spark, request: LoadRequest, data) -> LoadInfo:
    writer = select_writer(request.backend, spark)
    record_unrecorded_loads(request, writer)
    snapshot = writer.snapshot(spark, request.table_path)
    load_id = request.load_id or state.new_load_id(after=_newest_load_id(request))
    window = None
    reached("extract")
    batch = _extract(spark, data, request, window)
    reached("stage")
    staged, plan = _stage_and_plan(batch, request, snapshot, load_id)
    base_metrics = {
        "table": request.table_name,
        "rows_extracted": staged.rows_extracted,
        "rows_staged": staged.rows_staged,
        "writer": writer.name,
    }
    log.info("load %s of %s: %s", load_id, request.table_path, plan.reason)
    if plan.operation is Operation.NOTHING:
        version = snapshot.version if snapshot is not None else None
        return LoadInfo(None, request.table_path, request.table_name, version, {**base_metrics, "load_id": None})
    reached("plan")
    source = _shape(spark, writer, snapshot, staged.df, plan)
    commit_request = CommitRequest(
        load_id, request.app_id, state.txn_version(load_id), _commit_metadata(request, load_id, base_metrics, window)
    )
    reached("commit")
    result = writer.commit(spark, request.table_path, snapshot, plan, source, commit_request)
    reached("after_commit")
    metrics = {
        **result.metrics,
        **base_metrics,
        "load_id": load_id,
        "table_version": result.version,
        "window_start": None,
        "window_end": None,
    }
    record = state.LoadRecord(
        load_id, request.pipeline_name, request.table_name, result.version, metrics, window,
        request.run_context.to_dict(),
    )
    state.record_load(request.dataset, record)
    log.info("load %s committed version %s of %s: %s", load_id, result.version, request.table_path, metrics)
    return LoadInfo(load_id, request.table_path, request.table_name, result.version, metrics, window)


def _newest_load_id(request: LoadRequest) -> str | None:
    loads = state.read_loads(request.dataset)
    return loads[-1]["load_id"] if loads else None


def _extract(spark, data, request: LoadRequest, window):
    from . import prepare

    if callable(data) and not hasattr(data, "sparkSession"):
        data = data(spark, window)
    df = prepare.with_input_order(prepare.to_dataframe(spark, data))
    return prepare.rename_columns(df, naming_convention(request.naming))


def _stage_and_plan(batch, request: LoadRequest, snapshot, load_id: str):
    from .schema import align_to_table
    from .staging import stage_batch

    staged = stage_batch(batch, request.disposition, request.hints, load_id)
    plan = plan_load(
        request.disposition,
        request.hints,
        table_exists=snapshot is not None,
        batch_empty=staged.empty,
        hard_delete=staged.hard_delete,
    )
    table_schema = snapshot.schema if snapshot is not None else None
    aligned = align_to_table(staged.df, table_schema, request.table_name, keep=plan.helper_columns)
    return type(staged)(aligned, staged.rows_extracted, staged.rows_staged), plan


def _shape(spark, writer, snapshot, staged_df, plan: MergePlan):
    from .shaping import shape_source

    target_keys = writer.read_columns(spark, snapshot, list(plan.delete_keys)) if plan.needs_target_read else None
    return shape_source(staged_df, plan, target_keys)


def _commit_metadata(request: LoadRequest, load_id: str, base_metrics: dict, window) -> dict[str, Any]:
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
