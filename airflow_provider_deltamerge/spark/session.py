"""The embedded default: one shared local SparkSession, created on first use."""

from __future__ import annotations

import logging
import os
import shutil
import sys

from ..errors import ConfigError

log = logging.getLogger(__name__)

LOCAL_SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # INT96, Spark's default, reads back as nanoseconds in pyarrow and delta-rs: years past 2262 overflow
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


def python_conf() -> dict[str, str]:
    """Spark's Python workers run this interpreter, not whichever `python3` is first on PATH."""
    return {"spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable}


def require_java() -> None:
    if shutil.which("java") is None:
        raise ConfigError(
            "spark",
            "no `java` on PATH; Spark needs Java 17. Install it "
            "(e.g. apt-get install openjdk-17-jre-headless)",
        )


def local_session_conf(extra_conf: dict[str, str] | None = None, delta_jars=None) -> dict[str, str]:
    """The conf of a new local session: ours, then extra_conf, then Delta's jars, extension and catalog."""
    from ..spec.delta_jars import merge_spark_conf, parse_delta_jars

    jars = parse_delta_jars(delta_jars)
    ours = {**LOCAL_SESSION_CONF, **python_conf(), **(extra_conf or {})}
    return merge_spark_conf(ours, jars.spark_conf() if jars else {})


def default_session(master: str = "local[*]", extra_conf: dict[str, str] | None = None, delta_jars=None):
    """The process's local SparkSession (UI off, UTC, loopback only); an active session is reused.

    `delta_jars` (local jar paths, see delta_config) puts Delta Lake on the new session's class path with
    its SQL extension and catalog, so that backend "auto" uses the delta-spark writer.
    """
    from pyspark.sql import SparkSession

    conf = local_session_conf(extra_conf, delta_jars)  # validated even when a session is reused
    active = SparkSession.getActiveSession()
    if active is not None:
        if delta_jars is not None:
            log.warning("delta_jars ignored: a SparkSession is already running; jars cannot be added to it")
        return active
    require_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a local session listens on loopback only
    builder = SparkSession.builder.master(master).appName("deltamerge")
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
