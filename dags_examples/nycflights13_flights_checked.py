"""Data quality in the load's one commit: the weekly flights merge with three expectations.

Every Sunday a run merges the flights of the week before it (as nycflights13_flights_weekly.py does) into
``flights_checked``, checking each row first (docs/EXPECTATIONS.md):

- ``has_tail_number`` (warn): a flight without a tail number is loaded, and counted;
- ``departed`` (drop): a cancelled flight (no departure time) is left out, and counted;
- ``plausible_arrival_delay`` (quarantine): a flight more than ten hours late is left out and kept, with
  the names of the expectations it failed, in ``_dlt_quarantine_flights_checked`` beside the table.

The counts are in the task's XCom, its asset event, its log and ``_dlt_loads``; a re-run of a week
replaces its quarantined rows as it replaces its flights. A run's conf may make an expectation stricter
(``{"expectations": {"fail": {"departed": "dep_time IS NOT NULL"}}}``), never looser.

Before the first run, land the data: ``python dags_examples/nycflights13_landing.py``.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_deltamerge import Incremental
from airflow_provider_deltamerge.operators import DeltaMergeOperator

DEMO_DIR = os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")
CONN_ID = os.environ.get("DELTAMERGE_CONN_ID") or None
NATURAL_KEY = ["year", "month", "day", "carrier", "flight", "origin"]
EXPECTATIONS = {
    "warn": {"has_tail_number": "tailnum IS NOT NULL"},
    "drop": {"departed": "dep_time IS NOT NULL"},
    "quarantine": {"plausible_arrival_delay": "arr_delay IS NULL OR arr_delay < 600"},
}

with DAG(
    dag_id="nycflights13_flights_checked",
    description="Weekly merge of nycflights13 flights into Delta, with three expectations",
    schedule="@weekly",
    start_date=datetime(2013, 1, 1, tzinfo=timezone.utc),
    end_date=datetime(2014, 1, 6, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    tags=["deltamerge", "example"],
) as dag:
    DeltaMergeOperator(
        task_id="merge_checked_flights",
        source={"format": "parquet", "path": f"{DEMO_DIR}/landing/flights"},
        dataset=f"{DEMO_DIR}/lake/nycflights13",
        table_name="flights_checked",
        write_disposition="merge",
        primary_key=NATURAL_KEY,
        incremental=Incremental("time_hour", initial_value="2013-01-01T00:00:00Z"),
        expectations=EXPECTATIONS,
        conf_overridable=["expectations"],
        pipeline_name="nycflights13",
        conn_id=CONN_ID,
    )
