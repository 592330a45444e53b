"""Recovery from the target table's own commits: loads whose commit landed but whose rows in the
state tables were never written are recorded from the commit's metadata, and a cursor state the state
table lost is rebuilt from the newest commit that carries it (or the load is refused). Nothing is
applied twice: the target table's commit is the source of truth, the state tables its index.
"""

from __future__ import annotations

import json
import logging

from ..errors import StoreError
from ..model.naming import LOAD_ID
from ..plan.reruns import RECORDED_FROM_COMMIT
from .store import (
    HISTORY_DEPTH,
    LOADS_TABLE,
    STATE_TABLE,
    LoadRecord,
    StoreSnapshot,
    read_commits,
    record_load,
    state_path,
)
from .txn_evidence import unrecorded_attempt
from .writer import LoggedCommit

log = logging.getLogger(__name__)


def table_history(request, writer) -> list[LoggedCommit]:
    """The newest HISTORY_DEPTH commits of the request's table, newest first: the one read of the table's
    history a load makes before its commit, for recovery, the cursor state and the version it plans on.
    `request` is a LoadRequest, `writer` the load's Delta writer."""
    return writer.history(request.table_path, HISTORY_DEPTH)


def recent_commits(request, history: list[LoggedCommit]) -> list[LoggedCommit]:
    """The commits of this pipeline's loads among `history` (see `table_history`), newest first."""
    return [c for c in history if c.load_id and c.metadata.get("pipeline") == request.pipeline]


def newest_version(history: list[LoggedCommit]) -> int | None:
    """The table's version as `history` (see `table_history`) saw it; None where it saw no table."""
    return history[0].version if history else None


def record_unrecorded_loads(snapshot: StoreSnapshot, request, commits) -> list[LoadRecord]:
    """Record each of `commits` (see `recent_commits`) that the snapshot lacks; return those records.

    A commit is unrecorded because its job stopped after it, or because its load, running at the same
    time as this one, is recording it right now: either way it is recorded here from its metadata, and
    the two records of a running load end up as one row (`state_table.write_row`).
    """
    recorded = {r["load_id"] for r in snapshot.loads_of(request.pipeline, request.table)}
    history = lambda: read_commits(request.table_path, None, request.store_options)  # noqa: E731
    commits = [*commits, *unrecorded_attempt(snapshot, request, commits, history)]
    completed = []
    for commit in sorted(commits, key=lambda c: c.version):
        if commit.load_id in recorded:
            continue
        log.warning(
            "load %s committed version %s of %s but is not recorded (its job stopped after the commit, or "
            "is recording it now); recording it from the commit, nothing is applied again",
            commit.load_id,
            commit.version,
            request.table_path,
        )
        record = record_from_commit(commit)
        record_load(snapshot, record, replace=False)
        completed.append(record)
    return completed


def cursor_state(snapshot: StoreSnapshot, pipeline_name: str, table_name: str, commits) -> dict | None:
    """The table's newest cursor state, from `_dlt_pipeline_state` or, where that lacks it, from the
    table's own commits.

    Every data commit carries its load's new cursor state, so where the state table was deleted, emptied
    or lost its newest rows, the state is that of the newest of `commits` (see `recent_commits`; nothing
    more is read), when its load is newer than the newest stored state; the load then stores the state on
    with its own state row. Where neither holds a state but `_dlt_loads` shows earlier incremental loads
    of the table, StoreError: starting again from initial_value would load their rows a second time.
    """
    row = snapshot.latest_state_row(pipeline_name, table_name)
    carrying = [c for c in commits if c.metadata.get("state")]
    newest = max(carrying, key=lambda c: float(c.load_id), default=None)
    if newest is not None and (row is None or float(newest.load_id) > float(row[LOAD_ID])):
        log.warning(
            "%s lacks the newest cursor state of table %s of pipeline %s; rebuilt it from commit %s "
            "(load %s), and this load stores it again",
            STATE_TABLE,
            table_name,
            pipeline_name,
            newest.version,
            newest.load_id,
        )
        return newest.metadata["state"]
    if row is None:
        _refuse_lost_state(snapshot, pipeline_name, table_name)
        return None
    return json.loads(row["state"])


def _refuse_lost_state(snapshot: StoreSnapshot, pipeline_name: str, table_name: str) -> None:
    """StoreError where `_dlt_loads` shows incremental loads of the table: rows with a window bound. (A
    table's first incremental load without initial_value has none, so a table loaded only once that way
    is not told apart from one never loaded incrementally.)"""
    windowed = [
        r
        for r in snapshot.loads_of(pipeline_name, table_name)
        if r["window_start"] is not None or r["window_end"] is not None
    ]
    if not windowed:
        return
    newest = windowed[-1]
    raise StoreError(
        state_path(snapshot.dataset),
        f"holds no cursor state of table {table_name!r} of pipeline {pipeline_name!r}, and none of the "
        f"table's newest {HISTORY_DEPTH} commits carries one, but {LOADS_TABLE} records {len(windowed)} "
        f"incremental load(s) of it (the newest: {newest['load_id']}, window {newest['window_start']} .. "
        f"{newest['window_end']}). Starting again from initial_value would load their rows twice, so "
        f"nothing was loaded. Restore {STATE_TABLE} (from a backup, or with Delta's RESTORE if it was "
        f"emptied); to load from initial_value again on purpose, delete the table's rows from {LOADS_TABLE}.",
    )


def record_from_commit(commit) -> LoadRecord:
    meta = commit.metadata
    window = meta.get("window") or None
    metrics = {
        **commit.metrics,
        "load_id": meta["load_id"],
        "table": meta.get("table"),
        "table_version": commit.version,
        "rows_extracted": meta.get("rows_extracted"),
        "rows_staged": meta.get("rows_staged"),
        "writer": meta.get("writer"),
        "window_start": (window or {}).get("start"),
        "window_end": (window or {}).get("end"),
    }
    map_index = (meta.get("run") or {}).get("map_index")
    if map_index is not None:  # as the load's own metrics keep it (plan/reruns.py)
        metrics["map_index"] = map_index
    metrics[RECORDED_FROM_COMMIT] = True  # its attempt stopped first: a retry finishes it
    if meta.get("replaced_load_ids"):
        metrics["replaced_load_ids"] = meta["replaced_load_ids"]
    metrics.update(meta.get("quality") or {})  # the counts of its expectations (model/expectations.py)
    if meta.get("tables") is not None:  # a load with child tables: each table's commit metrics
        root = {**commit.metrics, "table_version": commit.version}
        metrics["tables"] = {meta.get("table"): root, **meta["tables"]}
    return LoadRecord(
        load_id=meta["load_id"],
        pipeline_name=meta.get("pipeline"),
        table_name=meta.get("table"),
        table_version=commit.version,
        metrics=metrics,
        window=window,
        run=meta.get("run") or {},
        state=meta.get("state"),
        columns=meta.get("columns"),
    )
