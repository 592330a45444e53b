"""A DAG whose load makes child tables: the XCom metrics keep the root table's keys and add `tables`."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from .conftest import DAGS_FOLDER, DEMO_DIR, dags_folder_module

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

demo = dags_folder_module("run_demo")


def test_an_operator_load_reports_every_tables_metrics(airflow_db):
    dag = demo.load_dag(DAGS_FOLDER, "deltamerge_test_nested.py")
    run = dag.test()
    assert run.state == "success"
    metrics = demo.return_value(run, "load")
    assert metrics["numTargetRowsInserted"] == 3
    assert metrics["tables"]["orders"]["numTargetRowsInserted"] == 3
    assert metrics["tables"]["orders__items"]["numTargetRowsInserted"] == 3
    items = DeltaTable(f"{DEMO_DIR}/lake/nested/orders__items").to_pyarrow_table().to_pylist()
    assert sorted((r["n"], json.loads(r["tags"])) for r in items) == [
        (0, ["a", "b"]),
        (1, ["a", "b"]),
        (2, ["a", "b"]),
    ]
    assert all(r["_dlt_root_id"] == r["_dlt_parent_id"] for r in items)
    assert not DeltaTable.is_deltatable(f"{DEMO_DIR}/lake/nested/orders__items__tags")
