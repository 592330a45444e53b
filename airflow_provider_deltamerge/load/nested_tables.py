"""A load with child tables: the batch's arrays become child tables (dlt's nested tables), each child
table gets its own Delta commit, and the root table's commit comes last.

Delta commits one table at a time, so a load that touches a root table and its child tables makes one
commit per table, each carrying the load id (and its txn, so a commit that landed is never applied
again), in this order: every child table, then the root table, then the load record. The root table's
commit is the load's commit point, as for a load without child tables: once it landed, every child table
has landed, and a load interrupted after it is recorded from it by the next load. A retry of the same
Airflow run whose earlier attempt stopped between child commits (`interrupted_loads`) may bring another
batch (the source changed meanwhile), so it loads under a load id of its own and every child table's
commit also removes the rows of the interrupted attempts: each table then holds the batch that finished,
never a mix of attempts. `_dlt_loads` holds a load only once every table has it.

What each disposition does to the child tables (dlt's rules):
- append: the child rows are appended; replace: each child table holds exactly this batch's rows (WD-3);
- delete-insert: child rows whose `_dlt_root_id` is that of a deleted root row go, then the batch's
  child rows are inserted (DI-2), so hard-deleted roots lose their children at every depth (HD-5);
- upsert: child rows are merged on `_dlt_id`; child rows of a staged root that the batch no longer has
  (a shorter or missing list, a hard-deleted root) are deleted (UP-5);
- insert-only: child rows whose `_dlt_id` is new are inserted (IO-2);
- scd2: child rows are inserted when their `_dlt_id` is new; with hashed versions the ids derive from
  the parent's version, so only new versions add child rows, and retiring touches none (SCD-14..16).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..delta.child_tables import existing_child_tables, refuse_adopting_tables
from ..delta.locking import creation_lock
from ..delta.store import HISTORY_DEPTH, StoreSnapshot
from ..delta.writer import CommitRequest
from ..errors import ConfigError, ContractError, SchemaError
from ..model.expectations import child_expectations as model_child_expectations
from ..model.naming import LOAD_ID, ROW_ID, check_distinct_names, naming_convention, table_path
from ..model.options import WriteDisposition
from ..model.request import LoadRequest
from ..model.run import app_id, txn_version
from ..plan.merge import HARD_DELETE_FLAG, MergePlan, Operation
from ..plan.nested import (
    ROOT_ID,
    NestedPlan,
    check_child_tables,
    plan_child_commit,
    plan_nested,
    takes_root_key,
)
from ..plan.reruns import replace_predicate
from ..plan.scd2 import Scd2Settings
from ..spark import frames
from ..spark.names import cols
from ..spark.nested import child_rows, column_shapes, empty_rows, root_rows
from ..spark.scd2 import VERSIONED, row_version_hash
from ..spark.schema import align_to_table
from ..spark.stage import shape_source, unflagged_rows
from . import child_expectations

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NestedBatch:
    """The child tables of one staged batch."""

    plan: NestedPlan
    rows: dict[str, DataFrame]  # child table -> this batch's rows (children of hard-deleted roots left out)
    tables: tuple[str, ...]  # every child table the load processes: the batch's and the existing ones
    root_key: bool  # whether child rows carry _dlt_root_id
    staged_roots: DataFrame  # the staged root rows, hard-deleted ones included
    expected: dict = dataclasses.field(default_factory=dict)  # child table -> its expectations' Outcome


def child_tables_on_storage(request: LoadRequest) -> tuple[str, ...]:
    """The child tables the load's table already has, listed once per load (on an object store, a
    listing is a request, and a table open per candidate) and passed to the steps below."""
    return existing_child_tables(request.dataset, request.table, request.store_options)


def _planned(request: LoadRequest, batch: DataFrame) -> NestedPlan:
    normalize = naming_convention(request.naming)
    plan = plan_nested(request.table, column_shapes(batch), normalize, request.max_table_nesting)
    check_child_tables(plan, request.dataset)
    return plan


def check_child_expectations(request: LoadRequest, batch: DataFrame, existing: tuple[str, ...]) -> None:
    """The child tables' own expectations named for child tables the load has (load/child_expectations.py),
    before any job."""
    if model_child_expectations(request.expectations):
        child_expectations.check_names(request, _planned(request, batch), existing)


def plan_without_child_tables(
    request: LoadRequest, batch: DataFrame, existing: tuple[str, ...]
) -> NestedPlan | None:
    """The nested plan of a batch that makes no child tables, into a table that has none (`existing`;
    deeper arrays kept as JSON text: `root_rows`); None where the load involves child tables."""
    plan = _planned(request, batch)
    return None if plan.tables or existing else plan


def split_nested(
    spark,
    writer,
    request: LoadRequest,
    staged,
    existing: tuple[str, ...],
    load_id: str,
    replace_where=None,
    root_exists: bool = False,
):
    """The staged root batch without its child-table arrays, and its child tables (None without any):
    the batch's and those the table already has (`existing`)."""
    plan = _planned(request, staged.df)
    if not plan.tables and not existing:
        return dataclasses.replace(staged, df=root_rows(staged.df, plan)), None
    new = _new_tables_allowed(request, plan, existing) if root_exists else ()
    tables = tuple(sorted(set(plan.names) - set(new) | set(existing)))
    _refuse_unsupported(request, tables, replace_where)
    refuse_adopting_tables(request.dataset, request.table, plan, tables, existing, writer.history)
    schemas = {n: _schema(spark, writer, request, n) for n in existing}
    for child in plan.tables:  # before any child table commits: a column the table has but for case
        if schemas.get(child.name) is not None:
            check_distinct_names(
                child.name, [c.name for c in child.columns], schemas[child.name].fieldNames()
            )
    disposition = request.disposition
    root_key = (
        request.root_key
        or takes_root_key(disposition.disposition, disposition.strategy)
        or any(s is not None and ROOT_ID in s.fieldNames() for s in schemas.values())
    )
    if disposition.strategy in ("delete-insert", "upsert") and disposition.disposition == "merge":
        _require_root_key(request, schemas)
    staged_roots = _versioned(staged.df, request)
    rows = child_rows(unflagged_rows(staged_roots), plan, load_id, root_key)
    rows = {name: frame for name, frame in rows.items() if name in tables}
    rows, expected = child_expectations.apply(request, plan, rows)  # a `fail` refused here
    log.info("load %s: child tables %s", load_id, ", ".join(tables))
    root = dataclasses.replace(staged, df=root_rows(staged_roots, plan))
    return root, NestedBatch(plan, rows, tables, root_key, staged_roots, expected)


