"""The embedded default: one shared local SparkSession, created on first use."""

from __future__ import annotations

import logging
import os
import shutil
import sys

from ..errors import ConfigError
from . import class_archive, jit_options

log = logging.getLogger(__name__)

LOCAL_SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # INT96, Spark's default, reads back as nanoseconds in pyarrow and delta-rs: years past 2262 overflow
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}

# Settings for a local session whose jobs are small batches, each applied only where the caller's conf,
# spark-defaults.conf and PYSPARK_SUBMIT_ARGS leave it unset (logged either way). A load's Spark work is
# one pass over the batch; where it shuffles (dedup, a key check, a sort), few partitions do, and
# adaptive execution merges the small ones instead of keeping one per core. Delta (where installed)
# rebuilds a table's state from its log in 2 partitions, not its 50 for a cluster: on a local session
# each partition is a task, and 50 of them took 3 s of every load on two cores.
SMALL_BATCH_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
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
    """The conf of a new local session: ours, the small-batch settings nobody else set, then extra_conf,
    then Delta's jars (given, else those DELTA_SPARK_JARS names), extension and catalog."""
    from ..model.delta_jars import given_or_env_jars, merge_spark_conf

    jars = given_or_env_jars(delta_jars)
    tuning = small_batch_conf(extra_conf)
    ours = {**LOCAL_SESSION_CONF, **tuning, **python_conf(), **(extra_conf or {})}
    conf = merge_spark_conf(ours, jars.spark_conf() if jars else {})
    return {**conf, **java_options_conf(conf, extra_conf)}


def java_options_conf(conf: dict[str, str], extra_conf: dict[str, str] | None = None) -> dict[str, str]:
    """The driver's Java options: the caller's, C2 deferred (spark/jit_options.py), the JVM class
    archive (spark/class_archive.py); {} where spark-defaults.conf or PYSPARK_SUBMIT_ARGS set them, which
    the session's own would replace."""
    if class_archive.JAVA_OPTIONS in user_set_keys() - set(extra_conf or {}):
        return {}
    conf = {**conf, **jit_options.session_java_options(conf)}
    conf = {**conf, **class_archive.session_java_options(conf)}
    options = conf.get(class_archive.JAVA_OPTIONS)
    return {class_archive.JAVA_OPTIONS: options} if options else {}


def small_batch_conf(extra_conf: dict[str, str] | None = None) -> dict[str, str]:
    """SMALL_BATCH_CONF without the settings the caller (extra_conf), spark-defaults.conf or
    PYSPARK_SUBMIT_ARGS set: theirs stand."""
    theirs = set(extra_conf or {}) | user_set_keys()
    return {key: value for key, value in SMALL_BATCH_CONF.items() if key not in theirs}


def log_small_batch_conf(extra_conf: dict[str, str] | None = None) -> None:
    """One line in the task log: the small-batch settings a new local session gets, and those kept."""
    tuning = small_batch_conf(extra_conf)
    kept = sorted(set(SMALL_BATCH_CONF) - set(tuning))
    log.info(
        "local Spark session: small-batch settings %s%s",
        ", ".join(f"{key}={value}" for key, value in tuning.items()) or "none",
        f"; set elsewhere, kept as set: {', '.join(kept)}" if kept else "",
    )


def log_java_options(conf: dict[str, str]) -> None:
    """Lines in the task log: how the new session's JVM compiles, whether it starts from a class archive."""
    log.info("local Spark session: %s", jit_options.describe(conf))
    options = conf.get(class_archive.JAVA_OPTIONS, "")
    if "-XX:SharedArchiveFile=" in options:
        log.info("local Spark session: JVM class archive %s", options.split("=", 1)[1].split()[0])
    elif class_archive.archive_folder() is not None:
        log.info(
            "local Spark session: no JVM class archive for this Java and these jars; "
            "`deltamerge jvm-archive` makes one, and each fresh task's session then starts seconds sooner"
        )


def user_set_keys() -> set[str]:
    """The Spark settings named in spark-defaults.conf (SPARK_CONF_DIR, else SPARK_HOME/conf) and in
    PYSPARK_SUBMIT_ARGS (`--conf key=value`), which a new local session reads too."""
    keys = set()
    home = os.environ.get("SPARK_HOME")
    folder = os.environ.get("SPARK_CONF_DIR") or (os.path.join(home, "conf") if home else None)
    try:
        with open(os.path.join(folder, "spark-defaults.conf"), encoding="utf-8") as lines:
            keys |= {line.split()[0] for line in lines if line.strip() and not line.lstrip().startswith("#")}
    except (OSError, TypeError):  # no such file (or folder): nothing set there
        pass
    words = os.environ.get("PYSPARK_SUBMIT_ARGS", "").split()
    keys |= {words[i + 1].split("=", 1)[0] for i in range(len(words) - 1) if words[i] == "--conf"}
    return keys


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
    log_small_batch_conf(extra_conf)
    log_java_options(conf)
    builder = SparkSession.builder.master(master).appName("deltamerge")
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
