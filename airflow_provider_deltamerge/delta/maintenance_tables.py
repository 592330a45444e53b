"""The table a maintenance run works on, with the engine of its writer: delta-rs from this process
(`DeltaRsTable`, no Spark needed), or Delta's own commands in a Spark session (`DeltaSparkTable`). Both
answer the same calls (configuration, partition columns, columns, version, optimize, vacuum, checkpoint),
which `delta/maintenance.py` makes in the same order whichever it got.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..model.checks import choice
from ..model.naming import backticked
from ..model.options import BACKENDS
from . import hadoop_checksums

DELTA_RS_TARGET_FILE_BYTES = 100 * 2**20  # delta-rs compacts files below this size, unless the table says
VACUUM_CONF = {
    "spark.databricks.delta.vacuum.logging.enabled": "true",  # so VACUUM END records its counts
    # Delta 4 ignores VACUUM's retention argument unless it is 0 and takes the table's
    # delta.deletedFileRetentionDuration instead (VacuumCommand.gc): a table that sets it below our floor
    # would have files younger than the floor deleted. The retention we checked must be the one it uses.
    "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled": "false",
}
RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"


def open_table(path: str, backend: str, spark: Any, storage_options: Mapping[str, str] | None):
    """The table with the engine of the chosen backend; ConfigError when there is no table."""
    from .selection import select_writer

    choice("backend", backend, BACKENDS)
    if spark is None:
        if backend == "delta-spark":
            raise ConfigError("backend", "'delta-spark' runs Delta's commands in a Spark session: pass spark")
        return DeltaRsTable(path, storage_options)
    if select_writer(backend, spark, table_path=path).name == "delta-spark":
        return DeltaSparkTable(path, spark, storage_options)
    return DeltaRsTable(path, storage_options)


def _protocol_property(key: str) -> bool:
    """SHOW TBLPROPERTIES lists the table's protocol too, which is not part of its configuration."""
    return key in ("delta.minReaderVersion", "delta.minWriterVersion") or key.startswith("delta.feature.")


def _missing(path: str) -> ConfigError:
    return ConfigError("table_name", f"there is no Delta table at {path}; load it before maintaining it")


class DeltaRsTable:
    """Maintenance with delta-rs, from this process: no Spark needed."""

    writer = "delta-rs"

    def __init__(
        self, path: str, storage_options: Mapping[str, str] | None, state_table: bool = False
    ) -> None:
        from deltalake import DeltaTable
        from deltalake.exceptions import CommitFailedError, TableNotFoundError

        from .optimize_claim import ClaimedElsewhere

        self.path, self.conflicts, self.state_table = path, (CommitFailedError, ClaimedElsewhere), state_table
        self._storage_options = dict(storage_options or {}) or None
        try:
            self._table = DeltaTable(path, storage_options=self._storage_options)
        except TableNotFoundError:
            raise _missing(path) from None

    def configuration(self) -> dict[str, str]:
        return dict(self._table.metadata().configuration or {})

    def partition_columns(self) -> list[str]:
        return list(self._table.metadata().partition_columns)

    def columns(self) -> list[str]:
        return [field.name for field in self._table.schema().fields]

    def version(self) -> int:
        self._table.update_incremental()
        return self._table.version()

    def optimize(self, z_order: list[str]) -> dict[str, Any]:
        """OPTIMIZE planned on the newest version, which carries this run's claim (see optimize_claim); a
        state table is compacted by the store's own compaction, which its row writes are safe against."""
        from .optimize_claim import claim

        if self.state_table:
            from .state_table import compact_state_table

            return compact_state_table(self._table)
        self._table.update_incremental()
        if not z_order and not self._compactable():
            return {}  # nothing to claim the table for: a compaction would commit nothing
        try:
            claim(self._table)  # and planned on the version it brought the table to, also when trying again
            if z_order:
                return self._table.optimize.z_order(z_order)
            return self._table.optimize.compact()
        finally:  # either commit may have reached the table's checkpoint interval
            hadoop_checksums.drop_rewritten(self.path)

    def _compactable(self) -> bool:
        """Whether a partition has two files or more below the target size: what a compaction rewrites."""
        target = int(self.configuration().get("delta.targetFileSize") or DELTA_RS_TARGET_FILE_BYTES)
        actions = self._table.get_add_actions(flatten=True)
        sizes = actions.column("size_bytes").to_pylist()
        values = [actions.column(f"partition.{c}").to_pylist() for c in self.partition_columns()]
        partitions = list(zip(*values, strict=True)) if values else [()] * len(sizes)
        small = Counter(p for p, size in zip(partitions, sizes, strict=True) if size < target)
        return any(count > 1 for count in small.values())

    def vacuum(self, retention_hours: int, force: bool) -> int:
        deleted = self._table.vacuum(
            retention_hours=retention_hours, dry_run=False, enforce_retention_duration=not force
        )
        hadoop_checksums.drop_rewritten(self.path)
        return len(deleted)

    def checkpoint(self) -> int:
        self._table.update_incremental()
        self._table.create_checkpoint()
        hadoop_checksums.drop_rewritten(self.path)
        return self._table.version()


