"""The delta-rs writer: commits a MergePlan with the `deltalake` package from the Spark driver.

The staged batch travels from Spark as Arrow. Every plan becomes one commit, carrying the load's
metadata as JSON in commitInfo's `userMetadata` (as the delta-spark writer does; `writer.logged_commit`
reads it) and the load's txn. A MERGE that changes nothing (delta-rs then writes no commit) is followed
by an empty append that carries them, so every recorded load has its commit.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
from dataclasses import dataclass
from urllib.parse import unquote

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from ..errors import ConflictError, SchemaError
from ..model.naming import backticked
from ..model.storage import store_of
from ..plan.expressions import SOURCE, TARGET, render
from ..plan.merge import MergePlan, Operation
from ..plan.pruning import read_scope, rewrites_files
from . import checkpoints, hadoop_checksums, read_check, rs_history, unique_keys
from .arrow_stream import Transfer, arrow_schema, record_batches
from .datafusion import DataFusionDialect, add_clause, spelled_copies
from .locking import local_path
from .storage import LOAD_UNCHANGED, store_errors, store_write_errors
from .writer import (
    USER_METADATA,
    CommitRequest,
    CommitResult,
    LoggedCommit,
    logged_commit,
    merge_metrics,
    properties_commit_metadata,
    write_commit_metrics,
)

log = logging.getLogger(__name__)
_SPARK_TAKES_ARROW = int(importlib.metadata.version("pyspark").split(".")[0]) >= 4  # DataFrame <-> Arrow
TARGET_FILE_BYTES = 8 * 2**20  # files a later merge can skip by key without rewriting much beside its rows


@dataclass
class DeltaRsSnapshot:
    table: DeltaTable
    version: int
    schema: object  # pyspark StructType
    partition_columns: tuple[str, ...] = ()
    table_id: str | None = None  # the table's Delta id (metaData.id): a recreated table has another

    def row_count(self) -> int | None:
        return files_and_rows(self.table)[1]

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.table.metadata().configuration or {})


def files_and_rows(table: DeltaTable) -> tuple[int, int | None]:
    """(files, rows) of the loaded version as its Delta log records them (add actions and their statistics).

    Rows are None where a file has no statistics, or where the table may have deletion vectors, whose
    deleted rows the statistics still count.
    """
    counts = table.get_add_actions(flatten=True).column("num_records").to_pylist()
    vectors = "deletionVectors" in (table.protocol().reader_features or [])
    rows = None if vectors or any(c is None for c in counts) else sum(counts)
    return len(counts), rows


def counted_in_log(
    location: str, version: int, storage_options: dict[str, str] | None = None
) -> tuple[int | None, int | None]:
    """(files, rows) of a table's version as its Delta log records them, whichever writer made it;
    (None, None) where this process cannot read the log (another file system, a Spark Connect server's
    local disk)."""
    try:
        return files_and_rows(DeltaTable(location, version=version, storage_options=storage_options))
    except (DeltaError, OSError) as exc:
        log.info("the Delta log of %s is not readable here (%s)", location, exc)
        return None, None


def spark_to_arrow(df, not_null: tuple[str, ...] = ()) -> pa.Table:
    """The DataFrame as one Arrow table, every column nullable but those in `not_null` (timestamps in UTC)."""
    schema = arrow_schema(df, not_null)
    return pa.Table.from_batches(list(record_batches(df, schema)), schema=schema)


class DeltaRsWriter:
    """`storage_options`: what delta-rs is handed for the dataset's object store (None: local, or the
    environment's credentials)."""

    name = "delta-rs"
    takes_arrow = True  # commits an Arrow table collected by staging's own pass (see load/staged_arrow.py)

    def __init__(self, storage_options: dict[str, str] | None = None) -> None:
        self.storage_options = storage_options

    def snapshot(self, spark, path: str, newest: int | None = None) -> DeltaRsSnapshot | None:
        """The table as delta-rs opens it, at its newest version (which opening reads anyway; `newest`
        is not needed)."""
        from pyspark.sql.pandas.types import from_arrow_schema

        with store_errors(path, self.storage_options, LOAD_UNCHANGED):
            try:
                table = DeltaTable(path, storage_options=self.storage_options)
            except TableNotFoundError:
                return None
        arrow_schema = pa.schema(table.schema().to_arrow())
        metadata = table.metadata()
        partitions = tuple(metadata.partition_columns)
        schema = from_arrow_schema(arrow_schema)
        return DeltaRsSnapshot(table, table.version(), schema, partitions, metadata.id)

    def read_columns(self, spark, snapshot: DeltaRsSnapshot, columns: list[str]):
        """The snapshot's columns in Spark: its local parquet files where that is exact, else read via
        delta-rs, which holds the store's credentials (Spark reads an object store only where its session
        has the store's Hadoop file system)."""
        schema = snapshot.schema
        wanted = type(schema)([schema[c] for c in columns])
        located = _local_files(snapshot.table) if _plain_parquet_readable(snapshot.table) else None
        if located is not None:
            base, files = located
            if not files:
                return spark.createDataFrame([], wanted)
            full = spark.read.schema(schema).option("basePath", base).parquet(*files)
            return full.select(*(backticked(c) for c in columns))
        arrow = snapshot.table.to_pyarrow_table(columns=columns)
        arrow = _without_view_types(arrow)
        if not _SPARK_TAKES_ARROW:  # Spark 3.5 takes no Arrow table: its rows, with the schema
            return spark.createDataFrame(arrow.to_pylist(), wanted)
        return spark.createDataFrame(arrow, wanted)

    def commit(
        self, spark, path: str, snapshot, plan: MergePlan, source, request: CommitRequest
    ) -> CommitResult:
        if snapshot is not None and rs_history.already_applied(snapshot.table, request, self.storage_options):
            return CommitResult(snapshot.version, {}, already_applied=True)
        pinned = snapshot is not None and rewrites_files(plan)
        properties = CommitProperties(
            custom_metadata={USER_METADATA: request.user_metadata()},
            app_transactions=[Transaction(request.app_id, request.txn_version)],
            max_commit_retries=read_check.PINNED if pinned else None,
        )
        try:
            if pinned:  # made on the table as it is now, over reads still current (see read_check)
                snapshot = self._current(snapshot, plan)
            if plan.operation is Operation.MERGE:
                return self._merge(spark, path, snapshot, plan, source, properties, request)
            return self._write(spark, path, snapshot, plan, source, properties, request)
        except CommitFailedError as exc:
            raise ConflictError(
                f"another writer changed table {path} while this load was committing; nothing was written "
                f"by this load. Retry the load. ({exc})"
            ) from exc

    def _merge(
        self,
        spark,
        path: str,
        snapshot: DeltaRsSnapshot,
        plan: MergePlan,
        source,
        properties,
        request: CommitRequest,
    ) -> CommitResult:
        dialect = DataFusionDialect()
        transfer = Transfer(spark, path, source, request.source_bytes)
        in_memory = transfer.fits_in_memory()
        data = _checked(transfer, plan, source, in_memory)
        merger = snapshot.table.merge(
            data,
            render(plan.on, dialect),
            source_alias=SOURCE,
            target_alias=TARGET,
            merge_schema=_adds_columns(transfer.schema, snapshot, plan),
            streamed_exec=not in_memory,
            commit_properties=properties,
        )
        copied = spelled_copies(transfer.schema.names, plan.helper_columns, dialect)
        for clause in plan.clauses:
            merger = add_clause(merger, clause, list(plan.helper_columns), dialect, copied)
        with store_write_errors(path, self.storage_options):
            metrics = merge_metrics(transfer.run(merger.execute))
            if snapshot.table.version() == snapshot.version:  # nothing changed: delta-rs wrote no commit
                self._empty_commit(snapshot.table, properties)
        landed = rs_history.landed_commit(snapshot.table, snapshot.version, request.load_id)
        checkpoints.after_commits(snapshot.table, snapshot.version)
        return CommitResult(int(landed["version"]), metrics)

    def _write(
        self, spark, path: str, snapshot, plan: MergePlan, source, properties, request: CommitRequest
    ) -> CommitResult:
        not_null = _not_null(snapshot) if snapshot is not None else request.layout.not_null
        transfer = Transfer(spark, path, source, request.source_bytes, not_null)
        in_memory = transfer.fits_in_memory() or transfer.on_driver  # written as it is: no merge to run
        if plan.cluster_by and not in_memory:  # ordered by key within and across files (as below)
            transfer.sorted_in_spark(source, plan.cluster_by)
        data = _checked(transfer, plan, source, in_memory)
        if plan.cluster_by and in_memory:
            data = data.sort_by([(c, "ascending") for c in plan.cluster_by])
        overwrite = plan.operation is Operation.OVERWRITE
        rows_deleted = _rows_replaced(snapshot, plan) if overwrite else 0
        created = snapshot is None
        with store_write_errors(path, self.storage_options):
            transfer.run(
                lambda: write_deltalake(
                    snapshot.table if snapshot is not None else path,
                    data,
                    mode="overwrite" if overwrite else "append",
                    schema_mode="merge",
                    partition_by=(list(request.layout.partition_by) or None) if created else None,
                    predicate=render(plan.replace_where, DataFusionDialect())
                    if plan.replace_where is not None
                    else None,
                    target_file_size=TARGET_FILE_BYTES,
                    # the load's own properties only: the file size is given to each write, as open-source
                    # Delta refuses to set delta.targetFileSize (a Databricks property)
                    configuration=(dict(request.table_properties) or None) if created else None,
                    commit_properties=properties,
                    storage_options=self.storage_options if created else None,
                )
            )
        table = (
            snapshot.table if snapshot is not None else DeltaTable(path, storage_options=self.storage_options)
        )
        read_version = snapshot.version if snapshot is not None else -1
        landed = rs_history.landed_commit(table, read_version, request.load_id)
        checkpoints.after_commits(table, read_version)
        return CommitResult(int(landed["version"]), write_commit_metrics(landed, rows_deleted=rows_deleted))

    def _current(self, snapshot: DeltaRsSnapshot, plan: MergePlan) -> DeltaRsSnapshot:
        """The table at its newest version, where no commit since the snapshot removed a file the plan
        read (or, for a plan whose source holds rows read from the table, added one)."""
        current = DeltaTable(snapshot.table.table_uri, storage_options=self.storage_options)
        if plan.on_snapshot:
            read_check.require_version(snapshot.table, current)
        scope = read_scope(plan, snapshot.partition_columns)
        read_check.require_reads_current(snapshot.table, current, scope, added_too=plan.needs_target_read)
        return dataclasses.replace(snapshot, table=current, version=current.version())

    @staticmethod
    def _empty_commit(table: DeltaTable, properties) -> None:
        empty = pa.schema(table.schema().to_arrow()).empty_table()
        write_deltalake(table, empty, mode="append", commit_properties=properties)

    def history(self, path: str, limit: int | None = None) -> list[LoggedCommit]:
        try:
            table = DeltaTable(path, storage_options=self.storage_options)
        except TableNotFoundError:
            return []
        return [logged_commit(e) for e in rs_history.history(table, limit)]

    def table_properties(self, spark, snapshot: DeltaRsSnapshot) -> dict[str, str]:
        return snapshot.properties

    def set_table_properties(self, spark, path: str, properties: dict[str, str]) -> None:
        commit = CommitProperties(custom_metadata={USER_METADATA: properties_commit_metadata(properties)})
        try:
            DeltaTable(path, storage_options=self.storage_options).alter.set_table_properties(
                properties, commit_properties=commit
            )
        except CommitFailedError as exc:
            raise ConflictError(
                f"another writer changed table {path} while its properties were being set; retry the load. "
                f"({exc})"
            ) from exc
        hadoop_checksums.drop_rewritten(path)  # delta-rs checkpoints at the table's interval


