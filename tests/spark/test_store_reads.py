"""One load reads the dataset's own tables once: `_dlt_loads` and `_dlt_pipeline_state` are read in
full at the start of the load into one snapshot that the rest of the load is handed. Counted with a
spy on the store (tests/store_reads.py), not by timing. The spark-submit job module's count is in
tests/airflow/test_hook_spark.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from airflow_provider_deltamerge import Incremental, run_load
from tests.store_reads import count_reads

pytestmark = pytest.mark.spark

UTC = timezone.utc
WEEK_ONE = (datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 8, tzinfo=UTC))
WEEK_TWO = (datetime(2024, 1, 8, tzinfo=UTC), datetime(2024, 1, 15, tzinfo=UTC))
EVENTS = [{"id": n, "ts": datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=12 * n)} for n in range(28)]
DISPOSITIONS = {
    "append": {"write_disposition": "append"},
    "upsert": {"write_disposition": {"disposition": "merge", "strategy": "upsert"}, "primary_key": "id"},
}


def weekly_load(spark, dataset, week, **arguments):
    return run_load(
        EVENTS,
        spark=spark,
        dataset=dataset,
        table_name="events",
        incremental=Incremental("ts", initial_value="2024-01-01T00:00:00Z"),
        data_interval=week,
        run_context={
            "dag_id": "events",
            "task_id": "load",
            "run_id": f"scheduled__{week[1]}",
            "run_type": "scheduled",
        },
        **arguments,
    )


@pytest.mark.parametrize("disposition", DISPOSITIONS)
def test_one_load_of_one_window_reads_each_state_table_once(spark, dataset, monkeypatch, disposition):
    weekly_load(spark, dataset, WEEK_ONE, **DISPOSITIONS[disposition])
    reads = count_reads(monkeypatch)

    info = weekly_load(spark, dataset, WEEK_TWO, **DISPOSITIONS[disposition])

    assert info.loaded and info.metrics["rows_staged"] == 14
    assert dict(reads.counts) == {"_dlt_loads": 1, "_dlt_pipeline_state": 1}


def test_the_first_load_of_a_dataset_reads_each_state_table_once(spark, dataset, monkeypatch):
    reads = count_reads(monkeypatch)
    info = weekly_load(spark, dataset, WEEK_ONE)
    assert info.loaded and info.metrics["rows_staged"] == 14
    assert dict(reads.counts) == {"_dlt_loads": 1, "_dlt_pipeline_state": 1}
