"""The delta-spark writer: Delta Lake's own MERGE (MergeIntoCommand) runs the MergePlan on the Spark cluster.

The translation of a plan into Delta's builder calls is in `spark_sql`; this module runs it.

Needs Delta's JVM classes in the session (see `delta_config`). Every plan becomes one commit carrying
the load's metadata as JSON in `userMetadata` and the load's txn (txnAppId / txnVersion), which Delta
enforces itself: a commit whose txn version is already recorded is skipped, and the writer reports the
load as already applied. Writes take these as DataFrameWriter options; MERGE has no per-command options,
so it gets them as session confs, set and restored under a lock. A table is a path, or a metastore
name (``db.table``) where a catalog is configured.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import ConflictError
from ..plan.merge import MergePlan, Operation
from ..spec.delta_jars import DELTA_CATALOG, DELTA_EXTENSION
from .spark_sql import (
    SPARK_SQL,
    logged_commit,
    merge_builder,
    merge_session_conf,
    parse_user_metadata,
    write_commit_metrics,
    write_mode,
    write_options,
)
from .writer import CommitRequest, CommitResult, LoggedCommit, merge_metrics, our_metadata

log = logging.getLogger(__name__)

DELTA_TABLE_CLASS = "io.delta.tables.DeltaTable"

_METASTORE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*){0,2}")
_session_conf_lock = threading.Lock()
_availability: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# ---- where the table is, and whether Delta's classes are there ----


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


def load_table(delta_table_cls, spark, ref: TableRef):
    if ref.by_name:
        return delta_table_cls.forName(spark, ref.location)
    return delta_table_cls.forPath(spark, ref.location)


def table_exists(delta_table_cls, spark, ref: TableRef) -> bool:
    if ref.by_name:
        return spark.catalog.tableExists(ref.location)
    return delta_table_cls.isDeltaTable(spark, ref.location)


def delta_spark_status(spark) -> tuple[bool, str]:
    """(available, why): whether Delta's JVM classes load in this session. Checked once per session."""
    try:
        return _availability[spark]
    except (KeyError, TypeError):
        pass
    status = _probe_delta_classes(spark)
    try:
        _availability[spark] = status
    except TypeError:  # a session type that cannot be weakly referenced: probe each time
        pass
    return status


