"""Test DAG: a backfill as mapped tasks, one DeltaMergeOperator per window of backfill_windows.

Triggered with {"start": ..., "end": ...}; the windows are computed at run time from the conf, and each
mapped task loads its window (stateless) from a source that pushes the window down itself.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone

from airflow.sdk import DAG, get_current_context, task

from airflow_provider_deltamerge import backfill_windows
from airflow_provider_deltamerge.operators import DeltaMergeOperator

DEMO_DIR = os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")

with DAG(
    dag_id="deltamerge_test_mapped_backfill",
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    tags=["deltamerge", "test"],
) as dag:

    @task
    def windows() -> list[list[str]]:
        conf = get_current_context()["dag_run"].conf
        return [
            [a.isoformat(), b.isoformat()] for a, b in backfill_windows(conf["start"], conf["end"], "1 day")
        ]

    DeltaMergeOperator.partial(
        task_id="load_window",
        source={"callable": "tests.airflow.sources_for_tests:orders_in_window"},
        dataset=f"{DEMO_DIR}/lake/shop",
        table_name="orders",
        write_disposition="append",
        incremental={"cursor_path": "updated_at"},
        pipeline_name="shop",
        max_active_tis_per_dagrun=1,
    ).expand(window=windows())
