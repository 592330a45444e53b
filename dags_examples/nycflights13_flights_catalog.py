"""Weekly merge of the nycflights13 flights into a table named through a Hive metastore:
``nycflights13.flights``, which SQL, notebooks and BI tools reading the metastore see at once.

The same load as nycflights13_flights_weekly.py, named by the catalog instead of a folder: the first
run creates schema ``nycflights13`` (``create_schema=True``) and the table at the schema's location,
and registers it (and ``nycflights13._dlt_loads``, ``nycflights13._dlt_pipeline_state``) with
``CREATE TABLE IF NOT EXISTS ... USING delta LOCATION``. Registering a Delta table needs Delta's jars in
the session: DELTA_SPARK_JARS names them (local files, comma-separated). Here the session keeps its
own metastore (Derby) and warehouse under DELTAMERGE_DEMO_DIR; point ``spark_conf`` at your metastore
(``spark.hadoop.hive.metastore.uris``) or use EMR's Glue client instead. See docs/CATALOGS.md.

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
DELTA_JARS = [jar for jar in os.environ.get("DELTA_SPARK_JARS", "").split(",") if jar] or None
NATURAL_KEY = ["year", "month", "day", "carrier", "flight", "origin"]
METASTORE = {
    "spark.sql.catalogImplementation": "hive",
    "spark.sql.warehouse.dir": f"{DEMO_DIR}/warehouse",
    "spark.hadoop.javax.jdo.option.ConnectionURL": (
        f"jdbc:derby:;databaseName={DEMO_DIR}/metastore_db;create=true"
    ),
}

with DAG(
    dag_id="nycflights13_flights_catalog",
    description="Weekly merge of nycflights13 flights into the metastore table nycflights13.flights",
    schedule="@weekly",
    start_date=datetime(2013, 1, 1, tzinfo=timezone.utc),
    end_date=datetime(2014, 1, 6, tzinfo=timezone.utc),
    catchup=True,
    max_active_runs=1,
    tags=["deltamerge", "example", "catalog"],
) as dag:
    DeltaMergeOperator(
        task_id="merge_flights",
        source={"format": "parquet", "path": f"{DEMO_DIR}/landing/flights"},
        table_name="nycflights13.flights",
        create_schema=True,
        write_disposition="merge",
        primary_key=NATURAL_KEY,
        incremental=Incremental("time_hour", initial_value="2013-01-01T00:00:00Z"),
        pipeline_name="nycflights13",
        spark_conf=METASTORE,
        delta_jars=DELTA_JARS,
    )