def _probe_delta_classes(spark) -> tuple[bool, str]:
    """Look io.delta.tables.DeltaTable up as delta-spark does (py4j, driver class path); downloads nothing."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: the server's class path is not visible; its conf is
        extensions = spark.conf.get("spark.sql.extensions", None) or ""
        if DELTA_EXTENSION in extensions:
            return True, f"the Spark Connect server has {DELTA_EXTENSION} configured"
        return False, f"the Spark Connect server does not list {DELTA_EXTENSION} in spark.sql.extensions"
    from py4j.java_gateway import JavaClass

    node = jvm
    for part in DELTA_TABLE_CLASS.split("."):
        node = getattr(node, part)
    if not isinstance(node, JavaClass):
        return False, (
            f"{DELTA_TABLE_CLASS} does not load in this Spark session (no Delta jars on its class path)"
        )
    extensions = spark.conf.get("spark.sql.extensions", None) or ""
    if DELTA_EXTENSION not in extensions:
        log.warning(
            "Delta's classes load but spark.sql.extensions lacks %s; Delta's MERGE may refuse to run. "
            "Build the session with it and spark.sql.catalog.spark_catalog=%s",
            DELTA_EXTENSION,
            DELTA_CATALOG,
        )
    return True, f"{DELTA_TABLE_CLASS} loads in this Spark session"


@contextmanager
def session_conf(spark, conf: dict[str, str]):
    """Set session confs for the duration of the block, then restore them; one block at a time per process."""
    with _session_conf_lock:
        previous = {key: spark.conf.get(key, None) for key in conf}
        try:
            for key, value in conf.items():
                spark.conf.set(key, value)
            yield
        finally:
            for key, value in previous.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)


# ---- the writer ----


@dataclass
class DeltaSparkSnapshot:
    ref: TableRef
    version: int
    schema: Any  # pyspark StructType
    frame: Any  # the table as of `version`, a Spark DataFrame


class DeltaSparkWriter:
    name = "delta-spark"

    def __init__(self, spark):
        self.spark = spark  # history() takes no session; the writer keeps the one it was selected for

    def snapshot(self, spark, path: str) -> DeltaSparkSnapshot | None:
        from delta.tables import DeltaTable

        ref = TableRef.parse(path)
        if not table_exists(DeltaTable, spark, ref):
            return None
        version = _latest_version(load_table(DeltaTable, spark, ref))
        if ref.by_name:
            frame = spark.sql(f"SELECT * FROM {ref.quoted_name()} VERSION AS OF {version}")
        else:
            frame = spark.read.format("delta").option("versionAsOf", version).load(ref.location)
        return DeltaSparkSnapshot(ref, version, frame.schema, frame)

    def read_columns(self, spark, snapshot: DeltaSparkSnapshot, columns: list[str]):
        return snapshot.frame.select(*(SPARK_SQL.quote(c) for c in columns))

    def commit(
        self, spark, path: str, snapshot, plan: MergePlan, source, request: CommitRequest
    ) -> CommitResult:
        from delta.tables import DeltaTable

        ref = TableRef.parse(path)
        read_version = snapshot.version if snapshot is not None else -1
        if snapshot is not None and plan.operation is not Operation.WRITE:
            _require_unchanged(DeltaTable, spark, ref, read_version)
        files_before, rows_before = _overwritten_counts(DeltaTable, spark, snapshot, plan)
        conflicts = _delta_conflicts()  # importing them before the commit lets pyspark raise them
        try:
            if plan.operation is Operation.MERGE:
                builder = merge_builder(load_table(DeltaTable, spark, ref), source, plan)
                with session_conf(spark, merge_session_conf(request)):
                    builder.execute()
            else:
                _write(spark, ref, plan, source, request)
        except conflicts as exc:
            raise ConflictError(
                f"another writer changed table {path} while this load was committing; nothing was written "
                f"by this load. Retry the load. ({exc})"
            ) from exc
        entry = _find_commit(load_table(DeltaTable, spark, ref), read_version, request.load_id)
        if entry is None:  # Delta skipped the commit: this txn version was already recorded
            log.info("load %s was already committed to %s; Delta skipped it", request.load_id, path)
            return CommitResult(read_version, {}, already_applied=True)
        if plan.operation is Operation.MERGE:
            metrics = merge_metrics(entry["operationMetrics"])
        else:
            metrics = write_commit_metrics(entry, files_before, rows_before)
        return CommitResult(int(entry["version"]), metrics)

    def history(self, path: str, limit: int | None = None) -> list[LoggedCommit]:
        from delta.tables import DeltaTable

        ref = TableRef.parse(path)
        if not table_exists(DeltaTable, self.spark, ref):
            return []
        return [logged_commit(e) for e in _history(load_table(DeltaTable, self.spark, ref), limit)]


def _write(spark, ref: TableRef, plan: MergePlan, source, request: CommitRequest) -> None:
    helpers = [c for c in plan.helper_columns if c in source.columns]
    rows = source.drop(*helpers)
    writer = rows.write.format("delta").mode(write_mode(plan)).options(**write_options(plan, request))
    if ref.by_name:
        writer.saveAsTable(ref.location)
    else:
        writer.save(ref.location)


def _overwritten_counts(delta_table_cls, spark, snapshot, plan: MergePlan) -> tuple[int | None, int | None]:
    """(files, rows) a full overwrite removes, counted on the snapshot (Delta's WRITE metrics lack them)."""
    if plan.operation is Operation.WRITE:
        return 0, 0
    if plan.replace_where is not None:
        return None, None  # Delta reports the files a replaceWhere removes; the rows are unknown to delta-rs
    if snapshot is None:
        return 0, 0
    files = load_table(delta_table_cls, spark, snapshot.ref).detail().select("numFiles").first()[0]
    return int(files), snapshot.frame.count()


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
    frame = table.history(limit) if limit is not None else table.history()
    columns = ("version", "operation", "operationParameters", "operationMetrics", "userMetadata")
    return [{c: row[c] for c in columns} for row in frame.select(*columns).collect()]


def _find_commit(table, read_version: int, load_id: str) -> dict[str, Any] | None:
    """The commit after read_version that carries this load id, or None when Delta skipped the load."""
    newer = _latest_version(table) - read_version
    if newer <= 0:
        return None
    for entry in _history(table, newer):
        if our_metadata(parse_user_metadata(entry["userMetadata"])).get("load_id") == load_id:
            return entry
    return None


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
