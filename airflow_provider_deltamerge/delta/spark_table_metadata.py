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
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


def partitions_and_id(spark, delta_table, location: str | None, version: int) -> tuple[tuple[str, ...], str]:
    """(partition columns, Delta id) of the table at `version` (`location`: its path; None for a table
    Delta knows only by name, which DESCRIBE DETAIL answers for)."""

    def from_metadata(metadata) -> tuple[tuple[str, ...], str]:
        return tuple(str(c) for c in _as_java(spark, metadata.partitionColumns())), str(metadata.id())

    found = _read_in_jvm(spark, location, version, from_metadata)
    if found is not None:
        return found
    detail = delta_table.detail().select("partitionColumns", "id").first()
    return tuple(detail[0] or ()), detail[1]


def properties(spark, delta_table, location: str | None, version: int) -> dict[str, str]:
    """The table's properties at `version` (`metaData.configuration`, what DESCRIBE DETAIL reports)."""

    def from_metadata(metadata) -> dict[str, str]:
        return {str(k): str(v) for k, v in _as_java(spark, metadata.configuration()).items()}

    found = _read_in_jvm(spark, location, version, from_metadata)
    if found is not None:
        return found
    detail = delta_table.detail().select("properties").first()
    return dict(detail[0] or {})


def _read_in_jvm(spark, location: str | None, version: int, read: Callable[[Any], T]) -> T | None:
    """`read(metadata)` of the snapshot Delta's log holds in the session's JVM at `version`; None where
    there is none, or Delta's internals answer otherwise than expected."""
    metadata = _metadata_in_jvm(spark, location, version)
    if metadata is None:
        return None
    try:
        return read(metadata)
    except Exception as unexpected:  # Delta's internals differ in this release
        _fall_back(location, unexpected)
        return None


def _as_java(spark, scala_collection):
    return spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(scala_collection)


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
