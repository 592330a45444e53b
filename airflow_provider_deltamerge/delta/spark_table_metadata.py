"""A Delta table's partition columns, Delta id (`metaData.id`) and properties at a version, for the
delta-spark writer.

`DESCRIBE DETAIL` (`DeltaTable.detail()`) answers with the table's size and file count too, so it
reconstructs the whole state of the snapshot: seconds of Spark jobs on a table just created, whose state
nothing else of the load needs. Where the session runs Delta in its own JVM (a classic session, not Spark
Connect) and the snapshot Delta's log holds there is at that version, its metadata answers without a
job; elsewhere, and on anything unexpected from Delta's internals, DESCRIBE DETAIL does.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def partitions_and_id(spark, delta_table, location: str | None, version: int) -> tuple[tuple[str, ...], str]:
    """(partition columns, Delta id) of the table at `version` (`location`: its path; None for a table
    Delta knows only by name, which DESCRIBE DETAIL answers for)."""
    metadata = _metadata_in_jvm(spark, location, version)
    if metadata is not None:
        try:
            columns = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(metadata.partitionColumns())
            return tuple(str(c) for c in columns), str(metadata.id())
        except Exception as unexpected:  # Delta's internals differ in this release
            _fall_back(location, unexpected)
    detail = delta_table.detail().select("partitionColumns", "id").first()
    return tuple(detail[0] or ()), detail[1]


def properties(spark, delta_table, location: str | None, version: int) -> dict[str, str]:
    """The table's properties at `version` (`metaData.configuration`, what DESCRIBE DETAIL reports)."""
    metadata = _metadata_in_jvm(spark, location, version)
    if metadata is not None:
        try:
            configuration = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(metadata.configuration())
            return {str(k): str(v) for k, v in configuration.items()}
        except Exception as unexpected:
            _fall_back(location, unexpected)
    detail = delta_table.detail().select("properties").first()
    return dict(detail[0] or {})


def _metadata_in_jvm(spark, location: str | None, version: int):
    """The metadata of the snapshot Delta's log holds in the session's JVM, where it is at `version`."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None or location is None:  # Spark Connect (no JVM here), or a table known by name
        return None
    try:
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, location)
        snapshot = delta_log.unsafeVolatileSnapshot()
        if snapshot.version() != version:  # another writer's commit since: Delta's detail tells
            return None
        return snapshot.metadata()
    except Exception as unexpected:  # Delta's internals differ in this release: its public API answers
        _fall_back(location, unexpected)
        return None


def _fall_back(location: str | None, unexpected: Exception) -> None:
    log.debug("metadata of %s from Delta's log in the JVM failed (%s): DESCRIBE DETAIL", location, unexpected)