def _new_tables_allowed(request: LoadRequest, plan: NestedPlan, existing: tuple[str, ...]) -> tuple[str, ...]:
    """The child tables an existing table's batch would add that the contract's `tables` setting keeps
    out: a frozen contract refuses the first of them; a discarding one leaves them (and their rows) out."""
    new = tuple(name for name in plan.names if name not in existing)
    mode = request.contract.tables
    if not new or mode == "evolve":
        return ()
    if mode == "freeze":
        raise ContractError(request.table, "tables", new[0])
    log.warning("the schema contract discards new tables: child tables %s are not created", ", ".join(new))
    return new


def _versioned(staged: DataFrame, request: LoadRequest) -> DataFrame:
    """scd2 with hashed versions: each row's `_dlt_id` is its version hash, taken over the whole row with
    its arrays, so that child ids derive from the parent's version (SCD-14) and a changed list makes a
    new version; other loads' rows as staged."""
    if request.disposition.scd2 is None:
        return staged
    settings = Scd2Settings.from_options(request.disposition.scd2)
    if not settings.hashed_version:
        return staged
    return staged.withColumn(ROW_ID, row_version_hash(staged, settings)).withColumn(VERSIONED, F.lit(True))


def _schema(spark, writer, request: LoadRequest, name: str):
    snapshot = writer.snapshot(spark, table_path(request.dataset, name))
    return snapshot.schema if snapshot is not None else None


def _refuse_unsupported(request: LoadRequest, tables: tuple[str, ...], replace_where) -> None:
    """Refuse, before anything commits, what child tables cannot take yet."""
    if replace_where is not None:
        raise ConfigError(
            "window_overwrite",
            f"an append of a window replaces that window's rows of {request.table!r}, but its child tables "
            f"{', '.join(tables)} have no cursor column to select theirs; nothing was loaded. Pass "
            "window_overwrite=False, or load with merge and a primary key.",
        )
    if request.hints.sequence_by:
        raise ConfigError(
            "sequence_by",
            f"the events of {request.table!r} hold lists, which become the child tables "
            f"{', '.join(tables)}; the children of an event skipped as stale would still replace the "
            "children of its key. Nothing was loaded. Pass max_table_nesting=0 (lists kept as JSON).",
        )


def _require_root_key(request: LoadRequest, schemas: dict[str, Any]) -> None:
    """delete-insert and upsert find child rows by `_dlt_root_id`; tables created without it are refused."""
    for name, schema in schemas.items():
        if schema is not None and ROOT_ID not in schema.fieldNames():
            raise SchemaError(
                table_path(request.dataset, name),
                ROOT_ID,
                "absent",
                "string",
                reason=f"child table {name!r} has no {ROOT_ID} column (it was loaded by append or replace), "
                f"which merge strategy {request.disposition.strategy!r} needs to find the rows of each root; "
                "nothing was loaded. Load the table once with write_disposition='replace' and root_key=True "
                "(which rewrites its child tables with the column), or drop the child tables.",
            )


