"""What a load's commit carries and what records it: the commit's metadata (load id, window, run, counts),
and each write of the committed load's record, whose failure says the batch is committed and how the
load is finished (LoadNotRecordedError).
"""

from __future__ import annotations

from typing import Any

from ..delta import store
from ..errors import LoadNotRecordedError
from ..model.expectations import QUALITY_METRICS
from ..model.request import LoadRequest


def write_record(write, stored: store.StoreSnapshot, record: store.LoadRecord, table_path: str) -> None:
    """One write of a committed load's record; whatever stops it, the error says that the batch is
    committed and how the load is finished."""
    try:
        write(stored, record)
    except Exception as exc:
        path = getattr(exc, "path", stored.dataset)
        problem = getattr(exc, "problem", None) or f"{type(exc).__name__}: {exc}"
        raise LoadNotRecordedError(path, record.load_id, table_path, record.table_version, problem) from exc


def commit_metadata(request: LoadRequest, load_id: str, base_metrics: dict, window) -> dict[str, Any]:
    return {
        "load_id": load_id,
        "pipeline": request.pipeline,
        "table": request.table,
        "disposition": request.disposition.label,
        "rows_extracted": base_metrics["rows_extracted"],
        "rows_staged": base_metrics["rows_staged"],
        "writer": base_metrics["writer"],
        "window": window,
        "run": request.run.to_dict(),
        "replaced_load_ids": base_metrics.get("replaced_load_ids"),
        "quality": {k: base_metrics[k] for k in QUALITY_METRICS if k in base_metrics} or None,
    }
