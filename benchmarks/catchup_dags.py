"""The weekly catchup's two DAGs (catchup.py copies this file into a fresh Airflow's dags folder).

Both upsert the landing's events on `id` into <CATCHUP_LAKE>/<dag>/events, windowed on the `ts` cursor,
with the writer CATCHUP_WRITER (delta-rs or delta-spark, the latter with CATCHUP_DELTA_JARS), for the
range [start, end) of the run's conf:
- catchup_backfill: one DeltaBackfillOperator task, a load per 7-day chunk, each chunk's seconds added
  to its metrics (the operator's own loop, timed around each load);
- catchup_mapped: DeltaMergeOperator mapped over backfill_windows (one task instance per window, run one
  at a time), each window's seconds being its task instance's duration as Airflow records it. Airflow
  does not run mapped instances in map-index order, so a later week may land before an earlier one:
  the upsert is sequenced by `ts` (`sequence_by`), the newest event of a key winning whatever the order
  its window lands in (without it, an earlier week landing last overwrites the later week's values).
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from typing import Any

from airflow.sdk import DAG, get_current_context, task

from airflow_provider_deltamerge import backfill_windows
from airflow_provider_deltamerge.operators import DeltaBackfillOperator, DeltaMergeOperator

LAKE = os.environ.get("CATCHUP_LAKE", "/tmp/deltamerge-catchup/lake")
ARGUMENTS = {
    "source": {
        "format": "parquet",
        "path": os.environ.get("CATCHUP_LANDING", "/tmp/deltamerge-catchup/landing"),
    },
    "table_name": "events",
    "write_disposition": {"disposition": "merge", "strategy": "upsert"},
    "primary_key": "id",
    "incremental": {"cursor_path": "ts"},
    "pipeline_name": "catchup",
    "backend": os.environ.get("CATCHUP_WRITER", "delta-rs"),
    "delta_jars": os.environ.get("CATCHUP_DELTA_JARS", "").split(",")
    if os.environ.get("CATCHUP_DELTA_JARS")
    else None,
    "spark_conf": {"spark.driver.memory": os.environ.get("CATCHUP_DRIVER_MEMORY", "4g")},
    "emit_asset": False,
}
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


class TimedBackfill(DeltaBackfillOperator):
    """DeltaBackfillOperator, each chunk's load timed (its seconds in the chunk's metrics)."""

    def load(self, request: Any) -> dict[str, Any]:
        started = time.perf_counter()
        metrics = super().load(request)
        return {**metrics, "seconds": time.perf_counter() - started}


with DAG(dag_id="catchup_backfill", schedule=None, start_date=START, tags=["benchmark"]) as backfill_dag:
    TimedBackfill(task_id="backfill", dataset=f"{LAKE}/catchup_backfill", every="7 days", **ARGUMENTS)


with DAG(dag_id="catchup_mapped", schedule=None, start_date=START, tags=["benchmark"]) as mapped_dag:

    @task
    def windows() -> list[list[str]]:
        conf = get_current_context()["dag_run"].conf
        return [
            [a.isoformat(), b.isoformat()] for a, b in backfill_windows(conf["start"], conf["end"], "7 days")
        ]

    DeltaMergeOperator.partial(
        task_id="load_window",
        dataset=f"{LAKE}/catchup_mapped",
        sequence_by="ts",
        max_active_tis_per_dagrun=1,
        **ARGUMENTS,
    ).expand(window=windows())
