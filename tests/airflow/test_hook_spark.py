"""DeltaMergeHook for real, in each place a load can run: in process, spark-submit to local[2],
spark-submit to a standalone master and worker, and a Spark Connect server (all on loopback, stopped
afterwards). Each load is read back with deltalake and compared with its load record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.delta.store import read_load, read_loads
from airflow_provider_deltamerge.errors import ConfigError, JobFailedError
from airflow_provider_deltamerge.hooks import DeltaMergeHook
from airflow_provider_deltamerge.hooks import deltamerge as hook_module
from airflow_provider_deltamerge.model.request import LoadRequest
from tests import store_reads

from .spark_servers import ROOT, connect_server, connect_writer, expected_writer, standalone_cluster
from .submitting import CREDENTIALS, set_connection

JOB_WITH_FAULTS = ROOT / "tests" / "job_with_faults.py"  # the package's job, with the test fault points

pytestmark = pytest.mark.spark

CONN_PASSWORD = "conn-password-s3cr3t"


def landing(folder: Path, first_id: int = 1, last_id: int = 6) -> str:
    """A parquet file of orders (by default six), two per day from 2024-01-01."""
    rows = [
        {
            "order_id": n,
            "status": "new",
            "amount": 10.0 * n,
            "updated_at": datetime(2024, 1, 1 + (n - 1) // 2, 12, tzinfo=timezone.utc),
        }
        for n in range(first_id, last_id + 1)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "orders.parquet")
    return str(folder)


def request_for(tmp_path: Path, **overrides) -> LoadRequest:
    arguments = {
        "source": {"format": "parquet", "path": landing(tmp_path / "landing")},
        "dataset": str(tmp_path / "lake"),
        "table_name": "Orders",
        "write_disposition": "merge",
        "primary_key": "order_id",
        "pipeline_name": "shop",
        "run_context": {"dag_id": "d", "task_id": "t", "run_id": "r", "try_number": 1, "run_type": "manual"},
        **overrides,
    }
    return LoadRequest.create(**arguments)


def assert_loaded(request: LoadRequest, metrics: dict, order_ids: list[int]) -> None:
    rows = DeltaTable(f"{request.dataset}/orders").to_pyarrow_table().to_pylist()
    assert sorted(r["order_id"] for r in rows) == order_ids
    assert read_load(request.dataset, metrics["load_id"])["metrics"] == metrics
    assert metrics["numTargetRowsInserted"] == len(order_ids)
    assert metrics["table"] == "orders"
    assert metrics["writer"] == expected_writer()


def test_in_process_local_spark(tmp_path):
    request = request_for(tmp_path)
    metrics = DeltaMergeHook().run(request)
    assert_loaded(request, metrics, [1, 2, 3, 4, 5, 6])


def test_spark_submit_local_reads_metrics_from_the_load_record(
    tmp_path, monkeypatch, submit_env, submit_conf, capfd
):
    set_connection(monkeypatch, "spark_local", conn_type="spark", host="local[2]", password=CONN_PASSWORD)
    incremental = {"cursor_path": "updated_at"}
    window = {"start": "2024-01-02T00:00:00Z", "end": "2024-01-03T00:00:00Z"}
    request = request_for(
        tmp_path, incremental=incremental, run_context={"run_id": "r", "run_type": "manual", "conf": window}
    )
    metrics = DeltaMergeHook("spark_local", spark_conf=submit_conf).run(request)
    assert_loaded(request, metrics, [3, 4])
    assert (metrics["window_start"], metrics["window_end"]) == (
        "2024-01-02T00:00:00+00:00",
        "2024-01-03T00:00:00+00:00",
    )
    output = "".join(capfd.readouterr())
    assert "Spark-Submit cmd" in output and "submit/remote_job.py --request-file" in output
    # the job's step lines reach the task log through spark-submit's output
    assert "load of orders | window  | run-conf-range [2024-01-02 00:00:00+00:00" in output
    assert "load of orders | stage   | 2 rows read, 2 staged" in output
    assert "load of orders | record  | load " in output
    assert CONN_PASSWORD not in output
    assert not [secret for secret in CREDENTIALS.values() if secret in output]
    assert not list(Path.cwd().glob("spark-warehouse"))


def test_the_job_module_reads_each_state_table_once_per_load(tmp_path, monkeypatch, submit_env, submit_conf):
    """Under spark-submit, the job reads `_dlt_loads` and `_dlt_pipeline_state` once each for a load
    of one window (a spy in the job's process counts them; tests/store_reads.py)."""
    set_connection(monkeypatch, "spark_local", conn_type="spark", host="local[2]")
    hook = DeltaMergeHook("spark_local", spark_conf=submit_conf)
    monkeypatch.setattr(hook_module, "remote_job_resource", lambda: JOB_WITH_FAULTS)
    counts = tmp_path / "reads.json"
    monkeypatch.setenv(store_reads.COUNT_FILE, str(counts))

    def day_load(start: str, end: str) -> LoadRequest:
        window = {"start": start, "end": end}
        run = {"run_id": f"manual__{start}", "run_type": "manual", "conf": window}
        return request_for(tmp_path, incremental={"cursor_path": "updated_at"}, run_context=run)

    hook.run(day_load("2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"))
    second = day_load("2024-01-02T00:00:00Z", "2024-01-03T00:00:00Z")
    metrics = hook.run(second)

    assert metrics["numTargetRowsInserted"] == 2 and metrics["rows_staged"] == 2
    assert json.loads(counts.read_text()) == {"_dlt_loads": 1, "_dlt_pipeline_state": 1}


def test_failed_job_raises_with_the_driver_log_tail(tmp_path, monkeypatch, submit_env, submit_conf):
    set_connection(monkeypatch, "spark_local", conn_type="spark", host="local[2]")
    request = request_for(tmp_path, source={"callable": "tests.airflow.sources_for_tests:corrupt_landing"})
    with pytest.raises(JobFailedError) as failure:
        DeltaMergeHook("spark_local", spark_conf=submit_conf).run(request)
    assert "spark job for file://" in str(failure.value) and "Error code is: 1" in str(failure.value)
    assert "ValueError: landing file orders-7.json is truncated" in failure.value.log_tail
    told = str(failure.value) + failure.value.log_tail
    assert not [secret for secret in CREDENTIALS.values() if secret in told]
    assert read_loads(request.dataset) == []


def test_spark_submit_to_a_standalone_cluster(tmp_path, monkeypatch, submit_env, submit_conf):
    with standalone_cluster(tmp_path / "cluster") as master:
        set_connection(monkeypatch, "spark_cluster", conn_type="spark", host=master)
        request = request_for(tmp_path)
        metrics = DeltaMergeHook(
            "spark_cluster", spark_conf=submit_conf, submit_options={"total_executor_cores": 1}
        ).run(request)
    assert_loaded(request, metrics, [1, 2, 3, 4, 5, 6])


CONNECT_LOADS = """
import collections, json, sys
from pyspark.sql.connect.client import core
from airflow_provider_deltamerge.hooks import DeltaMergeHook
from airflow_provider_deltamerge.model.request import LoadRequest
first, then = (LoadRequest.from_json(r) for r in json.loads(sys.stdin.read()))
DeltaMergeHook("spark_remote").run(first)
asked = collections.Counter()  # the plans the second load asks the server to analyse, by what it asks
analyze = core.SparkConnectClient._analyze
def counted(client, method, **kwargs):
    asked[method] += 1
    return analyze(client, method, **kwargs)
core.SparkConnectClient._analyze = counted
DeltaMergeHook("spark_remote").run(then)
print("analysed: " + json.dumps(asked))
"""


def test_spark_connect_session_with_a_token(tmp_path, submit_env):
    """In a fresh process, as an Airflow task runs: pyspark's Connect mode is process-wide. A first load
    creates the table; an upsert into it then asks the server to analyse three plans, each a round trip:
    the source's schema with its input order (the source's columns are all but its last), Spark's size
    estimate and the staged batch's schema (eight before: a DataFrame is now derived only where it changes
    the columns). Both batches are small, so the server compiles no class for them (spark/codegen.py),
    as it would for each new session."""
    token = "connect-token-0123456789"
    request = request_for(tmp_path)
    changes = landing(tmp_path / "changes", first_id=5, last_id=7)
    upsert = request_for(
        tmp_path,
        source={"format": "parquet", "path": changes},
        write_disposition={"disposition": "merge", "strategy": "upsert"},
    )
    with connect_server(tmp_path / "connect", token=token) as port:
        connection = {"conn_type": "spark_connect", "host": "localhost", "port": port, "password": token}
        env = {**os.environ, "AIRFLOW_CONN_SPARK_REMOTE": json.dumps(connection)}
        job = subprocess.run(
            [sys.executable, "-c", CONNECT_LOADS],
            input=json.dumps([request.to_json(), upsert.to_json()]),
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    output = job.stdout + job.stderr
    assert job.returncode == 0, output[-3000:]
    first, then = sorted(read_loads(request.dataset), key=lambda load: load["load_id"])
    assert first["metrics"]["numTargetRowsInserted"] == 6 and first["metrics"]["table"] == "orders"
    assert first["metrics"]["writer"] == then["metrics"]["writer"] == connect_writer()
    rows = DeltaTable(f"{request.dataset}/orders").to_pyarrow_table().to_pylist()
    assert sorted(r["order_id"] for r in rows) == [1, 2, 3, 4, 5, 6, 7]
    assert then["metrics"]["numTargetRowsUpdated"] == 2 and then["metrics"]["numTargetRowsInserted"] == 1
    [analysed] = [
        json.loads(line.split(": ", 1)[1]) for line in output.splitlines() if line.startswith("analysed: ")
    ]
    if connect_writer() == "delta-rs":  # Delta's MERGE on the server asks and compiles its own
        assert analysed == {"schema": 2, "explain": 1}, analysed
    server_log = (tmp_path / "connect" / "connect.log").read_text()
    assert "Spark Connect server started" in server_log
    if connect_writer() == "delta-rs":
        assert server_log.count("CodeGenerator: Code generated") == 0
    assert f"Spark Connect server localhost:{port}" in output
    assert token not in output


def test_spark_connect_refused_beside_a_local_session(tmp_path, monkeypatch):
    from airflow_provider_deltamerge.spark.session import default_session

    default_session()
    set_connection(monkeypatch, "spark_remote", conn_type="spark_connect", host="localhost", port=1)
    with pytest.raises(ConfigError, match="already runs a local SparkSession"):
        DeltaMergeHook("spark_remote").run(request_for(tmp_path))


def test_retry_after_a_job_killed_past_its_commit_reports_that_load(
    tmp_path, monkeypatch, submit_env, submit_conf
):
    """Attempt 1's job dies after its Delta commit, before its load record; attempt 2 (a retry of the
    same task) finishes that load instead of applying the batch again, and the hook reports it."""
    set_connection(monkeypatch, "spark_local", conn_type="spark", host="local[2]")
    run = {"dag_id": "d", "task_id": "t", "run_id": "r", "run_type": "manual"}
    hook = DeltaMergeHook("spark_local", spark_conf=submit_conf)
    monkeypatch.setattr(hook_module, "remote_job_resource", lambda: JOB_WITH_FAULTS)
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", "after_commit")
    monkeypatch.setenv("DELTAMERGE_FAIL_MODE", "kill")
    with pytest.raises(JobFailedError, match="Error code is: 137"):
        hook.run(request_for(tmp_path, run_context={**run, "try_number": 1}))
    assert read_loads(str(tmp_path / "lake")) == []
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")
    retry = request_for(tmp_path, run_context={**run, "try_number": 2})
    metrics = hook.run(retry)
    [load] = read_loads(retry.dataset)
    assert load["try_number"] == 1 and metrics == load["metrics"]
    assert_loaded(retry, metrics, [1, 2, 3, 4, 5, 6])
