"""What every Delta writer provides, and the pieces they share: commit metadata and metric names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..plan.merge import MergePlan

METADATA_PREFIX = "deltamerge."

# Delta's own MERGE metric names (values), and delta-rs's names for them (keys); the metrics dict of
# every load uses Delta's names, and only these: both writers report the same names for the same load.
MERGE_METRICS_FROM_DELTA_RS = {
    "num_source_rows": "numSourceRows",
    "num_target_rows_inserted": "numTargetRowsInserted",
    "num_target_rows_updated": "numTargetRowsUpdated",
    "num_target_rows_deleted": "numTargetRowsDeleted",
    "num_target_rows_copied": "numTargetRowsCopied",
    "num_output_rows": "numOutputRows",
    "num_target_files_added": "numTargetFilesAdded",
    "num_target_files_removed": "numTargetFilesRemoved",
    "execution_time_ms": "executionTimeMs",
    "scan_time_ms": "scanTimeMs",
    "rewrite_time_ms": "rewriteTimeMs",
}

MERGE_METRIC_NAMES = tuple(MERGE_METRICS_FROM_DELTA_RS.values())


def merge_metrics(raw: dict[str, Any]) -> dict[str, int]:
    """A MERGE's metrics, as delta-rs or Delta reports them, under Delta's names as ints."""
    named = {MERGE_METRICS_FROM_DELTA_RS.get(name, name): value for name, value in raw.items()}
    return {name: int(named[name]) for name in MERGE_METRIC_NAMES if name in named}


@dataclass(frozen=True)
class CommitRequest:
    """What a commit carries besides its data: the load's identity and its metadata."""

    load_id: str
    app_id: str  # one per pipeline and table; its txn version only grows
    txn_version: int
    metadata: dict[str, Any] = field(default_factory=dict)  # keys without the prefix

    def custom_metadata(self) -> dict[str, Any]:
        return {METADATA_PREFIX + k: v for k, v in self.metadata.items()}


@dataclass(frozen=True)
class CommitResult:
    version: int  # table version after the load
    metrics: dict[str, int]  # Delta metric names
    already_applied: bool = False  # the txn version showed this load had landed before


@dataclass(frozen=True)
class LoggedCommit:
    """One commit of the table's history, as the state layer needs it."""

    version: int
    operation: str
    metadata: dict[str, Any]  # our keys, prefix removed
    metrics: dict[str, int]  # Delta metric names


class TableSnapshot(Protocol):
    version: int
    schema: Any  # pyspark StructType of the table


class DeltaWriter(Protocol):
    name: str

    def snapshot(self, spark, path: str) -> TableSnapshot | None:
        """The table as of now, pinned for the commit; None when there is no table yet."""

    def read_columns(self, spark, snapshot: TableSnapshot, columns: list[str]):
        """A Spark DataFrame of the given columns of the pinned snapshot."""

    def commit(
        self, spark, path: str, snapshot, plan: MergePlan, source, request: CommitRequest
    ) -> CommitResult:
        """Make the plan's one commit with the source DataFrame."""

    def history(self, path: str, limit: int | None = None) -> list[LoggedCommit]:
        """Newest first."""


def our_metadata(commit_info: dict[str, Any]) -> dict[str, Any]:
    """The deltamerge keys of a commitInfo, prefix removed."""
    n = len(METADATA_PREFIX)
    return {k[n:]: v for k, v in commit_info.items() if k.startswith(METADATA_PREFIX)}


def write_metrics(
    rows_written: int, files_added: int, files_removed: int, rows_deleted: int | None
) -> dict[str, int]:
    """Metrics of a plain write or overwrite, under Delta's MERGE names, so every load reads alike."""
    metrics = {
        "numSourceRows": rows_written,
        "numTargetRowsInserted": rows_written,
        "numTargetRowsUpdated": 0,
        "numOutputRows": rows_written,
        "numTargetFilesAdded": files_added,
        "numTargetFilesRemoved": files_removed,
    }
    if rows_deleted is not None:
        metrics["numTargetRowsDeleted"] = rows_deleted
    return metrics
