"""Loads that happened before this one asked for them: a load id loaded already, an Airflow retry whose
earlier attempt committed (plan/reruns.py), a commit Delta skipped as applied. Each returns the earlier
load's LoadInfo instead of loading again."""

from __future__ import annotations

import logging

from ..delta import recovery, store
from ..errors import ConflictError
from ..model.request import LoadRequest
from ..plan import reruns
from .load_info import LoadInfo

log = logging.getLogger(__name__)


def applied_by_another(request: LoadRequest, writer, load_id: str, stream: str) -> LoadInfo:
    """The load id committed already: a concurrent submission of it, or this load's own earlier attempt,
    whose commit landed although the writer then reported a conflict. Read the store again (recording the
    commit if nobody has) and return that load."""
    stored = store.StoreSnapshot.read(request.dataset, request.store_options)
    commits = recovery.recent_commits(request, recovery.table_history(request, writer))
    recovery.record_unrecorded_loads(stored, request, commits)
    loaded = loaded_before(request, stored, load_id)
    if loaded is None:
        raise ConflictError(
            f"Delta skipped load {load_id} as already applied (txn {stream}) but no commit of it "
            f"is in the history of {request.table_path}; nothing was written. Retry the load."
        )
    return loaded


def finish_earlier_attempt(request: LoadRequest, stored: store.StoreSnapshot, row: dict) -> LoadInfo | None:
    """An earlier attempt of this run loaded the table (`row`, its `_dlt_loads` row: plan/reruns.py's
    `load_to_finish`): this attempt returns that load instead of loading again. A load recorded from its
    commit is marked finished, so that a later re-run of the run (the task cleared) loads again; and the
    load is marked as this attempt's, so that the batches this attempt loads after it do not replace it."""
    log.warning(
        "attempt %s of run %s finishes load %s of %s, which an earlier attempt committed; nothing is "
        "applied again",
        request.run.try_number,
        request.run.run_id,
        row["load_id"],
        request.table_path,
    )
    metrics = row["metrics"] or {}
    finished = {k: v for k, v in metrics.items() if k != reruns.RECORDED_FROM_COMMIT}
    if request.run.try_number is not None:  # this attempt's from now on (plan/reruns.py)
        finished[reruns.FINISHED_BY_TRY] = request.run.try_number
    if finished != metrics:
        store.rewrite_load_metrics(stored, row["load_id"], finished)
    return loaded_before(request, stored, row["load_id"])


def already_loaded(request: LoadRequest, stored: store.StoreSnapshot) -> LoadInfo | None:
    """A request naming a load id that was loaded before returns that load: submissions are idempotent."""
    return loaded_before(request, stored, request.load_id) if request.load_id is not None else None


def loaded_before(request: LoadRequest, stored: store.StoreSnapshot, load_id: str) -> LoadInfo | None:
    row = stored.load(load_id)
    if row is None:
        return None
    log.warning("load %s was already loaded into %s; nothing is applied again", load_id, request.table_path)
    window = (
        {"start": row["window_start"], "end": row["window_end"]}
        if row["window_start"] or row["window_end"]
        else None
    )
    return LoadInfo(load_id, request.table_path, request.table, row["table_version"], row["metrics"], window)
