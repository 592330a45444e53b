"""What every Delta writer provides, and the pieces they share: the commit metadata format (one writer,
one reader of it) and the metric names of a commit, read from the history either writer leaves."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..plan.merge import MergePlan

METADATA_PREFIX = "deltamerge."
USER_METADATA = "userMetadata"  # commitInfo's own free-text field, which Delta Lake writes and reads

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

# A WRITE's operationMetrics as Delta names them (values) and as delta-rs does (keys).
WRITE_METRICS_FROM_DELTA_RS = {
    "num_added_rows": "numOutputRows",
    "num_added_files": "numFiles",
    "num_removed_files": "numRemovedFiles",
}


def merge_metrics(raw: dict[str, Any]) -> dict[str, int]:
    """A MERGE's metrics, as delta-rs or Delta reports them, under Delta's names as ints."""
    named = {MERGE_METRICS_FROM_DELTA_RS.get(name, name): value for name, value in raw.items()}
    return {name: int(named[name]) for name in MERGE_METRIC_NAMES if name in named}


@dataclass(frozen=True)
class TableLayout:
    """How a table is created by its first commit: its partition columns and its NOT NULL columns.
    Later commits keep the table's own layout (NOT NULL columns stay NOT NULL)."""

    partition_by: tuple[str, ...] = ()
    not_null: tuple[str, ...] = ()


@dataclass(frozen=True)
class CommitRequest:
    """What a commit carries besides its data: the load's identity, its metadata, a new table's layout."""

    load_id: str
    app_id: str  # the txn stream (model.run.app_id): the Airflow task run, or outside Airflow the load
    txn_version: int
    metadata: dict[str, Any] = field(default_factory=dict)  # keys without the prefix
    table_properties: dict[str, str] = field(default_factory=dict)  # given to a table this commit creates
    source_bytes: int | None = None  # the staged batch's Arrow size, estimated while staging
    source_rows: int | None = None  # the staged batch's rows, counted while staging
    layout: TableLayout = TableLayout()

    def user_metadata(self) -> str:
        """The commit's metadata as both writers record it: one JSON object of prefixed keys, the text of
        commitInfo's `userMetadata`, which Delta Lake's and delta-rs's history both return."""
        prefixed = {METADATA_PREFIX + k: v for k, v in self.metadata.items()}
        return json.dumps(prefixed, sort_keys=True, default=str)


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

    @property
    def load_id(self) -> str | None:
        """The load this commit belongs to; None for a commit no load of ours made."""
        return self.metadata.get("load_id")


class TableSnapshot(Protocol):
    version: int
    schema: Any  # pyspark StructType of the table
    partition_columns: tuple[str, ...]
    table_id: str | None  # the table's Delta id (metaData.id)


class DeltaWriter(Protocol):
    name: str

    def snapshot(self, spark, path: str, newest: int | None = None) -> TableSnapshot | None:
        """The table as of now, pinned for the commit; None when there is no table yet. `newest`: the
        table's version as a read of its history just made saw it, which a writer may pin instead of
        asking the table again (a commit since is then a conflict its commit finds, as ever)."""

    def read_columns(self, spark, snapshot: TableSnapshot, columns: list[str]):
        """A Spark DataFrame of the given columns of the pinned snapshot."""

    def commit(
        self, spark, path: str, snapshot, plan: MergePlan, source, request: CommitRequest
    ) -> CommitResult:
        """Make the plan's one commit with the source DataFrame."""

    def history(self, path: str, limit: int | None = None) -> list[LoggedCommit]:
        """Newest first."""

    def table_properties(self, spark, snapshot) -> dict[str, str]:
        """The table properties of the pinned snapshot."""

    def set_table_properties(self, spark, path: str, properties: dict[str, str]) -> None:
        """One metadata commit that sets these properties (see `properties_commit_metadata`)."""


def properties_commit_metadata(properties: dict[str, str]) -> str:
    """The userMetadata of a commit that sets table properties: ours, and no load's (no load id)."""
    return CommitRequest(
        "", "", 0, {"operation": "set table properties", "properties": properties}
    ).user_metadata()


# ---- reading a history entry, whichever writer made the commit ----


def commit_metadata(entry: dict[str, Any]) -> dict[str, Any]:
    """Our metadata of one history entry (a commitInfo as delta-rs or Delta's history returns it),
    prefix removed; empty for a commit no load of ours made.

    Read from the JSON in `userMetadata`, where both writers put it. Commits of earlier releases of the
    delta-rs writer carry the keys at the top level of commitInfo instead; they are read too, where the
    reader shows them (delta-rs's history does, Delta's own history() shows only userMetadata).
    """
    recorded = _prefix_removed(_parsed_user_metadata(entry.get(USER_METADATA)))
    return recorded or _prefix_removed(entry)


def _parsed_user_metadata(text: Any) -> dict[str, Any]:
    """userMetadata as a dict; empty when absent or not a JSON object (another writer's free text)."""
    if not isinstance(text, str) or not text:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _prefix_removed(keys: dict[str, Any]) -> dict[str, Any]:
    n = len(METADATA_PREFIX)
    return {k[n:]: v for k, v in keys.items() if k.startswith(METADATA_PREFIX)}


def logged_commit(entry: dict[str, Any]) -> LoggedCommit:
    """One history entry, from delta-rs's `DeltaTable.history()` or a row of Delta's, as the state layer
    reads it: the same metadata and metric names whichever writer made the commit."""
    operation = str(entry.get("operation"))
    if operation == "MERGE":
        metrics = merge_metrics(entry.get("operationMetrics") or {})
    else:
        metrics = write_commit_metrics(entry)
    return LoggedCommit(int(entry["version"]), operation, commit_metadata(entry), metrics)


def write_commit_metrics(
    entry: dict[str, Any], files_removed: int | None = None, rows_deleted: int | None = None
) -> dict[str, int]:
    """A WRITE commit's metrics under MERGE names, from its operationMetrics in either writer's names.

    An append removes nothing. Delta records the files an overwrite removes only for replaceWhere
    writes, and neither writer records the rows; `files_removed` and `rows_deleted` fill them in where
    they were counted before the write. A count nobody knows is left out, never invented.
    """
    raw = {WRITE_METRICS_FROM_DELTA_RS.get(k, k): v for k, v in (entry.get("operationMetrics") or {}).items()}
    appended = _appends(entry)
    if "numRemovedFiles" in raw:
        files_removed = int(raw["numRemovedFiles"])
    elif appended:
        files_removed = 0
    rows, files = int(raw.get("numOutputRows", 0)), int(raw.get("numFiles", 0))
    metrics = write_metrics(rows, files, files_removed or 0, 0 if appended else rows_deleted)
    if files_removed is None:
        del metrics["numTargetFilesRemoved"]
    return metrics


def _appends(entry: dict[str, Any]) -> bool:
    """Whether a write commit only added data: an append, or the first write of a table."""
    mode = (entry.get("operationParameters") or {}).get("mode")
    return mode in ("Append", "ErrorIfExists") or str(entry.get("operation")).startswith("CREATE TABLE")


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
