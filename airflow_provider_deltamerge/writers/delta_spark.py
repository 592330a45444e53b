"""The delta-spark writer: Delta Lake's own MERGE (MergeIntoCommand) runs the MergePlan on the Spark cluster.

Needs Delta's JVM classes in the session (see `delta_config`). Every plan becomes one commit carrying
the load's metadata as JSON in `userMetadata` and the load's txn (txnAppId / txnVersion), which Delta
enforces itself: a commit whose txn version is already recorded is skipped, and the writer reports the
load as already applied. Writes take these as DataFrameWriter options; MERGE has no per-command options,
so it gets them as session confs, set and restored under a lock. A table is a path, or a metastore
name (``db.table``) where a catalog is configured.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from ..delta_config import DELTA_CATALOG, DELTA_EXTENSION
from ..errors import ConflictError
from ..expressions import SOURCE, TARGET, Expr, Lit, render
from ..planning import Clause, MergePlan, Operation
from .base import (
    MERGE_METRICS_FROM_DELTA_RS,
    CommitRequest,
    CommitResult,
    LoggedCommit,
    our_metadata,
    write_metrics,
)

log = logging.getLogger(__name__)

DELTA_TABLE_CLASS = "io.delta.tables.DeltaTable"
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
# The MERGE metrics both writers report, under Delta's names; Delta's extra ones are left out so that
# every writer gives the same metric names for the same load.
MERGE_METRIC_NAMES = tuple(MERGE_METRICS_FROM_DELTA_RS.values())

_METASTORE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*){0,2}")
_session_conf_lock = threading.Lock()
_availability: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class SparkSqlDialect:
    """Spark SQL as Delta's builder parses it: backtick identifiers, TIMESTAMP literals with an offset."""

    @staticmethod
    def quote(name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    @staticmethod
    def timestamp(value: datetime) -> str:
        # With its offset the literal is one instant, whatever the session time zone or timestampType.
        return f"TIMESTAMP '{value.isoformat()}'"

    @staticmethod
    def timestamp_ntz(value: datetime) -> str:
        return f"TIMESTAMP_NTZ '{value.isoformat()}'"

    @staticmethod
    def date(value: date) -> str:
        return f"DATE '{value.isoformat()}'"


SPARK_SQL = SparkSqlDialect()


def render_spark(expr: Expr) -> str:
    """SQL text of expr for Spark; backslashes in string literals are escaped, as Spark's parser expects."""
    return render(_escape_backslashes(expr), SPARK_SQL)


def _escape_backslashes(expr):
    if isinstance(expr, Lit):
        return Lit(expr.value.replace("\\", "\\\\")) if isinstance(expr.value, str) else expr
    if not dataclasses.is_dataclass(expr):
        return expr
    changes = {}
    for f in dataclasses.fields(expr):
        value = getattr(expr, f.name)
        if isinstance(value, tuple):
            changes[f.name] = tuple(_escape_backslashes(v) for v in value)
        elif dataclasses.is_dataclass(value):
            changes[f.name] = _escape_backslashes(value)
    return dataclasses.replace(expr, **changes)


# ---- the plan as DeltaMergeBuilder calls (no Spark needed: `target` may be any DeltaTable look-alike) ----


def merge_builder(target, source, plan: MergePlan):
    """The plan's DeltaMergeBuilder, not executed. `target`: a delta.tables.DeltaTable; `source`: shaped rows.

    Helper columns never reach the table: with helpers in the source, "update all" and "insert all"
    become explicit column maps of the other source columns (schema evolution adds only assigned columns).
    """
    helpers = set(plan.helper_columns) & set(source.columns)
    copied = [c for c in source.columns if c not in helpers] if helpers else None
    builder = target.alias(TARGET).merge(source.alias(SOURCE), render_spark(plan.on)).withSchemaEvolution()
    for clause in plan.clauses:
        builder = add_clause(builder, clause, copied)
    return builder


def add_clause(builder, clause: Clause, copied_columns: list[str] | None):
    """One WHEN clause; `copied_columns` (or None for Delta's own `*`) is what update/insert-all copy."""
    condition = render_spark(clause.condition) if clause.condition is not None else None
    kind = (clause.when, clause.action)
    if kind == ("matched", "delete"):
        return builder.whenMatchedDelete(condition=condition)
    if kind == ("matched", "update_all"):
        if copied_columns is None:
            return builder.whenMatchedUpdateAll(condition=condition)
        return builder.whenMatchedUpdate(condition=condition, set=column_copies(copied_columns))
    if kind == ("not_matched", "insert_all"):
        if copied_columns is None:
            return builder.whenNotMatchedInsertAll(condition=condition)
        return builder.whenNotMatchedInsert(condition=condition, values=column_copies(copied_columns))
    if kind == ("matched", "update"):
        return builder.whenMatchedUpdate(condition=condition, set=assignments(clause))
    if kind == ("not_matched_by_source", "update"):
        return builder.whenNotMatchedBySourceUpdate(condition=condition, set=assignments(clause))
    if kind == ("not_matched_by_source", "delete"):
        return builder.whenNotMatchedBySourceDelete(condition=condition)
    raise ValueError(f"the delta-spark writer has no translation for clause {clause}")


def column_copies(columns: list[str]) -> dict[str, str]:
    """{target column: the source column of the same name}, quoted for Delta's builder."""
    return {SPARK_SQL.quote(c): f"{SOURCE}.{SPARK_SQL.quote(c)}" for c in columns}


def assignments(clause: Clause) -> dict[str, str]:
    return {SPARK_SQL.quote(column): render_spark(value) for column, value in clause.assignments}


def write_mode(plan: MergePlan) -> str:
    return "overwrite" if plan.operation is Operation.OVERWRITE else "append"


def write_options(plan: MergePlan, request: CommitRequest) -> dict[str, str]:
    """DataFrameWriter options of a WRITE / OVERWRITE: schema merge, commit metadata, txn, replaceWhere."""
    options = {"mergeSchema": "true", "userMetadata": user_metadata(request), **txn_options(request)}
    if plan.replace_where is not None:
        options["replaceWhere"] = render_spark(plan.replace_where)
    return options


def txn_options(request: CommitRequest) -> dict[str, str]:
    return {"txnAppId": request.app_id, "txnVersion": str(request.txn_version)}


def merge_session_conf(request: CommitRequest) -> dict[str, str]:
    """Session confs that give a MERGE the load's commit metadata and txn (MERGE takes no options)."""
    return {
        USER_METADATA_CONF: user_metadata(request),
        TXN_APP_ID_CONF: request.app_id,
        TXN_VERSION_CONF: str(request.txn_version),
    }


def user_metadata(request: CommitRequest) -> str:
    """The commit metadata as one JSON object, the same keys the delta-rs writer puts in commitInfo."""
    return json.dumps(request.custom_metadata(), sort_keys=True, default=str)


# ---- what Delta reports back (pure) ----


def parse_user_metadata(text: str | None) -> dict[str, Any]:
    """userMetadata as a dict; empty when absent or not a JSON object (another writer's free text)."""
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def merge_metrics(operation_metrics: dict[str, str]) -> dict[str, int]:
    """A MERGE commit's operationMetrics (strings) as ints, restricted to the names every writer reports."""
    return {name: int(operation_metrics[name]) for name in MERGE_METRIC_NAMES if name in operation_metrics}


def write_commit_metrics(
    entry: dict[str, Any], files_removed: int | None = None, rows_deleted: int | None = None
) -> dict[str, int]:
    """A WRITE commit's metrics under MERGE names, like the delta-rs writer's.

    Delta records files removed only for replaceWhere writes; `files_removed` fills it in for a full
    overwrite (counted before the write). A count nobody knows is left out, never invented.
    """
    raw = entry.get("operationMetrics") or {}
    mode = (entry.get("operationParameters") or {}).get("mode")
    appended = mode == "Append" or str(entry.get("operation")).startswith("CREATE TABLE")
    if "numRemovedFiles" in raw:
        files_removed = int(raw["numRemovedFiles"])
    elif appended:
        files_removed = 0
    rows, files = int(raw.get("numOutputRows", 0)), int(raw.get("numFiles", 0))
    metrics = write_metrics(rows, files, files_removed or 0, rows_deleted)
    if files_removed is None:
        del metrics["numTargetFilesRemoved"]
    return metrics


def logged_commit(entry: dict[str, Any]) -> LoggedCommit:
    """One row of DeltaTable.history() (as a dict) as the state layer reads it."""
    operation = str(entry.get("operation"))
    if operation == "MERGE":
        metrics = merge_metrics(entry.get("operationMetrics") or {})
    else:
        metrics = write_commit_metrics(entry)
    metadata = our_metadata(parse_user_metadata(entry.get("userMetadata")))
    return LoggedCommit(int(entry["version"]), operation, metadata, metrics)


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
