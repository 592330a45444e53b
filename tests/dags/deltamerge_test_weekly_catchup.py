"""Test DAG for the end-to-end scheduler test: a weekly catchup DAG loaded with `airflow backfill create`.

The same load as dags_examples/nycflights13_flights_weekly.py (a weekly merge of the flights windowed on
time_hour, the week taken from the timetable), but its start_date lies in the future so the scheduler
creates no runs of its own: every run comes from the backfill, and the test can count them.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_deltamerge import Incremental
from airflow_provider_deltamerge.operators import DeltaMergeOperator

DEMO_DIR = os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")

with DAG(
    dag_id="deltamerge_test_weekly_catchup",
    schedule="@weekly",
    start_date=datetime(2099, 1, 4, tzinfo=timezone.utc),
    catchup=True,
    max_active_runs=1,
    tags=["deltamerge", "test"],
) as dag:
    DeltaMergeOperator(
        task_id="merge_flights",
        source={"format": "parquet", "path": f"{DEMO_DIR}/landing/flights"},
        dataset=f"{DEMO_DIR}/lake/nycflights13",
        table_name="flights",
        write_disposition="merge",
        primary_key=["year", "month", "day", "carrier", "flight", "origin"],
        incremental=Incremental("time_hour", initial_value="2013-01-01T00:00:00Z"),
        pipeline_name="nycflights13",
    )
