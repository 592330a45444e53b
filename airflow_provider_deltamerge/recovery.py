"""Complete loads whose commit landed on the target table but whose state rows were never written.

The commit carries the load's id, window, counts and cursor state in its metadata, so the record can be
rebuilt from the table's history alone; nothing is applied twice.
"""

from __future__ import annotations

import logging

from . import state

log = logging.getLogger(__name__)

HISTORY_DEPTH = 25  # commits looked at; a crashed load is completed by the very next load of its table


def record_unrecorded_loads(request, writer) -> list[state.LoadRecord]:
    """Record every recent commit of this pipeline's loads that `_dlt_loads` lacks; return those records."""
    commits = [
        c
        for c in writer.history(request.table_path, HISTORY_DEPTH)
        if c.metadata.get("load_id") and c.metadata.get("pipeline") == request.pipeline_name
    ]
    if not commits:
        return []
    recorded = {
        r["load_id"] for r in state.read_loads(request.dataset, request.pipeline_name, request.table_name)
    }
    completed = []
    for commit in sorted(commits, key=lambda c: c.version):
        load_id = commit.metadata["load_id"]
        if load_id in recorded:
            continue
        log.warning(
            "load %s committed version %s of %s but was not recorded (the job stopped after its commit); "
            "recording it now, nothing is applied again",
            load_id,
            commit.version,
            request.table_path,
        )
        record = record_from_commit(commit)
        state.record_load(request.dataset, record)
        completed.append(record)
    return completed


def record_from_commit(commit) -> state.LoadRecord:
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
    return state.LoadRecord(
        load_id=meta["load_id"],
        pipeline_name=meta.get("pipeline"),
        table_name=meta.get("table"),
        table_version=commit.version,
        metrics=metrics,
        window=window,
        run=meta.get("run") or {},
        state=meta.get("state"),
    )
