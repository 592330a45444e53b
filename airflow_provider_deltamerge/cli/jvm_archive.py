"""`deltamerge jvm-archive`: make the local session's JVM class archive (spark/class_archive.py).

A child process starts a local session whose JVM writes the archive as it exits, runs a few small
loads into a temporary dataset (so the classes a load uses are loaded), stops the session and waits
for its JVM. Only an archive whose JVM exited cleanly is put in place, by a rename: a JVM that maps a
truncated archive crashes.

    python -m airflow_provider_deltamerge.cli.jvm_archive PARTIAL   # the child, run by make_archive
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..spark import class_archive

JVM_EXIT_SECONDS = 300  # writing the archive as the JVM exits takes seconds; a hung JVM is given up on


def make_archive(spark_conf: dict[str, str] | None = None) -> dict[str, Any]:
    """Make the archive a local session with `spark_conf` uses, replacing an older one of its name."""
    path = archive_of(spark_conf)
    if path is None:
        raise ConfigError(
            class_archive.ENV, "is 'off': unset it, or name a folder, to make a JVM class archive"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.stem}.{os.getpid()}.partial")
    started = time.perf_counter()
    try:
        child = subprocess.run(
            [sys.executable, "-m", __name__, str(partial)],
            env={**os.environ, "DELTAMERGE_JVM_ARCHIVE_CONF": _conf_text(spark_conf)},
            capture_output=True,
            text=True,
        )
        if child.returncode != 0 or not partial.is_file():
            raise ConfigError(
                "jvm-archive",
                f"the session that writes the archive failed (exit code {child.returncode}); nothing was "
                f"put in place. Its last output:\n{(child.stderr or child.stdout)[-2000:]}",
            )
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return {
        "archive": str(path),
        "bytes": path.stat().st_size,
        "seconds": round(time.perf_counter() - started, 1),
    }


def archive_of(spark_conf: dict[str, str] | None = None) -> Path | None:
    """The archive a new local session with `spark_conf` looks for: named by the conf that session gets,
    with the jars DELTA_SPARK_JARS adds (the session that writes the archive has them too)."""
    from ..spark.session import local_session_conf

    return class_archive.archive_path(local_session_conf(spark_conf))


def _conf_text(spark_conf: dict[str, str] | None) -> str:
    import json

    return json.dumps(spark_conf or {})


def _conf_from_env() -> dict[str, str]:
    import json

    return json.loads(os.environ.get("DELTAMERGE_JVM_ARCHIVE_CONF") or "{}")


def _write(partial: Path) -> int:
    """The child: a session writing `partial` at exit, a few loads, then the JVM's clean exit awaited."""
    from pyspark import SparkContext

    from ..load import run_load
    from ..spark.session import default_session

    conf = _conf_from_env()
    spark = default_session("local[*]", {**conf, **class_archive.writing_java_options(partial, conf)})
    with tempfile.TemporaryDirectory() as dataset:
        _typical_loads(spark, dataset, run_load)
    spark.stop()
    gateway = SparkContext._gateway
    jvm = gateway.proc
    gateway.shutdown()
    jvm.stdin.close()  # the JVM exits on its standard input's end, writing the archive as it does
    return jvm.wait(timeout=JVM_EXIT_SECONDS)


def _typical_loads(spark, dataset: str, run_load) -> None:
    """Loads that use what a task's load uses: Python rows and a DataFrame, append and upsert, child
    tables, the state tables."""
    rows = [{"id": i, "name": f"n{i}", "tags": [{"t": i}], "at": "2024-01-01T00:00:00Z"} for i in range(50)]
    run_load(rows, spark=spark, dataset=dataset, table_name="rows", backend="delta-rs")
    frame = spark.range(1000).selectExpr("id", "CAST(id AS STRING) AS name", "id * 1.5 AS x")
    upsert = {"disposition": "merge", "strategy": "upsert"}
    for _ in range(2):
        run_load(
            frame,
            spark=spark,
            dataset=dataset,
            table_name="frame",
            write_disposition=upsert,
            primary_key="id",
            backend="delta-rs",
        )


if __name__ == "__main__":
    from ..submit.process_exit import exit_with

    exit_with(lambda: _write(Path(sys.argv[1])))
