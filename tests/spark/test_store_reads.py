"""One load reads the dataset's own tables once: `_dlt_loads` and `_dlt_pipeline_state` are read in
full at the start of the load into one snapshot that the rest of the load is handed. Counted with a
spy on the store (tests/store_reads.py), not by timing. The spark-submit job module's count is in
tests/airflow/test_hook_spark.py. The dataset is listed for the table's child tables once as well (a
request on an object store), whatever the batch holds."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from airflow_provider_deltamerge import Incremental, run_load
from airflow_provider_deltamerge.delta import child_tables
from tests.helpers import read_rows
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


def count_listings(monkeypatch) -> list[str]:
    """The datasets listed for child tables for the rest of the test (a request each on an object store)."""
    listed: list[str] = []
    real = child_tables._folders

    def listing(dataset, storage_options):
        listed.append(dataset)
        return real(dataset, storage_options)

    monkeypatch.setattr(child_tables, "_folders", listing)
    return listed


ORDERS = [{"id": 1, "items": [{"sku": "a"}, {"sku": "b"}]}, {"id": 2, "items": [{"sku": "c"}]}]
CHANGED = {"events": [{**EVENTS[0], "id": 99}], "orders": [{"id": 1, "items": [{"sku": "a"}]}]}


@pytest.mark.parametrize("name", ["events", "orders"], ids=["without child tables", "with child tables"])
def test_one_load_lists_the_dataset_for_child_tables_once(spark, dataset, monkeypatch, name):
    upsert = {"write_disposition": {"disposition": "merge", "strategy": "upsert"}, "primary_key": "id"}
    in_airflow = {"dag_id": "d", "task_id": "t", "run_id": "manual__1", "run_type": "manual"}
    run_load(EVENTS if name == "events" else ORDERS, spark=spark, dataset=dataset, table_name=name, **upsert)
    listed = count_listings(monkeypatch)

    info = run_load(
        CHANGED[name], spark=spark, dataset=dataset, table_name=name, run_context=in_airflow, **upsert
    )

    assert info.loaded and info.metrics["rows_staged"] == 1
    assert listed == [dataset]
    if name == "orders":  # the listing found the child table: order 1's stale item is gone
        skus = [r["sku"] for r in read_rows(f"{dataset}/orders__items", order_by=["sku"])]
        assert skus == ["a", "c"]
