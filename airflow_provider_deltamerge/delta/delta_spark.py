"""The delta-spark writer: Delta Lake's own MERGE (MergeIntoCommand) runs the MergePlan on the Spark cluster.

The translation of a plan into Delta's builder calls is in `spark_sql`; this module runs it.

Needs Delta's JVM classes in the session (see `delta_config`). Every plan becomes one commit carrying
the load's metadata as JSON in `userMetadata` (the format the delta-rs writer writes too, read by
`writer.logged_commit`) and the load's txn (txnAppId / txnVersion), which Delta enforces itself: a
commit whose txn version is already recorded is skipped, and the writer reports the load as already
applied. Writes take these as DataFrameWriter options; MERGE has no per-command options, so it gets
them as session confs. A table is a path, or a metastore name (``db.table``) where a catalog is
configured.

Every commit runs with spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS, set as a session conf
for its duration and restored after (confs are set and restored under a lock, one commit at a time per
process). Spark's default, INT96, is read as nanoseconds by pyarrow and delta-rs, so a table holding a
timestamp past 2262 (scd2's 9999-12-31 marker) would be unreadable to them and to the delta-rs writer.
On Spark Connect the conf is a session conf on the server, which we do not own: where the server does
not let sessions set it, set spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS in the server's own
conf; a session that already has that value is left alone.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import ConflictError
from ..plan.merge import MergePlan, Operation
from . import driver_log, rs_history, spark_table_metadata, unique_keys
from .delta_rs import TARGET_FILE_BYTES, counted_in_log
from .spark_sql import (
    SPARK_SQL,
    USER_METADATA_CONF,
    commit_session_conf,
    merge_builder,
    set_properties_sql,
    write_mode,
    write_options,
)
from .writer import (
    CommitRequest,
    CommitResult,
    LoggedCommit,
    TableLayout,
    commit_metadata,
    logged_commit,
    merge_metrics,
    properties_commit_metadata,
    write_commit_metrics,
)

log = logging.getLogger(__name__)

HISTORY_COLUMNS = ("version", "operation", "operationParameters", "operationMetrics", "userMetadata")

_METASTORE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*){0,2}")
_session_conf_lock = threading.Lock()


# ---- where the table is ----


@dataclass(frozen=True)
class TableRef:
    location: str  # a path / URI, or a metastore name
    by_name: bool

    @classmethod
    def parse(cls, target: str) -> TableRef:
        """`db.table` (up to three dotted identifiers, no slash) is a metastore name; anything else a path."""
        return cls(target, _METASTORE_NAME.fullmatch(target) is not None)

    def quoted_name(self) -> str:
        """A metastore name in SQL, each part quoted."""
        return ".".join(SPARK_SQL.quote(p) for p in self.location.split("."))

    @property
    def path_or_none(self) -> str | None:
        return None if self.by_name else self.location

    def sql_target(self) -> str:
        """The table in SQL: its quoted name, or delta.`path`."""
        return self.quoted_name() if self.by_name else f"delta.{SPARK_SQL.quote(self.location)}"


def load_table(delta_table_cls, spark, ref: TableRef):
    if ref.by_name:
        return delta_table_cls.forName(spark, ref.location)
    return delta_table_cls.forPath(spark, ref.location)


def table_exists(delta_table_cls, spark, ref: TableRef) -> bool:
    if ref.by_name:
        return spark.catalog.tableExists(ref.location)
    return delta_table_cls.isDeltaTable(spark, ref.location)


@contextmanager
def session_conf(spark, conf: dict[str, str]):
    """Set session confs for the duration of the block, then restore them; one block at a time per process.

    A conf the session already has at that value is left alone: a Spark Connect server may set a conf
    itself and refuse to let sessions set it.
    """
    with _session_conf_lock:
        previous = {key: spark.conf.get(key, None) for key in conf}
        changed = {key: value for key, value in conf.items() if previous[key] != value}
        try:
            for key, value in changed.items():
                spark.conf.set(key, value)
            yield
        finally:
            for key in changed:
                if previous[key] is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, previous[key])


# ---- the writer ----


@dataclass
class DeltaSparkSnapshot:
    ref: TableRef
    version: int
    schema: Any  # pyspark StructType
    frame: Any  # the table as of `version`, a Spark DataFrame
    partition_columns: tuple[str, ...] = ()
    table_id: str | None = None  # the table's Delta id (metaData.id): a recreated table has another


class DeltaSparkWriter:
    name = "delta-spark"

    def __init__(self, spark):
        self.spark = spark  # history() takes no session; the writer keeps the one it was selected for

    def snapshot(self, spark, path: str, newest: int | None = None) -> DeltaSparkSnapshot | None:
        """The table at `newest` where a read of its history just saw that version (Delta's history
        command is a Spark job of its own: asked once a load), else at the version Delta reports now."""
        from delta.tables import DeltaTable

        ref = TableRef.parse(path)
        if newest is None and not table_exists(DeltaTable, spark, ref):
            return None
        delta_table = load_table(DeltaTable, spark, ref)
        version = newest if newest is not None else _latest_version(delta_table)
        partitions, table_id = spark_table_metadata.partitions_and_id(
            spark, delta_table, ref.path_or_none, version
        )
        if ref.by_name:
            frame = spark.sql(f"SELECT * FROM {ref.quoted_name()} VERSION AS OF {version}")
        else:
            frame = spark.read.format("delta").option("versionAsOf", version).load(ref.location)
        return DeltaSparkSnapshot(ref, version, frame.schema, frame, partitions, table_id)

    def read_columns(self, spark, snapshot: DeltaSparkSnapshot, columns: list[str]):
        return snapshot.frame.select(*(SPARK_SQL.quote(c) for c in columns))

    def commit(
        self, spark, path: str, snapshot, plan: MergePlan, source, request: CommitRequest
    ) -> CommitResult:
        from delta.tables import DeltaTable

        ref = TableRef.parse(path)
        # before anything commits
        unique_keys.check_dataframe(source, plan, request.source_bytes, request.source_rows)
        read_version = snapshot.version if snapshot is not None else -1
        merging = plan.operation is Operation.MERGE
        files_removed, rows_deleted = (None, None) if merging else _overwritten_counts(spark, snapshot, plan)
        conflicts = _delta_conflicts()  # importing them before the commit lets pyspark raise them
        try:
            partitioned = bool(snapshot is not None and snapshot.partition_columns)
            with session_conf(spark, commit_session_conf(plan, request, partitioned)):
                # Checked inside `session_conf`, which lets this process commit once at a time: a load
                # of another thread that committed while this one waited has made its plan stale.
                if snapshot is not None and _planned_on_the_snapshot(plan):
                    _require_unchanged(DeltaTable, spark, ref, read_version)
                if merging:
                    merge_builder(load_table(DeltaTable, spark, ref), source, plan).execute()
                else:
                    _write(spark, ref, plan, source, request, creating=snapshot is None)
        except conflicts as exc:
            raise ConflictError(
                f"another writer changed table {path} while this load was committing; nothing was written "
                f"by this load. Retry the load. ({exc})"
            ) from exc
        entry = _find_commit(spark, ref, read_version, request.load_id)
        if entry is None:  # Delta skipped the commit: this txn version was already recorded
            log.info("load %s was already committed to %s; Delta skipped it", request.load_id, path)
            return CommitResult(read_version, {}, already_applied=True)
        if merging:
            metrics = merge_metrics(entry["operationMetrics"])
        else:
            metrics = write_commit_metrics(entry, files_removed, rows_deleted)
        return CommitResult(int(entry["version"]), metrics)

    def history(self, path: str, limit: int | None = None) -> list[LoggedCommit]:
        from delta.tables import DeltaTable

        ref = TableRef.parse(path)
        in_log = _log_on_driver(self.spark, ref)
        if in_log is not None:
            return [logged_commit(e) for e in rs_history.history(in_log, limit)]
        if not table_exists(DeltaTable, self.spark, ref):
            return []
        return [logged_commit(e) for e in _history(load_table(DeltaTable, self.spark, ref), limit)]

    def table_properties(self, spark, snapshot: DeltaSparkSnapshot) -> dict[str, str]:
        from delta.tables import DeltaTable

        table, ref = load_table(DeltaTable, spark, snapshot.ref), snapshot.ref
        return spark_table_metadata.properties(spark, table, ref.path_or_none, snapshot.version)

    def set_table_properties(self, spark, path: str, properties: dict[str, str]) -> None:
        ref = TableRef.parse(path)
        conflicts = _delta_conflicts()
        try:
            with session_conf(spark, {USER_METADATA_CONF: properties_commit_metadata(properties)}):
                spark.sql(set_properties_sql(ref.sql_target(), properties))
        except conflicts as exc:
            raise ConflictError(
                f"another writer changed table {path} while its properties were being set; retry the load. "
                f"({exc})"
            ) from exc


def _planned_on_the_snapshot(plan: MergePlan) -> bool:
    """Whether the commit takes figures or rows from the snapshot the plan was made on: an overwrite (the
    rows and files it replaces, counted there) or a merge whose source holds rows read from the table.
    Any other merge runs on the table as Delta finds it, and Delta's own conflict check decides whether
    a commit that landed meanwhile touched what it read (the partitions its condition names). A plan
    `on_snapshot` (change events filtered by tombstones read at that version) is checked likewise."""
    return plan.operation is Operation.OVERWRITE or plan.needs_target_read or plan.on_snapshot


def _write(spark, ref: TableRef, plan: MergePlan, source, request: CommitRequest, creating: bool) -> None:
    helpers = [c for c in plan.helper_columns if c in source.columns]
    rows = _in_files(source.drop(*helpers), plan.cluster_by, request)
    writer = (
        rows.write.format("delta").mode(write_mode(plan)).options(**write_options(plan, request, creating))
    )
    layout = request.layout
    if creating and layout.not_null:
        _create_with_not_null(spark, ref, rows.schema, layout, request.table_properties)
    elif creating and layout.partition_by:
        writer = writer.partitionBy(*layout.partition_by)
    if ref.by_name:
        writer.saveAsTable(ref.location)
    else:
        writer.save(ref.location)


def _in_files(rows, columns: tuple[str, ...], request: CommitRequest):
    """Rows in about TARGET_FILE_BYTES a file, as many files for the same batch whichever session
    writes them (the session's partitioning would decide otherwise, and the commit's metrics with it).
    With `columns`, ordered by them within and across files, so a later MERGE bounded by a key range
    skips the files outside it; else spread by the partition columns, one task per table partition."""
    files = max(1, math.ceil((request.source_bytes or 0) / TARGET_FILE_BYTES))
    if columns:
        quoted = [SPARK_SQL.quote(c) for c in columns]
        return rows.repartitionByRange(files, *quoted).sortWithinPartitions(*quoted)
    return rows.repartition(files, *(SPARK_SQL.quote(c) for c in request.layout.partition_by))


def _create_with_not_null(
    spark, ref: TableRef, schema, layout: TableLayout, properties: dict[str, str]
) -> None:
    """Create the table with its NOT NULL columns (and the load's table properties) before its first
    write: Delta stores every column of a DataFrame write as nullable, and only a table definition keeps
    NOT NULL. The definition is a commit of its own (no data, no load id); the load's rows follow in the
    next."""
    from delta.tables import DeltaTable
    from pyspark.sql import types as T

    fields = [T.StructField(f.name, f.dataType, f.name not in layout.not_null) for f in schema.fields]
    builder = DeltaTable.createIfNotExists(spark)
    builder = builder.tableName(ref.location) if ref.by_name else builder.location(ref.location)
    builder = builder.addColumns(T.StructType(fields))
    if layout.partition_by:
        builder = builder.partitionedBy(*layout.partition_by)
    for name, value in properties.items():
        builder = builder.property(name, value)
    builder.execute()


def _overwritten_counts(spark, snapshot, plan: MergePlan) -> tuple[int | None, int | None]:
    """(files, rows) a write removes, where Delta's WRITE metrics lack them: a full overwrite.

    Counted only for a full overwrite of an existing table, from the snapshot's Delta log (the add
    actions and their statistics), and with Spark (DESCRIBE DETAIL, a count) only where the log does not
    tell: a metastore table, a location the driver cannot read, files without statistics.
    """
    if plan.operation is Operation.WRITE or snapshot is None:
        return 0, 0
    if plan.replace_where is not None:
        return None, None  # Delta reports the files a replaceWhere removes; the rows are unknown to delta-rs
    files = rows = None
    if not snapshot.ref.by_name:
        files, rows = counted_in_log(snapshot.ref.location, snapshot.version)
    if files is None:
        from delta.tables import DeltaTable

        files = int(load_table(DeltaTable, spark, snapshot.ref).detail().select("numFiles").first()[0])
    if rows is None:
        rows = snapshot.frame.count()
    return files, rows


def _require_unchanged(delta_table_cls, spark, ref: TableRef, read_version: int) -> None:
    """The plan was made against read_version; a table that moved on since must not get it."""
    latest = _latest_version(load_table(delta_table_cls, spark, ref))
    if latest != read_version:
        raise ConflictError(
            f"table {ref.location} changed from version {read_version} to {latest} after this load read it; "
            "nothing was written by this load. Retry the load."
        )


def _latest_version(table) -> int:
    return int(table.history(1).select("version").first()[0])


def _history(table, limit: int | None) -> list[dict[str, Any]]:
    """Delta's history rows, newest first, as dicts of the columns `writer.logged_commit` reads."""
    frame = table.history(limit) if limit is not None else table.history()
    return [{c: row[c] for c in HISTORY_COLUMNS} for row in frame.select(*HISTORY_COLUMNS).collect()]


