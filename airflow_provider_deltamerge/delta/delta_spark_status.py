"""Whether a Spark session can run the delta-spark writer: Delta Lake's JVM classes on its class path
(looked up as delta-spark does, through py4j; nothing is downloaded), or over Spark Connect, Delta's SQL
extension and Delta Connect's plugins in the server's settings. Asked once per session."""

from __future__ import annotations

import logging
import weakref

from ..model.delta_jars import DELTA_CATALOG, DELTA_CONNECT_PLUGINS, DELTA_EXTENSION

log = logging.getLogger(__name__)

DELTA_TABLE_CLASS = "io.delta.tables.DeltaTable"
_availability: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


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
    if jvm is None:
        return _probe_connect_server(spark)
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


def _probe_connect_server(spark) -> tuple[bool, str]:
    """Spark Connect: the server's class path is not visible, its conf is. delta-spark needs Delta's SQL
    extension there, and Delta Connect's plugins, through which DeltaTable's calls reach the server."""
    if DELTA_EXTENSION not in (spark.conf.get("spark.sql.extensions", None) or ""):
        return False, f"the Spark Connect server does not list {DELTA_EXTENSION} in spark.sql.extensions"
    missing = [
        f"{key}={plugin}"
        for key, plugin in DELTA_CONNECT_PLUGINS.items()
        if plugin not in (spark.conf.get(key, None) or "")
    ]
    if missing:
        return False, (
            f"the Spark Connect server has {DELTA_EXTENSION} but not Delta Connect's plugins, through which "
            f"DeltaTable's calls reach it (delta-connect-server's jar and {', '.join(missing)})"
        )
    return True, f"the Spark Connect server has {DELTA_EXTENSION} and Delta Connect's plugins"
