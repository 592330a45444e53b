"""Manual backfill of an arbitrary range: trigger with ``{"start": ..., "end": ...}``.

    airflow dags trigger nycflights13_flights_backfill -c '{"start": "2013-02-01", "end": "2013-03-01"}'

The range [start, end) is loaded in chunks of 7 days, one stateless load per chunk, in order, into the
same flights table as the weekly DAG (merge on the natural key, so overlaps are harmless). The run's
conf may only set the range: it cannot change the source, the table or anything else, so whoever may
trigger this DAG cannot make it run other code or write elsewhere. The params give the UI's form and the
defaults for a trigger without conf.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone

from airflow.sdk import DAG, Param

from airflow_provider_deltamerge import Incremental
from airflow_provider_deltamerge.operators import DeltaBackfillOperator

DEMO_DIR = os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")
CONN_ID = os.environ.get("DELTAMERGE_CONN_ID") or None
NATURAL_KEY = ["year", "month", "day", "carrier", "flight", "origin"]

with DAG(
    dag_id="nycflights13_flights_backfill",
    description="Backfill nycflights13 flights for a range given at trigger time",
    schedule=None,
    start_date=datetime(2013, 1, 1, tzinfo=timezone.utc),
    params={
        "start": Param("2013-02-01T00:00:00+00:00", type="string", description="first instant, inclusive"),
        "end": Param("2013-03-01T00:00:00+00:00", type="string", description="last instant, exclusive"),
    },
    tags=["deltamerge", "example"],
) as dag:
    DeltaBackfillOperator(
        task_id="backfill_flights",
        source={"format": "parquet", "path": f"{DEMO_DIR}/landing/flights"},
        dataset=f"{DEMO_DIR}/lake/nycflights13",
        table_name="flights",
        write_disposition="merge",
        primary_key=NATURAL_KEY,
        incremental=Incremental("time_hour"),
        start="{{ params.start }}",
        end="{{ params.end }}",
        every="7 days",
        pipeline_name="nycflights13",
        conn_id=CONN_ID,
    )
