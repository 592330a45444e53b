"""Loads that happened before this one asked for them: a load id loaded already, an Airflow retry whose
earlier attempt committed, a commit Delta skipped as applied. Each returns the earlier load's LoadInfo
instead of loading again."""

from __future__ import annotations

import logging

from .delta import recovery, store
from .errors import ConflictError
from .load_info import LoadInfo
from .spec.request import LoadRequest

log = logging.getLogger(__name__)


def applied_by_another(request: LoadRequest, writer, load_id: str, stream: str) -> LoadInfo:
    """The load id committed already: a concurrent submission of it, or this load's own earlier attempt,
    whose commit landed although the writer then reported a conflict. Read the store again (recording the
    commit if nobody has) and return that load."""
    stored = store.StoreSnapshot.read(request.dataset, request.store_options)
    recovery.record_unrecorded_loads(stored, request, recovery.recent_commits(request, writer))
    loaded = loaded_before(request, stored, load_id)
    if loaded is None:
        raise ConflictError(
            f"Delta skipped load {load_id} as already applied (txn {stream}) but no commit of it "
            f"is in the history of {request.table_path}; nothing was written. Retry the load."
        )
    return loaded


def finish_interrupted_attempt(request: LoadRequest, recovered: list[store.LoadRecord]) -> LoadInfo | None:
    """A retry of an Airflow task whose earlier attempt committed but stopped before its load record:
    that load was just recorded from the commit, so this attempt returns it instead of loading again."""
    for record in reversed(recovered):
        if request.run.is_same_run(record.run):
            log.warning(
                "attempt %s of run %s finishes load %s, which an earlier attempt committed",
                request.run.try_number,
                request.run.run_id,
                record.load_id,
            )
            return LoadInfo(
                record.load_id,
                request.table_path,
                request.table,
                record.table_version,
                record.metrics,
                record.window,
            )
    return None


def already_loaded(request: LoadRequest, stored: store.StoreSnapshot) -> LoadInfo | None:
    """A request naming a load id that was loaded before returns that load: submissions are idempotent."""
    return loaded_before(request, stored, request.load_id) if request.load_id is not None else None


def run_loaded_before(request: LoadRequest, stored: store.StoreSnapshot, load_id: str) -> LoadInfo | None:
    """A re-run of a stateful incremental load whose run loaded the table already (plan/reruns.py)."""
    log.warning(
        "run %s (map index %s) loaded %s already as load %s; its window starts at the cursor that load "
        "moved, so this attempt returns that load",
        request.run.run_id,
        request.run.map_index,
        request.table_path,
        load_id,
    )
    return loaded_before(request, stored, load_id)


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
