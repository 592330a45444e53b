"""A DAG loading into S3 (moto's server on 127.0.0.1) with the credentials of an Airflow connection named
by `storage_conn_id`, run with dag.test(): the load and the maintenance task reach the table, and no
secret of the connection appears in the task log."""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.delta.store import read_loads
from tests.storage.servers import start_moto, stop

from .conftest import DAGS_FOLDER

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

CONN_ID = "lake_s3"
ORDERS = pa.table({"id": [1, 2, 3], "amount": [9.5, 3.0, 12.25]})

DAG_FILE = """
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators import DeltaMaintenanceOperator, DeltaMergeOperator

with DAG(
    "deltamerge_test_storage", schedule=None, start_date=datetime(2024, 1, 1, tzinfo=timezone.utc)
) as dag:
    load = DeltaMergeOperator(
        task_id="load",
        source={{"format": "parquet", "path": {landing!r}}},
        dataset={dataset!r},
        table_name="orders",
        write_disposition="merge",
        primary_key="id",
        backend="delta-rs",
        storage_conn_id={conn_id!r},
    )
    load >> DeltaMaintenanceOperator(
        task_id="maintain",
        dataset={dataset!r},
        table_name="orders",
        checkpoint=True,
        backend="delta-rs",
        storage_conn_id={conn_id!r},
    )
"""


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    process, server = start_moto(tmp_path_factory.mktemp("moto"))
    yield server
    stop(process)


@pytest.fixture
def storage_dag(tmp_path, airflow_db, s3, monkeypatch):
    """The DAG file in the dags folder, and the connection as an AIRFLOW_CONN_ variable in JSON form."""
    connection = {
        "conn_type": "aws",
        "login": s3.access_key,
        "password": s3.secret_key,
        "extra": {"endpoint_url": s3.endpoint, "region_name": "us-east-1"},
    }
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(connection))
    landing = tmp_path / "landing"
    landing.mkdir()
    pq.write_table(ORDERS, landing / "orders.parquet")
    dataset = s3.create_bucket("airflow-lake") + "/shop"
    path = DAGS_FOLDER / "deltamerge_test_storage.py"
    path.write_text(DAG_FILE.format(landing=str(landing), dataset=dataset, conn_id=CONN_ID))
    spec = importlib.util.spec_from_file_location("deltamerge_test_storage", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module.dag, dataset
    path.unlink()


def test_a_load_with_a_storage_connection_reaches_s3_and_logs_no_secret(storage_dag, s3, capfd):
    dag, dataset = storage_dag
    run = dag.test(logical_date=datetime(2024, 1, 2, tzinfo=timezone.utc))
    logged = "".join(capfd.readouterr())

    assert run.state == "success", logged[-3000:]
    options = s3.storage_options()
    table = DeltaTable(f"{dataset}/orders", storage_options=options)
    assert sorted(table.to_pyarrow_table(columns=["id"]).column("id").to_pylist()) == [1, 2, 3]
    [record] = read_loads(dataset, storage_options=options)
    assert (record["dag_id"], record["task_id"], record["table_version"]) == (
        "deltamerge_test_storage",
        "load",
        0,
    )
    assert "orders" in logged and "maintain" in logged  # the task log was captured
    assert s3.secret_key not in logged
    assert s3.secret_key not in json.dumps(record, default=str)
