"""The spark-submit job module exits 0 every time its load succeeds.

deltalake 1.6 can abort the interpreter while it exits (SIGABRT, after the work is done); a job whose
load landed must still report success, or Airflow retries a finished load. Each run here is a fresh
Python process running the job module as spark-submit would, on local Spark.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from airflow_provider_deltamerge.delta.store import read_loads
from airflow_provider_deltamerge.model.request import LoadRequest
from airflow_provider_deltamerge.spark.class_archive import session_java_options

from .spark_servers import ROOT

pytestmark = pytest.mark.spark

RUNS = 3


def job_environment() -> dict[str, str]:
    """spark-submit's arguments for the job, its driver started from the run's JVM class archive (as a
    deployment that made one passes it in spark.driver.extraJavaOptions)."""
    archive = [f"--conf={option}={value}" for option, value in session_java_options().items()]
    submit = ["--master", "local[1]", "--conf", "spark.ui.enabled=false", *archive, "pyspark-shell"]
    return {
        **os.environ,
        "PYSPARK_SUBMIT_ARGS": shlex.join(submit),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


def test_a_successful_job_exits_zero_every_time(tmp_path, jvm_class_archive):
    dataset = str(tmp_path / "lake")
    codes = []
    for run in range(RUNS):
        request = LoadRequest.create(
            source={"sql": f"SELECT {run} AS id, 'run {run}' AS note"},
            dataset=dataset,
            table_name="notes",
            write_disposition="append",
        )
        request_file = tmp_path / f"request-{run}.json"
        request_file.write_text(request.to_json())
        job = subprocess.run(
            [
                sys.executable,
                "-m",
                "airflow_provider_deltamerge.submit.remote_job",
                "--request-file",
                str(request_file),
            ],
            cwd=tmp_path,
            env=job_environment(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        codes.append((job.returncode, job.stderr[-1500:] if job.returncode else ""))
    assert [code for code, _ in codes] == [0] * RUNS, codes
    assert len(read_loads(dataset)) == RUNS  # every run loaded, once
