"""DeltaMergeHook without Spark: mode per connection type, the spark-submit arguments, the argv
SparkSubmitHook builds from them, secret masking, and the environment of the spark-submit process."""

from __future__ import annotations

import json
import os

import pytest

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.hooks.deltamerge import (
    JOB_CONF,
    DeltaMergeHook,
    spark_submit_env,
    split_log_tail,
    submit_arguments,
)

from .submitting import set_connection


@pytest.mark.parametrize(
    ("conn_type", "mode"),
    [("spark", "submit"), ("spark_connect", "connect"), ("deltamerge", "local")],
)
def test_mode_follows_connection_type(monkeypatch, conn_type, mode):
    set_connection(monkeypatch, "target", conn_type=conn_type, host="local[2]")
    assert DeltaMergeHook("target").mode == mode


def test_no_connection_is_local_spark():
    assert DeltaMergeHook().mode == "local"


def test_connection_of_another_type_is_refused(monkeypatch):
    set_connection(monkeypatch, "pg", conn_type="postgres", host="db")
    with pytest.raises(ConfigError, match=r"conn_id: connection 'pg' has type 'postgres'"):
        _ = DeltaMergeHook("pg").mode


def test_submit_arguments_run_the_job_with_the_request_file(monkeypatch):
    monkeypatch.delenv("DELTA_SPARK_JARS", raising=False)  # no Delta jars anywhere
    args = submit_arguments("/tmp/x/request.json", name="deltamerge flights", python="/venv/bin/python")
    assert args == {
        "conf": {
            "spark.pyspark.python": "/venv/bin/python",
            "spark.pyspark.driver.python": "/venv/bin/python",
            **JOB_CONF,
        },
        "files": "/tmp/x/request.json",
        "name": "deltamerge flights",
        "application_args": ["--request-file", "/tmp/x/request.json"],
    }


