"""Tables named through a real Hive metastore (Spark's built-in Hive support, Derby in a folder of the
test's own), each scenario in a process of its own (tests/catalog_job.py): one JVM per Derby folder.

Registering a Delta table (`USING delta`) needs Delta's jars in the session: those scenarios run where
DELTA_SPARK_JARS names them, with each writer; the refusals need no jars and run always.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from airflow_provider_deltamerge.model.delta_jars import ENV_VAR
from tests.faults import FAIL_AT, FAIL_MODE

pytestmark = pytest.mark.spark

JOB = os.path.join(os.path.dirname(os.path.dirname(__file__)), "catalog_job.py")
HAS_JARS = bool(os.environ.get(ENV_VAR, "").strip())
needs_jars = pytest.mark.skipif(
    not HAS_JARS,
    reason=f"registering a Delta table in a Hive metastore needs Delta's jars in the session: set {ENV_VAR} "
    "to local delta-spark and delta-storage jar files (nothing is downloaded)",
)
WRITERS = ("delta-rs", "delta-spark")


def job(scenario: str, root, writer: str, jars: bool = True, **env) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, **env}
    if not jars:
        env.pop(ENV_VAR, None)
    return subprocess.run(
        [sys.executable, JOB, scenario, str(root), writer],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def run_job(scenario: str, root, writer: str, jars: bool = True) -> dict:
    done = job(scenario, root, writer, jars)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, (done.stdout[-3000:], done.stderr[-6000:])
    return json.loads(results[-1][len("RESULT ") :])


def test_bad_catalog_names_are_refused_before_anything_is_written(tmp_path):
    seen = run_job("refusals", tmp_path, "delta-rs", jars=False)
    assert seen["crm.v"]["type"] == "CatalogError"
    assert "holds a view under this name" in seen["crm.v"]["message"]
    for name, kind in (("crm.pq", "parquet"), ("crm.hv", "hive")):
        assert seen[name]["type"] == "CatalogError", seen[name]
        assert f"holds a {kind} table under this name, not a Delta table" in seen[name]["message"]
    missing = seen["nowhere.orders"]
    assert missing["type"] == "CatalogError"
    assert "holds no schema 'nowhere' (it holds: crm, default)" in missing["message"]
    assert "create_schema=True" in missing["message"]
    assert seen["a.b.c.d"]["type"] == "CatalogError" and "has 4 parts" in seen["a.b.c.d"]["message"]
    assert seen["tables"] == ["hv", "pq", "v"]  # nothing registered
    assert "_dlt_loads" not in seen["crm_folder"]  # nothing written
    refused = seen["no_delta_catalog"]
    assert refused["type"] == "CatalogError" and "needs Delta's catalog in the session" in refused["message"]
    assert seen["sales_folder"] == []


@needs_jars
@pytest.mark.parametrize("writer", WRITERS)
def test_a_catalog_table_is_created_registered_and_loaded_with_every_disposition(tmp_path, writer):
    seen = run_job("dispositions", tmp_path, writer)
    assert seen["tables"] == ["_dlt_loads", "orders"]
    assert seen["entry"]["Provider"] == "delta"
    assert seen["entry"]["Location"].endswith("/warehouse/sales.db/orders")
    assert seen["after_append"] == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert seen["after_merge"] == [  # the column the merge added is visible to spark.table at once
        {"id": 1, "v": "a", "extra": None},
        {"id": 2, "v": "B", "extra": 7},
        {"id": 3, "v": "c", "extra": 8},
    ]
    assert seen["after_replace"] == [{"id": 9, "v": "z", "extra": 0}]
    assert seen["loads"] == 3
    assert seen["tables_with_child"] == ["_dlt_loads", "baskets", "baskets__items", "orders"]
    assert seen["child_rows"] == 2
    again = run_job("read_again", tmp_path, writer)  # another process: the entries survived
    assert again["tables"] == ["_dlt_loads", "baskets", "baskets__items", "orders"]
    assert [r["id"] for r in again["rows"]] == [9, 10]
    assert [(r["id"], r["v"]) for r in again["after_hook"]] == [(9, "z"), (10, "Y"), (11, "w")]
    assert again["hook_metrics"]["catalog_table"] == "sales.orders"
    assert again["hook_metrics"]["table_location"].endswith("/warehouse/sales.db/orders")
    if writer == "delta-rs":  # a session without Delta's jars finds the table and delta-rs loads it
        bare = run_job("without_jars", tmp_path, writer, jars=False)
        assert bare["ids"] == [9, 10, 11, 12] and bare["location"].endswith("/warehouse/sales.db/orders")


@needs_jars
def test_two_loads_creating_one_table_at_once_both_land_one_entry(tmp_path):
    seen = run_job("concurrent", tmp_path, "delta-rs")
    assert seen["errors"] == [None, None]
    assert seen["tables"] == ["_dlt_loads", "orders"]
    assert [r["id"] for r in seen["rows"]] == [1, 2]


@needs_jars
def test_a_registration_that_failed_after_its_commit_is_done_by_the_next_load(tmp_path):
    seen = run_job("registration_lost", tmp_path, "delta-rs")
    assert seen["failed"]["type"] == "RuntimeError"  # the load committed, its registration failed
    assert seen["before"] == []
    assert seen["after"] == ["_dlt_loads", "orders"]
    assert [r["id"] for r in seen["rows"]] == [1, 2]


@needs_jars
def test_the_cli_maintenance_and_a_recreated_table_by_catalog_name(tmp_path):
    seen = run_job("edges", tmp_path, "delta-rs")
    assert seen["cli_code"] == 0
    assert [row["table"] for row in seen["cli"]] == ["orders", "orders"]
    assert seen["maintained"]["catalog_table"] == "sales.orders"
    assert seen["maintained"]["table_location"].endswith("/warehouse/sales.db/orders")
    assert seen["recreated"]["type"] == "TableRecreatedError"  # dropped and recreated under its name
    assert "its version 1 is not the commit of load" in seen["recreated"]["message"]
    assert seen["version_after_refusal"] == 1  # nothing written
    assert seen["started_again"] == 1 and [r["id"] for r in seen["rows_after"]] == [1, 7, 8]
    assert {"_dlt_pipeline_state", "_dlt_tombstones_customers"} <= set(seen["cdc_tables"])
    assert seen["tombstones"] == 1  # the CDC companion, readable with SQL


@needs_jars
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("step", ["after_commit", "after_record"])
def test_a_catalog_load_killed_before_its_registration_and_retried_lands_once(tmp_path, writer, step):
    """Killed after its commit (unrecorded), or after its record (recorded): either way before the
    table's registration. The retry commits nothing more, registers the tables, and the load is recorded
    once, by the try that committed it, as a retry after a kill on a path does
    (tests/spark/test_exactly_once.py)."""
    killed = job("killed", tmp_path, writer, **{FAIL_AT: step, FAIL_MODE: "kill"})
    assert killed.returncode == 137, (killed.stdout[-2000:], killed.stderr[-4000:])
    seen = run_job("retried", tmp_path, writer)
    recorded = 1 if step == "after_record" else 0
    assert seen["left"] == {"tables": [], "loads": recorded, "version": 0}  # committed, unregistered
    assert seen["load_id"] == seen["committed_by"]  # the retry is the killed load, not another
    assert seen["version"] == 0, seen  # nothing applied again
    assert seen["tables"] == ["_dlt_loads", "orders"]  # both registered, by the retry
    assert seen["rows"] == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]  # the rows once
    assert seen["loads"] == [[seen["load_id"], 1]]  # the load recorded once, by the try that committed it