def _find_commit(spark, ref: TableRef, read_version: int, load_id: str) -> dict[str, Any] | None:
    """The commit after read_version that carries this load id, or None when Delta skipped the load.

    Only commits after read_version are read, and usually just one: the newest, this load's own; from
    the log on the driver where it reads it (`driver_log`), else from Delta's history.
    """
    in_log = _log_on_driver(spark, ref)
    if in_log is not None:
        return rs_history.find_commit(in_log, load_id, after=read_version)
    from delta.tables import DeltaTable

    table = load_table(DeltaTable, spark, ref)
    newest = _history(table, 1)[0]
    newer = int(newest["version"]) - read_version
    if newer <= 0:
        return None
    entries = [newest] if newer == 1 or _carries(newest, load_id) else _history(table, newer)
    return next((e for e in entries if _carries(e, load_id)), None)


def _log_on_driver(spark, ref: TableRef):
    """The table's log as the driver reads it (`driver_log`); None for a metastore name, or elsewhere."""
    return None if ref.by_name else driver_log.log_table(spark, ref.location)


def _carries(entry: dict[str, Any], load_id: str) -> bool:
    return commit_metadata(entry).get("load_id") == load_id


def _delta_conflicts() -> tuple[type[BaseException], ...]:
    """Delta's commit-conflict errors; importing delta.exceptions makes pyspark raise them."""
    from delta import exceptions as delta_errors

    return (
        delta_errors.DeltaConcurrentModificationException,
        delta_errors.ConcurrentWriteException,
        delta_errors.MetadataChangedException,
        delta_errors.ProtocolChangedException,
        delta_errors.ConcurrentAppendException,
        delta_errors.ConcurrentDeleteReadException,
        delta_errors.ConcurrentDeleteDeleteException,
        delta_errors.ConcurrentTransactionException,
    )
