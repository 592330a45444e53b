"""Test DAG: scheduled on the flights table's asset; returns the asset events that triggered it."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone

from airflow.sdk import DAG, Asset, task

DEMO_DIR = os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")
FLIGHTS = Asset(uri=f"file://{DEMO_DIR}/lake/nycflights13/flights")

with DAG(
    dag_id="deltamerge_test_flights_consumer",
    schedule=[FLIGHTS],
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    tags=["deltamerge", "test"],
) as dag:

    @task
    def read_events(triggering_asset_events=None) -> list[dict]:
        return [dict(event.extra) for event in triggering_asset_events[FLIGHTS]]

    read_events()
