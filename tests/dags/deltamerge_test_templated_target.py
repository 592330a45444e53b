"""Test DAG: a load whose dataset and table name are templates, rendered from the DAG's params. The
task declares an AssetAlias when parsed and emits the rendered table's Asset event when it runs."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators import DeltaMergeOperator

DEMO_DIR = os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")

with DAG(
    dag_id="deltamerge_test_templated_target",
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    params={"lake": f"{DEMO_DIR}/lake/templated", "table": "Orders"},
    tags=["deltamerge", "test"],
) as dag:
    DeltaMergeOperator(
        task_id="load",
        source={"sql": "SELECT id, 'new' AS status FROM range(3)"},
        dataset="{{ params.lake }}",
        table_name="{{ params.table }}",
        write_disposition="append",
    )
