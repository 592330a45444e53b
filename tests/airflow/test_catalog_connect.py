"""A table named through a real Hive metastore (`sales.orders`), loaded by DeltaMergeHook over Spark
Connect: the Connect server on 127.0.0.1 has Hive support on the test's own Derby metastore (and Delta's
jars where DELTA_SPARK_JARS names them); the hook's client, which has no JVM of its own, asks the
server's catalog where the table is, creates and registers it. The loads run in a process of their own
(tests/catalog_connect_job.py), which reads the catalog back through a Connect session of its own; Derby
is held by the server alone, and every server is stopped by its test.

Registering a Delta table needs Delta's catalog on the server: those loads run where DELTA_SPARK_JARS
names Delta's jars; the refusals of a server without them run always.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.delta.store import read_load
from airflow_provider_deltamerge.model.delta_jars import delta_jars_from_env
from airflow_provider_deltamerge.model.request import LoadRequest
from tests.catalog.test_hive_catalog import needs_jars
from tests.hive_metastore import hive_conf

from .spark_servers import ROOT, connect_server, connect_writer
from .test_catalog_submit import FIRST, SECOND, orders_request, table_rows

pytestmark = pytest.mark.spark

JOB = ROOT / "tests" / "catalog_connect_job.py"


def over_connect(tmp_path: Path, batch: str, rows: list[dict], **overrides) -> LoadRequest:
    """An upsert of `rows` into sales.orders, as over Spark Connect: no dataset (the catalog says where),
    and the writer "auto" picks."""
    return orders_request(tmp_path, batch, rows, "auto", dataset=None, **overrides)


def loaded_over_connect(tmp_path: Path, requests: list[LoadRequest], delta_jars) -> list[dict]:
    """Each request run by the hook with a Spark Connect connection to a server with Hive support on a
    metastore in tmp_path (and `delta_jars`), and what its catalog held after each; the server stopped."""
    metastore = str(tmp_path / "hive")
    with connect_server(tmp_path / "connect", conf=hive_conf(metastore), delta_jars=delta_jars) as port:
        connection = {"conn_type": "spark_connect", "host": "127.0.0.1", "port": port}
        done = subprocess.run(
            [sys.executable, str(JOB)],
            input=json.dumps([request.to_json() for request in requests]),
            env={**os.environ, "AIRFLOW_CONN_SPARK_REMOTE": json.dumps(connection)},
            capture_output=True,
            text=True,
            timeout=600,
        )
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, (done.stdout[-3000:], done.stderr[-6000:])
    return json.loads(results[-1][len("RESULT ") :])


@needs_jars
def test_spark_connect_creates_registers_and_merges_into_a_metastore_table(tmp_path):
    warehouse = tmp_path / "hive" / "warehouse"
    location = str(warehouse / "sales.db" / "orders")  # the schema's location: no dataset is given
    where = {"catalog_table": "sales.orders", "table_location": location}  # as a load in process reports
    missing = over_connect(tmp_path, "third", SECOND, table_name="nowhere.orders", create_schema=False)
    first, second, refused = loaded_over_connect(
        tmp_path,
        [over_connect(tmp_path, "first", FIRST), over_connect(tmp_path, "second", SECOND), missing],
        delta_jars_from_env(),
    )

    assert "metrics" in first and "metrics" in second, (first, second)
    metrics = first["metrics"]
    assert metrics == {**read_load(str(warehouse / "sales.db"), metrics["load_id"])["metrics"], **where}
    assert metrics["writer"] == connect_writer() and metrics["numTargetRowsInserted"] == 2
    seen = first["catalog"]
    assert seen["schemas"] == ["default", "sales"]
    assert seen["tables"]["sales"] == ["_dlt_loads", "_dlt_pipeline_state", "orders"]
    assert seen["entry"] == {"Provider": "delta", "Location": f"file:{location}"}
    assert seen["rows"] == FIRST and seen["loads"] == 1

    then = second["metrics"]
    assert then["load_id"] != metrics["load_id"]
    assert then == {**read_load(str(warehouse / "sales.db"), then["load_id"])["metrics"], **where}
    assert (then["numTargetRowsUpdated"], then["numTargetRowsInserted"]) == (1, 1)
    seen = second["catalog"]
    assert seen["tables"]["sales"] == ["_dlt_loads", "_dlt_pipeline_state", "orders"]
    assert seen["rows"] == [FIRST[0], *SECOND] == table_rows(location)
    assert seen["loads"] == 2

    assert refused["error"]["type"] == "CatalogError"
    message = refused["error"]["message"]
    assert "holds no schema 'nowhere' (it holds: default, sales)" in message
    assert "create_schema=True" in message
    assert refused["catalog"]["schemas"] == ["default", "sales"]  # nothing written
    assert sorted(p.name for p in warehouse.iterdir()) == ["sales.db"]
    assert DeltaTable(location).version() == 1


def test_spark_connect_without_delta_refuses_before_anything_is_written(tmp_path):
    """A server without Delta's jars cannot register a Delta table: a new table is refused saying what
    the server needs, and a missing schema naming those the catalog holds; neither writes anything."""
    missing = over_connect(tmp_path, "first", FIRST, table_name="nowhere.orders", create_schema=False)
    new = over_connect(tmp_path, "second", FIRST)
    no_schema, no_delta = loaded_over_connect(tmp_path, [missing, new], delta_jars=None)

    assert no_schema["error"]["type"] == "CatalogError"
    assert "holds no schema 'nowhere' (it holds: default)" in no_schema["error"]["message"]
    assert no_delta["error"]["type"] == "CatalogError"
    message = no_delta["error"]["message"]
    assert "table 'sales.orders': is not in the catalog" in message
    assert "needs Delta's catalog in the session" in message
    assert "Spark Connect server does not list io.delta.sql.DeltaSparkSessionExtension" in message
    assert "Nothing was written" in message
    assert no_delta["catalog"] == {"schemas": ["default"], "tables": {"default": []}}
    assert list((tmp_path / "hive" / "warehouse").glob("**/*")) == []