class DeltaSparkTable:
    """Maintenance with Delta's own commands in a Spark session that has Delta's classes.

    Checkpoints are written with delta-rs: the delta-spark Python API has no checkpoint call, and a
    checkpoint is a file of the Delta protocol that either engine reads.
    """

    writer = "delta-spark"

    def __init__(self, path: str, spark: Any, storage_options: Mapping[str, str] | None = None) -> None:
        from delta.tables import DeltaTable

        from .delta_spark import _delta_conflicts

        if not DeltaTable.isDeltaTable(spark, path):
            raise _missing(path)
        self.path, self.spark, self.conflicts = path, spark, _delta_conflicts()
        self._storage_options = dict(storage_options or {}) or None  # the checkpoint is written by delta-rs
        self._table = DeltaTable.forPath(spark, path)
        # Read from the table's metadata alone: DESCRIBE DETAIL replays its files, which parses
        # delta.deletedFileRetentionDuration and fails on one Delta cannot hold before ours refuses it.
        target = f"delta.{backticked(path)}"
        shown = spark.sql(f"SHOW TBLPROPERTIES {target}").collect()
        self._properties = {row["key"]: row["value"] for row in shown if not _protocol_property(row["key"])}
        self._columns = spark.catalog.listColumns(target)

    def configuration(self) -> dict[str, str]:
        return self._properties

    def partition_columns(self) -> list[str]:
        return [column.name for column in self._columns if column.isPartition]

    def columns(self) -> list[str]:
        return [column.name for column in self._columns]

    def version(self) -> int:
        return int(self._table.history(1).select("version").first()[0])

    def optimize(self, z_order: list[str]) -> dict[str, Any]:
        builder = self._table.optimize()
        result = builder.executeZOrderBy(*z_order) if z_order else builder.executeCompaction()
        return result.select("metrics").first()["metrics"].asDict(recursive=True)

    def vacuum(self, retention_hours: int, force: bool) -> int:
        from .delta_spark import session_conf

        before = self.version()
        conf = {**VACUUM_CONF, **({RETENTION_CHECK_CONF: "false"} if force else {})}
        with session_conf(self.spark, conf):
            self._table.vacuum(float(retention_hours))
        newer = self.version() - before
        ended = self._table.history(newer).where("operation = 'VACUUM END'") if newer > 0 else None
        row = ended.select("operationMetrics").first() if ended is not None else None
        return int((row["operationMetrics"] or {}).get("numDeletedFiles", 0)) if row is not None else 0

    def checkpoint(self) -> int:
        return DeltaRsTable(self.path, self._storage_options).checkpoint()
