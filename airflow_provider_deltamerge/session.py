"""The embedded default: one shared local SparkSession, created on first use."""

from __future__ import annotations

import shutil

from .errors import ConfigError

LOCAL_SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def require_java() -> None:
    if shutil.which("java") is None:
        raise ConfigError(
            "spark", "no `java` on PATH; Spark needs Java 17. Install it (e.g. apt-get install openjdk-17-jre-headless)"
        )


def default_session(master: str = "local[*]", extra_conf: dict[str, str] | None = None):
    """The process's local SparkSession (UI off, UTC, loopback only); an active session is reused."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    require_java()
    builder = SparkSession.builder.master(master).appName("deltamerge")
    for key, value in {**LOCAL_SESSION_CONF, **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
