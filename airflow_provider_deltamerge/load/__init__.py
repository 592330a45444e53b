"""run_load: one load, top to bottom in the order it happens, wherever it runs (local Spark,
spark-submit, Spark Connect). This module never imports Airflow.

1. request   the arguments, validated once (`model.request.LoadRequest`)
2. store     `_dlt_loads` and `_dlt_pipeline_state` read once; commits that landed unrecorded are
             recorded; a retry whose earlier attempt committed, or a load id loaded before, returns;
             a cursor state the state table lost is taken from the table's commits
3. window    the incremental window, from the run and the stored cursor state
4. extract   the batch as a DataFrame, cut to the window
5. stage     expectations checked (rows set aside: load/expectations.py), keys checked, deduplicated,
             flagged, system columns, computed once
6. plan      against the table as it is now: exactly one commit
7. commit    the companion tables' commits first (quarantined rows, child tables, tombstones, events),
             then the writer makes it, carrying the load id, window and new cursor state
8. record    the state row, then the `_dlt_loads` row
A commit that loses to another writer is planned again on the new version (steps 6-8), up to
COMMIT_ATTEMPTS times in all, after a randomised, growing pause (see `_backoff`).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time

from ..delta import recovery, store
from ..delta.child_tables import refuse_loading_a_child_table
from ..delta.locking import creation_lock
from ..delta.properties import apply_table_properties, check_table_allows_load
from ..delta.selection import select_writer
from ..delta.writer import CommitRequest, TableLayout
from ..errors import ConfigError, ConflictError
from ..model.cdc import event_metrics
from ..model.request import LoadRequest
from ..model.run import app_id, new_load_id, txn_version
from ..model.sources import is_change_feed
from ..model.storage import hadoop_settings
from ..plan import reruns
from ..plan.merge import Operation, SourceShape
from ..plan.pruning import bounded
from ..spark import scd2_history
from ..spark.extract import check_data, source_reader
from ..spark.held import held_for_load
from ..spark.schema_steps import shape_to_schema
from ..spark.stage import shape_source
from ..spark.storage import set_hadoop_settings
from ..spark.window_steps import filter_to_window, open_load_window, record_empty_window, replace_where_for
from . import (
    catalog_load,
    child_expectations,
    earlier_loads,
    expectations,
    insert_only,
    nested_tables,
    planning,
    records,
    staged_arrow,
    staging,
    table_identity,
    tombstones,
    tracked_history,
    truncates,
)
from .batch_writer import writer_for_batch
from .change_feed_source import FeedReader
from .load_info import LoadInfo
from .staged_load import StagedLoad
from .step_log import (
    StepLog,
    describe_commit,
    describe_expectations,
    describe_plan,
    describe_source,
    describe_window,
)

log = logging.getLogger(__name__)

# Another writer committed first: plan again on the new version, up to this many attempts in all. Each
# failed attempt of a load was beaten by a different commit (one that landed after the load's newest
# snapshot), so N loads committing to one table at the same moment all land within N attempts: this bound
# covers a dozen. The pauses between attempts grow and are random (`_backoff`), to spread them out.
COMMIT_ATTEMPTS = 12
_BACKOFF_SECONDS = 0.2  # the longest pause before the second attempt; it doubles with each attempt
_BACKOFF_LIMIT_SECONDS = 5.0


def checkpoint(step: str) -> None:
    """A named step of a load (see STEPS in the crash tests); does nothing. Tests replace it to stop a
    load there and prove that nothing is half-applied."""


def run_load(data, *, spark=None, **arguments) -> LoadInfo:
    """Load `data` (a DataFrame, a list of dicts, or a callable (spark, window) -> DataFrame) into Delta.

    `arguments` are LoadRequest's (see `LoadRequest.create`); `spark` defaults to one shared local session.
    A dataset on an object store (``s3://``, ``az://``, ``abfss://``, ``gs://``) takes its credentials from
    ``storage_options`` (delta-rs option names, see docs/STORAGE.md), else from the environment.
    """
    request = LoadRequest.create(**arguments)
    if spark is None:
        from ..spark.session import default_session

        spark = default_session()
    return execute(spark, request, data)


def run_request(request: LoadRequest, spark) -> LoadInfo:
    """Run a request that names its source (as the hook and the spark-submit job do)."""
    if request.source is None:
        raise ConfigError("source", "is required to run a request without data in hand")
    if is_change_feed(request.source):
        return execute(spark, request, FeedReader(request))
    return execute(spark, request, source_reader(request.source))


def execute(spark, request: LoadRequest, data) -> LoadInfo:
    """The load; a table named through a catalog placed at its folder first, and its tables registered
    in the catalog (load/catalog_load.py)."""
    check_data(data)
    with held_for_load():  # what the load kept in Spark's cache, released when it ends
        if not request.target.in_catalog:
            return _execute(spark, request, data)
        writer = select_writer(request.backend, spark, None)
        run = lambda placed: _execute(spark, placed, data)  # noqa: E731
        return catalog_load.load_by_name(spark, request, writer.name, run, checkpoint)


def _execute(spark, request: LoadRequest, data) -> LoadInfo:
    steps = StepLog(request.table)
    set_hadoop_settings(spark, hadoop_settings(request.dataset, request.storage_options))
    writer = select_writer(request.backend, spark, request.store_options, table_path=request.table_path)
    refuse_loading_a_child_table(request.dataset, request.table, writer.history)
    stored = store.StoreSnapshot.read(request.dataset, request.store_options)
    history = recovery.table_history(request, writer)
    commits = recovery.recent_commits(request, history)
    recovered = recovery.record_unrecorded_loads(stored, request, commits)
    steps.step(
        "store",
        "%d loads recorded in %s; %d committed unrecorded",
        len(stored.loads),
        request.dataset,
        len(recovered),
    )
    finished = earlier_loads.already_loaded(request, stored)
    if finished is not None:
        return finished
    recorded = stored.loads_of(request.pipeline, request.table)
    siblings = reruns.sibling_loads(request.run, recorded, commits)
    reruns.refuse_replacing_siblings(request.run, request.disposition, request.table, siblings)
    earlier = reruns.earlier_loads_of_run(request.run, recorded)
    table = writer.snapshot(spark, request.table_path, recovery.newest_version(history))
    table_identity.check_same_table(stored, request, table, writer, commits)
    child_tables = nested_tables.child_tables_on_storage(request)
    load_id, interrupted = _load_id(request, stored, writer, child_tables)
    opened = _open_window(request, table, _cursor_state(request, stored, commits), data)
    to_finish = reruns.load_to_finish(request.disposition, earlier, opened.window if opened else None)
    if to_finish is not None:
        return earlier_loads.finish_earlier_attempt(request, stored, to_finish)
    replaces_window = replace_where_for(request, opened.window if opened else None) is not None
    check_table_allows_load(spark, writer, request, table, replaces_window)
    checkpoint("extract")
    batch = staging.extract(spark, data, request, opened.window if opened else None, table, commits)
    steps.step("source", "%s", describe_source(request.source, data))
    batch, opened, new_state = filter_to_window(batch, request, opened)
    window = opened.window if opened else None
    steps.step("window", "%s", describe_window(window))
    batch, schema = shape_to_schema(batch, request, table, commits)
    writer, table = writer_for_batch(spark, request, writer, table, batch)
    replace_where = replace_where_for(request, window)
    collect = staged_arrow.staging_collection(
        spark, writer, request, batch, table, replace_where, child_tables
    )
    # rows set aside before dedup and planning; on the driver where staging collects every row as it is
    batch, checks = expectations.check(batch, request, collect, table, child_tables)
    nested_tables.check_child_expectations(request, batch, child_tables)
    checkpoint("stage")
    staged = staging.stage(request, batch, table, load_id, schema, collect, checks)
    expected = expectations.outcome(checks, staged.rows_extracted, request)  # a `fail` refused here
    staged, nested = nested_tables.split_nested(
        spark, writer, request, staged, child_tables, load_id, replace_where, table is not None
    )
    steps.step(
        "stage",
        "%s rows read, %s staged (dedup, hard deletes, checks)",
        f"{staged.rows_extracted:,}",
        f"{staged.rows_staged:,}",
    )
    if checks is not None:
        steps.step("expect", "%s", describe_expectations(expected.metrics))
    child_expectations.log_counts(steps, nested)
    superseded = reruns.superseded_load_ids(request.disposition, earlier, window)
    load = StagedLoad(
        request,
        load_id,
        staged,
        window,
        new_state,
        stored,
        steps,
        schema,
        nested,
        superseded,
        interrupted,
        expected,
    )
    table, properties_set = apply_table_properties(spark, writer, request, table)
    if properties_set:
        steps.step("properties", "set %s", properties_set)
    attempt = 1
    while True:
        try:
            if table is not None:
                return _plan_and_commit(spark, writer, table, load)
            with creation_lock(request.table_path):  # the first commit of a table: one writer at a time
                table, _ = apply_table_properties(
                    spark, writer, request, writer.snapshot(spark, request.table_path)
                )
                return _plan_and_commit(spark, writer, table, load)
        except ConflictError as conflict:
            if attempt == COMMIT_ATTEMPTS:
                raise
            attempt += 1
            pause = _backoff(attempt)
            log.warning(
                "load %s: %s; planning again on the new version in %.1f s (attempt %d of %d)",
                load_id,
                conflict,
                pause,
                attempt,
                COMMIT_ATTEMPTS,
            )
            time.sleep(pause)
            table = writer.snapshot(spark, request.table_path)


def _load_id(request: LoadRequest, stored: store.StoreSnapshot, writer, child_tables) -> tuple[str, tuple]:
    """The load's id, and the attempts of its run that committed child tables only (`nested_tables`): a
    new id, after theirs too (Delta's txn versions of one stream only grow), unless the request names
    one."""
    if request.load_id:
        return request.load_id, ()
    interrupted = nested_tables.interrupted_loads(request, stored, writer, child_tables)
    newest = max([stored.newest_load_id() or "0", *interrupted], key=float)
    return new_load_id(after=newest), interrupted


def _backoff(attempt: int) -> float:
    """Seconds to wait before `attempt` (2, 3, ...): up to a limit that doubles with each attempt, at
    least half of it, the rest random, so that loads which collided do not collide again in step."""
    limit = min(_BACKOFF_LIMIT_SECONDS, _BACKOFF_SECONDS * 2 ** (attempt - 2))
    return random.uniform(limit / 2, limit)


def _open_window(request: LoadRequest, table, stored_state: dict | None, data):
    """The load's window: in upstream versions for a change feed (load/change_feed_source.py)."""
    if isinstance(data, FeedReader):
        return data.open_window(stored_state)
    return open_load_window(request, table, stored_state)


def _cursor_state(request: LoadRequest, stored: store.StoreSnapshot, commits) -> dict | None:
    """The table's stored cursor state, for an incremental load that starts from it (a replace load
    starts from initial_value every time); rebuilt from the table's commits where the state table lost
    it, refused where it is lost and earlier incremental loads are recorded (`recovery.cursor_state`)."""
    if request.cursor is None or request.disposition.disposition == "replace":
        return None
    return recovery.cursor_state(stored, request.pipeline, request.table, commits)


def _plan_and_commit(spark, writer, table, load: StagedLoad) -> LoadInfo:
    """Plan against the table as it is now, make the one commit, record the load."""
    request, load_id, window = load.request, load.load_id, load.window_dict
    staged = load.staged  # change events: less those older than their key's tombstone (tombstones)
    events = tombstones.against_tombstones(spark, writer, request, staged, load_id, load.stored)
    staged = events.staged if events is not None else staged
    kept = tracked_history.with_kept_events(spark, writer, request, staged, load_id, load.stored)
    staged = kept.staged if kept is not None else staged  # tracked columns: and their keys' kept events
    truncate = events.truncate if events is not None else None  # a truncate event newer than the table's
    staged, plan = planning.plan_commit(
        spark, staged, request, table, load_id, _replace_where(writer, load), truncate
    )
    plan = expectations.record_set_aside(record_empty_window(plan, load.window), load.expected)
    plan = bounded(plan, staged.key_ranges)
    base_metrics = {
        "table": request.table,
        "rows_extracted": staged.rows_extracted,
        "rows_staged": staged.rows_staged,
        **load.schema.metrics,
        "writer": writer.name,
        table_identity.TABLE_ID: getattr(table, "table_id", None),
        **reruns.map_index_metrics(request.run),
        **({"replaced_load_ids": list(load.superseded)} if load.superseded else {}),
        **(load.expected.metrics if load.expected is not None else {}),
        **child_expectations.metrics(load.nested),
    }
    load.steps.step("plan", "%s", describe_plan(plan))
    child_expectations.commit_all_quarantines(writer, request, load, checkpoint)  # before the table's
    if plan.operation is Operation.NOTHING:
        version = table.version if table is not None else None
        metrics = {**base_metrics, "load_id": None, "table_version": version}
        return LoadInfo(None, request.table_path, request.table, version, metrics, window)
    checkpoint("plan")
    target_keys = (
        writer.read_columns(spark, table, planning.target_columns(plan, table))
        if plan.needs_target_read
        else None
    )
    rebuilt = None  # tracked columns: the batch's keys' histories rebuilt (spark/scd2_history.py)
    if staged.arrow is not None:
        source = staged_arrow.source_rows(staged.arrow, plan)
    elif plan.source is SourceShape.SCD2_HISTORY:
        rebuilt = tracked_history.rebuilt(staged.df, target_keys, plan, request, load_id)
        source = scd2_history.merge_source(rebuilt, plan.operation is Operation.MERGE)
    else:
        source = shape_source(staged.df, plan, target_keys)
    metadata = {
        **records.commit_metadata(request, load_id, base_metrics, window),
        "state": load.new_state,
        "columns": load.schema.columns,
    }
    if load.nested is not None:
        insert_only.check_before_child_tables(spark, writer, table, plan, source)
        metadata["tables"] = nested_tables.commit_child_tables(spark, writer, load, table, plan, checkpoint)
    stream = app_id(request.pipeline, request.table, request.run, load_id)
    commit = CommitRequest(
        load_id,
        stream,
        txn_version(load_id),
        metadata,
        table_properties=request.table_properties or {},
        source_bytes=staged.arrow_bytes or None,
        source_rows=staged.rows_staged,
        layout=TableLayout(load.schema.partition_by, load.schema.not_null),
    )
    scd2_counts = planning.scd2_event_counts(request, plan, source, staged.df, rebuilt)
    truncated = truncates.truncate_metrics(spark, writer, table, staged, truncate, request)
    tombstone_metrics = {}
    if events is not None:  # before the table's commit, the load's commit point
        tombstone_metrics = tombstones.commit_tombstones(events, request, load_id)
        checkpoint("after_tombstones")
    if kept is not None and rebuilt is not None:  # also before the table's commit
        tracked_history.commit_kept_events(kept, rebuilt.events_to_keep, request, load_id)
        checkpoint("after_events")
    if scd2_counts is not None:  # scd2's deletes applied: those remembered for the first time
        scd2_counts = dataclasses.replace(
            scd2_counts, deletes=tombstone_metrics.get("numTombstonesWritten", 0)
        )
    checkpoint("commit")
    result = insert_only.commit(spark, writer, request.table_path, table, plan, source, commit)
    if result.already_applied:  # this load id committed already: see earlier_loads.applied_by_another
        return earlier_loads.applied_by_another(request, writer, load_id, stream)
    checkpoint("after_commit")
    load.steps.step("commit", "%s", describe_commit(result.version, result.metrics))
    if table is None:  # the load created the table: its id is known now
        created = writer.snapshot(spark, request.table_path)
        base_metrics[table_identity.TABLE_ID] = getattr(created, "table_id", None)
    metrics = {
        **result.metrics,
        **event_metrics(request.hints, staged.rows_extracted, result.metrics, scd2_counts, truncated),
        **tombstone_metrics,
        **base_metrics,
        "load_id": load_id,
        "table_version": result.version,
        "window_start": (window or {}).get("start"),
        "window_end": (window or {}).get("end"),
    }
    metrics = nested_tables.with_table_metrics(metrics, request.table, result, metadata.get("tables"))
    record = store.LoadRecord(
        load_id,
        request.pipeline,
        request.table,
        result.version,
        metrics,
        window,
        request.run.to_dict(),
        load.new_state,
        load.schema.columns,
    )
    records.write_record(store.write_state_row, load.stored, record, request.table_path)
    checkpoint("after_state_row")
    records.write_record(store.write_load_row, load.stored, record, request.table_path)
    load.steps.step("record", "load %s recorded in %s", load_id, store.LOADS_TABLE)
    log.debug("load %s metrics: %s", load_id, metrics)
    return LoadInfo(load_id, request.table_path, request.table, result.version, metrics, window)


def _replace_where(writer, load: StagedLoad):
    """The rows an append replaces: its window's (but those of mapped instances of the same run, read
    from the table's newest commits too, so a sibling that has not recorded itself is seen) and those
    of the loads it supersedes (plan/reruns.py)."""
    request = load.request
    window_rows = replace_where_for(request, load.window)
    siblings = ()
    if window_rows is not None and request.run.map_index is not None:
        siblings = reruns.sibling_load_ids(
            request.run,
            load.stored.loads_of(request.pipeline, request.table),
            writer.history(request.table_path, store.HISTORY_DEPTH),
        )
    return reruns.replace_predicate(window_rows, load.load_id, load.superseded, siblings)