def commit_child_tables(spark, writer, load, root_table, root_plan: MergePlan, checkpoint) -> dict[str, dict]:
    """Commit every child table of the load (a load.staged_load.StagedLoad), before the root table's
    commit; return each table's metrics. `checkpoint` marks each table boundary for the crash tests."""
    nested: NestedBatch = load.nested
    mode = _child_mode(load.request.disposition, root_plan)
    roots = _roots_to_sync(spark, writer, load, root_table, root_plan, mode)
    metrics = {}
    for name in nested.tables:
        checkpoint(f"commit:{name}")
        rows = nested.rows.get(name)
        if rows is None:  # a child table this batch has no rows for (WD-7)
            rows = empty_rows(spark, nested.root_key)
        committed = _commit_child(spark, writer, load, name, mode, rows, roots)
        checkpoint(f"committed:{name}")
        if committed is not None:
            metrics[name] = committed
    return metrics


def _child_mode(disposition: WriteDisposition, root_plan: MergePlan) -> str:
    """How child tables change: as the root table's commit changes it."""
    if root_plan.operation is Operation.OVERWRITE and root_plan.replace_where is None:
        return "replace"
    if root_plan.operation is Operation.MERGE:  # scd2: child rows of new versions only (SCD-14)
        return "insert-only" if disposition.scd2 is not None else disposition.strategy
    # an append (also one replacing the rows of the loads it supersedes: `_plan_and_commit_child`), or the
    # first write of a merged table, or a merge without keys
    return "append"


def _roots_to_sync(spark, writer, load, root_table, root_plan: MergePlan, mode: str) -> DataFrame | None:
    """The `_dlt_id`s of the roots whose child rows the merge replaces: for delete-insert the target
    root rows it deletes; for upsert the staged roots and the target rows they update (whose ids differ
    where the table was loaded by another disposition before)."""
    staged = load.nested.staged_roots
    if mode == "delete-insert":
        key_sets = root_plan.match_any_of or (root_plan.delete_keys,)
        return _target_root_ids(spark, writer, root_table, staged, key_sets)
    if mode == "upsert":
        updated = _target_root_ids(spark, writer, root_table, staged, (load.request.hints.primary_key,))
        return staged.select(ROW_ID).unionByName(updated).distinct()
    return None


def _target_root_ids(spark, writer, root_table, staged_roots: DataFrame, key_sets) -> DataFrame:
    """The `_dlt_id` of the target root rows that match a staged row on any of the key sets."""
    columns = list(dict.fromkeys([c for key in key_sets for c in key] + [ROW_ID]))
    target = writer.read_columns(spark, root_table, columns)
    matches = [
        target.join(staged_roots.select(*cols(key)).distinct(), on=list(key), how="left_semi")
        for key in key_sets
    ]
    union = matches[0]
    for more in matches[1:]:
        union = union.unionByName(more)
    return union.select(ROW_ID).distinct()


def _commit_child(spark, writer, load, name: str, mode: str, rows: DataFrame, roots) -> dict | None:
    request = load.request
    path = table_path(request.dataset, name)
    snapshot = writer.snapshot(spark, path)
    if snapshot is not None:
        return _plan_and_commit_child(spark, writer, load, name, snapshot, mode, rows, roots)
    with creation_lock(path):  # the first commit of a table: one writer at a time
        snapshot = writer.snapshot(spark, path)
        return _plan_and_commit_child(spark, writer, load, name, snapshot, mode, rows, roots)


def _plan_and_commit_child(spark, writer, load, name, snapshot, mode, rows, roots) -> dict | None:
    request, load_id = load.request, load.load_id
    path = table_path(request.dataset, name)
    superseded = (*load.superseded, *load.interrupted) if snapshot is not None else ()
    staged = frames.materialize(_child_batch(spark, writer, snapshot, mode, rows, roots, superseded))
    plan = plan_child_commit(
        mode,
        table_exists=snapshot is not None,
        batch_empty=staged.isEmpty(),
        flagged=HARD_DELETE_FLAG in staged.columns,
        superseded=superseded,
    )
    if superseded and mode == "append":  # the batch's rows in, the superseded loads' rows out: one commit
        predicate = replace_predicate(None, load_id, superseded)
        plan = MergePlan(Operation.OVERWRITE, replace_where=predicate, reason="append replacing loads")
    if plan.operation is Operation.NOTHING:
        return None
    aligned = align_to_table(staged, snapshot.schema if snapshot else None, name, keep=plan.helper_columns)
    source = shape_source(aligned, plan)
    metadata = {
        "load_id": load_id,
        "pipeline": request.pipeline,
        "table": name,
        "root_table": request.table,
        "disposition": request.disposition.label,
        "writer": writer.name,
        "run": request.run.to_dict(),
    }
    stream = app_id(request.pipeline, name, request.run, load_id)
    commit = CommitRequest(load_id, stream, txn_version(load_id), metadata)
    result = writer.commit(spark, path, snapshot, plan, source, commit)
    if result.already_applied:  # an earlier attempt of this load committed this table
        landed = next((c for c in writer.history(path, HISTORY_DEPTH) if c.load_id == load_id), None)
        log.info("load %s: child table %s had landed already; not applied again", load_id, name)
        return {**(landed.metrics if landed else {}), "table_version": landed.version if landed else None}
    load.steps.step("commit", "child table %s: version %s", name, result.version)
    return {**result.metrics, "table_version": result.version}


