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
def landing(tmp_path, airflow_db, s3, monkeypatch):
    """The orders as parquet in a landing folder, and the connection as an AIRFLOW_CONN_ variable in JSON
    form."""
    connection = {
        "conn_type": "aws",
        "login": s3.access_key,
        "password": s3.secret_key,
        "extra": {"endpoint_url": s3.endpoint, "region_name": "us-east-1"},
    }
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(connection))
    folder = tmp_path / "landing"
    folder.mkdir()
    pq.write_table(ORDERS, folder / "orders.parquet")
    return folder


@pytest.fixture
def write_dag():
    """Writes a DAG module into the dags folder (dag.test() runs DAGs of files there) and returns its
    DAG; the files go when the test ends."""
    written = []

    def write(name: str, text: str):
        path = DAGS_FOLDER / f"{name}.py"
        path.write_text(text)
        written.append(path)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.dag

    yield write
    for path in written:
        path.unlink()


@pytest.fixture
def storage_dag(landing, s3, write_dag):
    dataset = s3.create_bucket("airflow-lake") + "/shop"
    text = DAG_FILE.format(landing=str(landing), dataset=dataset, conn_id=CONN_ID)
    return write_dag("deltamerge_test_storage", text), dataset


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


def test_the_documented_example_loads_into_s3(landing, s3, write_dag):
    from tests.airflow.test_documented_examples import python_examples

    [(_, example)] = python_examples("docs/STORAGE.md")
    dataset = s3.create_bucket("my-bucket") + "/lake"
    example = example.replace('"/landing/orders"', repr(str(landing))).replace(
        '"s3://my-bucket/lake"', repr(dataset)
    )
    dag = write_dag("documented_storage_example", example)
    run = dag.test(logical_date=datetime(2024, 1, 2, tzinfo=timezone.utc))

    assert run.state == "success"
    table = DeltaTable(f"{dataset}/orders", storage_options=s3.storage_options())
    assert table.to_pyarrow_table(columns=["id", "amount"]).sort_by("id") == ORDERS
