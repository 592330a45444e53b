"""Test DAG: an upsert of rows holding arrays, which become child tables; max_table_nesting=1 keeps the
arrays inside the elements as JSON."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators import DeltaMergeOperator

DEMO_DIR = os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")

with DAG(
    dag_id="deltamerge_test_nested",
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    tags=["deltamerge", "test"],
) as dag:
    DeltaMergeOperator(
        task_id="load",
        source={
            "sql": "SELECT id, array(named_struct('n', id, 'tags', array('a', 'b'))) AS items FROM range(3)"
        },
        dataset=f"{DEMO_DIR}/lake/nested",
        table_name="orders",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key="id",
        max_table_nesting=1,
    )