def _checked(transfer: Transfer, plan: MergePlan, source, in_memory: bool):
    """The source as Arrow (a table in memory, else a stream), its unique key checked before any commit:
    in the Arrow data once it is on the driver, in Spark before a stream starts."""
    if transfer.on_driver:
        unique_keys.check_arrow(source, plan)
        return transfer.table() if in_memory else transfer.reader()
    if not in_memory:
        with transfer.out_of_heap_refused():  # a job over the whole batch, in the driver's heap when local
            unique_keys.check_spark(source, plan)
        return transfer.reader()
    data = transfer.table()
    unique_keys.check_arrow(data, plan)
    return data


def _not_null(snapshot: DeltaRsSnapshot) -> tuple[str, ...]:
    """The table's NOT NULL columns, which a write must bring as non-nullable to keep them so."""
    return tuple(f.name for f in snapshot.schema.fields if not f.nullable)


def _adds_columns(source: pa.Schema, snapshot: DeltaRsSnapshot, plan: MergePlan) -> bool:
    """Whether the merge must add columns. Only then is merge_schema on: with it, delta-rs 1.6 writes
    NULL into the copied rows of non-nullable target columns and fails the commit."""
    present = set(snapshot.schema.fieldNames()) | set(plan.helper_columns)
    new = [name for name in source.names if name not in present]
    if new and any(not f.nullable for f in snapshot.schema.fields):
        required = [f.name for f in snapshot.schema.fields if not f.nullable]
        raise SchemaError(
            snapshot.table.table_uri,
            new[0],
            "absent",
            "new",
            reason=f"the batch adds column {new[0]!r} to table {snapshot.table.table_uri}, but the table has "
            f"non-nullable columns {required}, with which delta-rs cannot add columns in a merge. "
            "Nothing was "
            "loaded. Make those columns nullable, or add the new column to the table first.",
        )
    return bool(new)