def test_user_conf_and_options_are_merged(tmp_path):
    jar = tmp_path / "delta-spark_2.13-4.0.0.jar"
    jar.write_bytes(b"")
    args = submit_arguments(
        "/r.json",
        name="n",
        python="py",
        spark_conf={"spark.log.level": "INFO", "spark.executor.memory": "2g"},
        submit_options={"files": "/extra.txt", "jars": "/other.jar", "driver_memory": "1g"},
        delta_jars=[str(jar)],
    )
    assert args["files"] == "/r.json,/extra.txt"
    assert args["jars"] == f"/other.jar,{jar}"
    assert args["driver_memory"] == "1g"
    assert args["conf"]["spark.log.level"] == "INFO"
    assert args["conf"]["spark.executor.memory"] == "2g"
    assert args["conf"]["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"


def test_without_delta_jars_given_the_job_takes_those_delta_spark_jars_names(tmp_path, monkeypatch):
    """As a new local session does (spark/session.py): a worker with DELTA_SPARK_JARS set runs delta-spark."""
    from airflow_provider_deltamerge.spark.session import local_session_conf

    jar = tmp_path / "delta-spark_2.13-4.0.0.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("DELTA_SPARK_JARS", str(jar))
    args = submit_arguments("/r.json", name="n", python="py")
    assert args["jars"] == str(jar)
    assert args["conf"]["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert local_session_conf()["spark.jars"] == str(jar)
    given = tmp_path / "delta-spark_2.13-4.1.0.jar"
    given.write_bytes(b"")
    assert submit_arguments("/r.json", name="n", python="py", delta_jars=[str(given)])["jars"] == str(given)
    monkeypatch.setenv("DELTA_SPARK_JARS", str(tmp_path / "missing.jar"))
    with pytest.raises(ConfigError, match="missing.jar' does not exist") as refused:
        submit_arguments("/r.json", name="n", python="py")
    assert refused.value.argument == "DELTA_SPARK_JARS"


def test_unknown_submit_option_is_named():
    with pytest.raises(ConfigError, match=r"submit_options: unknown option\(s\) \['application'\]"):
        submit_arguments("/r.json", name="n", python="py", submit_options={"application": "evil.py"})


def test_spark_submit_command_is_what_spark_submit_hook_runs(monkeypatch, capsys):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    set_connection(
        monkeypatch,
        "cluster",
        conn_type="spark",
        host="spark://127.0.0.1",
        port=7077,
        password="conn-password-123",
        extra={"deploy-mode": "client"},
    )
    args = submit_arguments(
        "/tmp/req/request.json",
        name="deltamerge flights",
        python="/venv/bin/python",
        spark_conf={"spark.hadoop.fs.s3a.secret.key": "TOPSECRET-456"},
    )
    command = SparkSubmitHook(conn_id="cluster", **args)._build_spark_submit_command("/pkg/remote_job.py")
    assert command[:3] == ["spark-submit", "--master", "spark://127.0.0.1:7077"]
    assert command[-3:] == ["/pkg/remote_job.py", "--request-file", "/tmp/req/request.json"]
    assert "--files" in command and command[command.index("--files") + 1] == "/tmp/req/request.json"
    assert command[command.index("--deploy-mode") + 1] == "client"
    assert "spark.pyspark.python=/venv/bin/python" in command
    logged = "".join(capsys.readouterr())  # Airflow 3 logs through structlog to stdout
    assert "Spark-Submit cmd" in logged
    assert "TOPSECRET-456" not in logged and "conn-password-123" not in logged


def test_spark_submit_env_uses_pyspark_spark_when_spark_home_is_unset():
    env = spark_submit_env({"PATH": "/usr/bin"})
    assert os.path.isfile(os.path.join(env["SPARK_HOME"], "bin", "spark-submit"))
    assert env["PATH"].split(os.pathsep)[0] == os.path.join(env["SPARK_HOME"], "bin")
    assert spark_submit_env({"SPARK_HOME": "/opt/spark", "PATH": ""})["SPARK_HOME"] == "/opt/spark"


def test_failure_message_split_into_cause_and_log_tail():
    message = (
        "Cannot execute: spark-submit ... Error code is: 1.\nLast spark-submit output:\nline 1\nValueError: x"
    )
    assert split_log_tail(message) == (
        "Cannot execute: spark-submit ... Error code is: 1.",
        "line 1\nValueError: x",
    )


def test_submitted_load_metrics_come_from_the_load_record():
    from airflow_provider_deltamerge.hooks.deltamerge import submitted_load_metrics
    from airflow_provider_deltamerge.model.request import LoadRequest

    run = {"dag_id": "d", "task_id": "t", "run_id": "r", "try_number": 2}
    request = LoadRequest.create(
        source="landing.t", dataset="/lake", table_name="Orders", run_context=run, load_id="20.0"
    )
    other_task = {"load_id": "15.0", "dag_id": "d", "task_id": "other", "run_id": "r", "metrics": {"n": 0}}
    earlier_attempt = {"load_id": "10.0", "dag_id": "d", "task_id": "t", "run_id": "r", "metrics": {"n": 1}}
    ours = {"load_id": "20.0", "dag_id": "d", "task_id": "t", "run_id": "r", "metrics": {"n": 2}}
    assert submitted_load_metrics(request, set(), [earlier_attempt, ours]) == {"n": 2}
    # the job finished the earlier attempt's committed load: its record is new, and of this task
    assert submitted_load_metrics(request, {"15.0"}, [earlier_attempt, other_task]) == {"n": 1}
    # nothing new of this task: the job had nothing to load
    assert submitted_load_metrics(request, {"10.0"}, [earlier_attempt, other_task]) == {
        "load_id": None,
        "table": "orders",
    }


def test_a_submitted_catalog_tables_metrics_name_it_as_a_load_in_process_does():
    """The record a spark-submit job writes lacks what its LoadInfo adds for a catalog table (the job
    placed the table in the dataset, or refused): the hook adds it, so the task returns what a load in
    process returns. (Against a real metastore: tests/airflow/test_catalog_submit.py, with Delta's jars.)"""
    from airflow_provider_deltamerge.hooks.deltamerge import catalog_table_metrics
    from airflow_provider_deltamerge.model.request import LoadRequest

    by_name = LoadRequest.create(source="landing.t", dataset="file:///lake/sales", table_name="sales.Orders")
    assert catalog_table_metrics(by_name) == {
        "catalog_table": "sales.orders",
        "table_location": "/lake/sales/orders",
    }
    by_path = LoadRequest.create(source="landing.t", dataset="/lake", table_name="Orders")
    assert catalog_table_metrics(by_path) == {}


def test_submit_options_take_every_argument_of_the_installed_spark_submit_hook():
    import inspect

    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from airflow_provider_deltamerge.hooks.deltamerge import check_submit_options

    taken = set(inspect.signature(SparkSubmitHook.__init__).parameters) - {
        "self",
        "conf",
        "conn_id",
        "name",
        "application_args",
    }
    options = {name: None for name in taken}
    assert check_submit_options(options) == options
    for ours in ("conf", "conn_id", "name", "application_args"):
        with pytest.raises(ConfigError, match=rf"submit_options: unknown option\(s\) \['{ours}'\]"):
            check_submit_options({ours: "x"})


def test_storage_options_reach_the_job_in_its_environment_not_its_request_or_command(monkeypatch):
    from airflow_provider_deltamerge.hooks.deltamerge import job_env
    from airflow_provider_deltamerge.model.request import LoadRequest
    from airflow_provider_deltamerge.submit.remote_job import STORAGE_OPTIONS_ENV, take_storage_options

    options = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "TOPSECRET-789"}
    request = LoadRequest.create(
        dataset="s3://bucket/lake", table_name="orders", source={"table": "orders"}, storage_options=options
    )
    arguments = submit_arguments("/tmp/request.json", name="deltamerge orders", python="/usr/bin/python3")
    assert "TOPSECRET-789" not in json.dumps(arguments) and "TOPSECRET-789" not in request.to_json()

    env = job_env({"PATH": "/usr/bin", STORAGE_OPTIONS_ENV: "stale"}, request.storage_options)
    assert json.loads(env[STORAGE_OPTIONS_ENV]) == options
    assert STORAGE_OPTIONS_ENV not in job_env({STORAGE_OPTIONS_ENV: "stale"}, None)

    monkeypatch.setenv(STORAGE_OPTIONS_ENV, env[STORAGE_OPTIONS_ENV])
    assert take_storage_options() == options
    assert STORAGE_OPTIONS_ENV not in os.environ  # nothing later in the job sees it
    assert LoadRequest.from_json(request.to_json(), options) == request
