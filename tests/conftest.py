"""Shared fixtures: one real local SparkSession for the whole run, and a fresh dataset folder per test.

DELTA_SPARK_JARS may point at local Delta jar files (delta-spark and delta-storage); the session is then
built with them and the delta-spark writer runs too. Nothing is ever downloaded.
"""

from __future__ import annotations

import logging
import os

import pytest

# Sessions the tests start use no JVM class archive a developer may have made (spark/class_archive.py):
# tests that start fresh processes use the one this run makes (jvm_class_archive below), and
# tests/cli/test_jvm_archive.py checks that archive and makes its own where it fails one.
os.environ.setdefault("DELTAMERGE_JVM_ARCHIVE", "off")

# py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after pytest has
# closed the streams its handlers write to.
logging.getLogger("py4j").setLevel(logging.WARNING)

WRITERS = ("delta-rs", "delta-spark")


@pytest.fixture(scope="session", autouse=True)
def fault_points():
    """Loads in this process fail where DELTAMERGE_FAIL_AT says (tests/faults.py)."""
    from tests import faults

    faults.install()


@pytest.fixture(scope="session")
def made_jvm_class_archive(tmp_path_factory) -> dict:
    """One JVM class archive made for this run by `deltamerge jvm-archive --json`, run as a user runs it,
    into a folder of the run's own; what the command printed."""
    import json
    import subprocess
    import sys

    from airflow_provider_deltamerge.spark import class_archive

    folder = tmp_path_factory.mktemp("jvm-archive")
    command = "from airflow_provider_deltamerge.cli.main import run; run()"
    made = subprocess.run(
        [sys.executable, "-c", command, "jvm-archive", "--json"],
        env={**os.environ, class_archive.ENV: str(folder), "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    return json.loads(made.stdout)


@pytest.fixture
def jvm_class_archive(made_jvm_class_archive, monkeypatch) -> dict:
    """For the test, new local sessions, and the fresh processes it starts (Airflow tasks, the CLI, the
    cold benchmark), start from the run's JVM class archive, as a deployment's tasks do once it is made:
    each saves seconds of class loading. Modules whose tests start such processes use it
    (`pytest.mark.usefixtures`)."""
    from airflow_provider_deltamerge.spark import class_archive

    folder = os.path.dirname(made_jvm_class_archive["archive"])
    monkeypatch.setenv(class_archive.ENV, folder)
    return made_jvm_class_archive


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from airflow_provider_deltamerge.model.delta_jars import delta_jars_from_env
    from airflow_provider_deltamerge.spark.session import default_session

    # SQL that reaches the session catalog (delta-spark's OPTIMIZE, tables by name) makes the default
    # database's folder: in the run's own folder, not in the working directory the hook tests check
    warehouse = str(tmp_path_factory.mktemp("spark-warehouse"))
    session = default_session(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.warehouse.dir": warehouse,
        },
        delta_jars=delta_jars_from_env(),
    )
    yield session
    session.stop()


@pytest.fixture
def dataset(tmp_path):
    """A base location for a test's tables, as a plain path string."""
    return str(tmp_path / "lake")


@pytest.fixture(params=WRITERS)
def writer_backend(request, monkeypatch):
    """The writer a behaviour test runs with: run_load(backend="auto") resolves to it.

    The delta-spark run skips, saying why, where Delta's JVM classes are not in the session. Modules
    marked writer_independent run once, with the real selection.
    """
    backend = request.param
    if request.node.get_closest_marker("writer_independent"):
        if backend != WRITERS[0]:
            pytest.skip("this module does not depend on the writer; it runs once")
        return None
    if backend == "delta-spark":
        from airflow_provider_deltamerge.delta.delta_spark_status import delta_spark_status

        available, why = delta_spark_status(request.getfixturevalue("spark"))
        if not available:
            pytest.skip(
                f"delta-spark writer: {why}; set DELTA_SPARK_JARS to local delta-spark and delta-storage "
                "jar files to run it (nothing is downloaded)"
            )
    from airflow_provider_deltamerge import load
    from airflow_provider_deltamerge.delta import selection
    from airflow_provider_deltamerge.load import batch_writer

    select = selection.select_writer
    for module in (load, batch_writer):  # the writer a load starts with, and auto's choice by the batch
        monkeypatch.setattr(
            module,
            "select_writer",
            lambda chosen, spark, options=None, batch_bytes=None, table_path=None: select(
                backend if chosen == "auto" else chosen, spark, options, table_path=table_path
            ),
        )
    return backend