def _rows_replaced(snapshot, plan: MergePlan) -> int | None:
    """Rows an overwrite removes: all of them, as far as file statistics tell; unknown for a partial one."""
    if snapshot is None:
        return 0
    return snapshot.row_count() if plan.replace_where is None else None


_NOT_PLAIN_IN_PATHS = frozenset("%[]{}*?\\")  # what Hadoop takes for a glob or an escape in a path


def _local_files(table: DeltaTable) -> tuple[str, list[str]] | None:
    """(the table's folder, its data files) as Spark's reader takes them, for a table on a local disk
    whose paths hold nothing Hadoop would read as a glob or an escape; None otherwise. delta-rs spells
    the table's folder percent-encoded (`a%20b`) and the files below it as they are on disk."""
    if store_of(table.table_uri) is not None:
        return None
    encoded = local_path(table.table_uri)
    if encoded is None:
        return None
    base = unquote(encoded)
    files = []
    for uri in table.file_uris():
        below = uri[len(encoded) :] if uri.startswith(encoded) else None
        if below is None or _NOT_PLAIN_IN_PATHS & set(base + below):
            return None
        files.append(base + below)
    return base, files


def _plain_parquet_readable(table: DeltaTable) -> bool:
    """Spark reads the data files exactly only without deletion vectors and column mapping."""
    features = set(table.protocol().reader_features or [])
    mapping = (table.metadata().configuration or {}).get("delta.columnMapping.mode", "none")
    return not ({"deletionVectors", "columnMapping"} & features) and mapping == "none"


def _without_view_types(table: pa.Table) -> pa.Table:
    """Spark cannot take string_view / binary_view columns; cast them to their plain forms."""
    fields = []
    for f in table.schema:
        if f.type == pa.string_view():
            f = f.with_type(pa.string())
        elif f.type == pa.binary_view():
            f = f.with_type(pa.binary())
        fields.append(f)
    return table.cast(pa.schema(fields))