def _child_batch(spark, writer, snapshot, mode: str, rows: DataFrame, roots, superseded=()) -> DataFrame:
    """The child table's staged rows for `plan_child_commit`: the batch's rows, and for delete-insert and
    upsert rows flagged as deletes (see there), among them the rows of `superseded` loads (interrupted
    attempts of the run)."""
    if mode in ("append", "replace"):
        return rows
    if mode == "insert-only":  # one row per id: scd2 batches may repeat a version
        rows = rows.dropDuplicates([ROW_ID])
        if not superseded or snapshot is None:
            return rows
    kept = rows.withColumn(HARD_DELETE_FLAG, F.lit(False))
    left_over = None
    if superseded:
        by_root = [ROOT_ID] if mode == "delete-insert" else []  # scd2's child tables have no root ids
        left_over = writer.read_columns(spark, snapshot, [ROW_ID, *by_root, LOAD_ID])
        left_over = left_over.where(F.col(LOAD_ID).isin(list(superseded)))
    if mode == "insert-only":  # the interrupted attempts' rows the batch lacks go (plan_child_commit)
        stale = left_over.select(ROW_ID).join(rows.select(ROW_ID), on=ROW_ID, how="left_anti")
        return kept.unionByName(
            stale.select(ROW_ID, F.lit(True).alias(HARD_DELETE_FLAG)), allowMissingColumns=True
        )
    if mode == "delete-insert":  # rows carrying a deleted root's id: its child rows go
        if left_over is not None:
            roots = roots.unionByName(left_over.select(F.col(ROOT_ID).alias(ROW_ID))).distinct()
        gone = roots.select(F.col(ROW_ID).alias(ROOT_ID), F.lit(True).alias(HARD_DELETE_FLAG))
        return kept.unionByName(gone, allowMissingColumns=True)
    if snapshot is None:
        return kept
    # upsert: the child rows of the synced roots (and of superseded loads) that the batch no longer has
    target = writer.read_columns(spark, snapshot, [ROW_ID, ROOT_ID])
    synced = roots.select(F.col(ROW_ID).alias(ROOT_ID))
    stale = target.join(synced, on=ROOT_ID, how="left_semi")
    if left_over is not None:
        stale = stale.select(ROW_ID).unionByName(left_over.select(ROW_ID))
    stale = stale.select(ROW_ID).distinct().join(rows.select(ROW_ID), on=ROW_ID, how="left_anti")
    return kept.unionByName(
        stale.select(ROW_ID, F.lit(True).alias(HARD_DELETE_FLAG)), allowMissingColumns=True
    )


def interrupted_loads(
    request: LoadRequest, stored: StoreSnapshot, writer, existing: tuple[str, ...]
) -> tuple:
    """The load ids of earlier attempts of this Airflow run that committed child tables (of `existing`)
    but not the root table (they stopped in between), oldest first: this attempt's child commits remove
    their rows."""
    if not request.run.in_airflow:
        return ()
    recorded = {r["load_id"] for r in stored.loads}
    found = []
    for name in existing:
        for commit in writer.history(table_path(request.dataset, name), HISTORY_DEPTH):
            meta = commit.metadata
            if (
                commit.load_id
                and commit.load_id not in recorded
                and meta.get("root_table") == request.table
                and meta.get("pipeline") == request.pipeline
                and request.run.is_same_run(meta.get("run") or {})
            ):
                found.append(commit.load_id)
    interrupted = tuple(sorted(set(found), key=float))
    if interrupted:
        log.warning(
            "load(s) %s of this run committed child tables but not %s; this attempt replaces their rows",
            ", ".join(interrupted),
            request.table,
        )
    return interrupted


def with_table_metrics(metrics: dict, root: str, result, children: dict[str, dict] | None) -> dict:
    """A load's metrics with a `tables` entry when it has child tables: each table's commit metrics
    and version, the root table first (the root table's keys stay where they were)."""
    if children is None:
        return metrics
    return {**metrics, "tables": {root: {**result.metrics, "table_version": result.version}, **children}}
