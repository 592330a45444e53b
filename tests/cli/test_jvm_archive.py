"""`deltamerge jvm-archive`, run as a user runs it, and a fresh process's session starting from what it
made (spark/class_archive.py): the JVM loads Spark's classes from the archive."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from airflow_provider_deltamerge.spark import class_archive

pytestmark = pytest.mark.spark

CLI = [sys.executable, "-c", "from airflow_provider_deltamerge.cli.main import run; run()"]


def run(command: list[str], folder, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, class_archive.ENV: str(folder), "PYSPARK_PYTHON": sys.executable}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


def classes_from_archive(folder, log_file) -> int:
    """A fresh process's local session runs one job; how many classes its JVM took from the archive."""
    code = textwrap.dedent(
        f"""
        from airflow_provider_deltamerge.spark.session import default_session
        spark = default_session("local[1]", {{
            "spark.driver.extraJavaOptions": "-Xlog:class+load=info:file={log_file}"}})
        spark.range(10).toArrow()
        spark.stop()
        """
    )
    done = run([sys.executable, "-c", code], folder, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return sum("shared objects file (top)" in line for line in log_file.read_text().splitlines())


def test_a_fresh_session_loads_sparks_classes_from_the_archive_the_command_made(tmp_path, jvm_class_archive):
    # the run's archive, made by `deltamerge jvm-archive --json` (tests/conftest.py)
    made = Path(jvm_class_archive["archive"])
    assert made.stat().st_size == jvm_class_archive["bytes"] > 0
    assert sorted(made.parent.iterdir()) == [made]  # nothing partial left beside it
    assert classes_from_archive(made.parent, tmp_path / "after.log") > 1000


def test_a_session_that_cannot_write_the_archive_leaves_nothing_in_place(tmp_path):
    folder = tmp_path / "archives"
    done = run([*CLI, "jvm-archive", "--spark-conf", "spark.driver.memory=not-a-size"], folder)
    assert done.returncode == 1
    assert "deltamerge jvm-archive: error" in done.stderr and "nothing was put in place" in done.stderr
    assert list(folder.iterdir()) == []


def test_the_command_refuses_when_archives_are_turned_off(tmp_path):
    done = run([*CLI, "jvm-archive"], "off")
    assert done.returncode == 1 and "DELTAMERGE_JVM_ARCHIVE" in done.stderr
