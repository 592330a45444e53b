"""Loads of one table running at the same time (mapped backfill tasks): each lands exactly once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

from airflow_provider_deltamerge import Incremental, run_load
from airflow_provider_deltamerge.delta.store import read_loads
from tests.helpers import read_rows

UTC = timezone.utc
DAYS = [datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=d) for d in range(4)]


def events():
    return [{"id": i, "ts": DAYS[0] + timedelta(hours=6 * i)} for i in range(16)]


def load_window(spark, dataset, start, end):
    return run_load(
        events(),
        spark=spark,
        dataset=dataset,
        table_name="events",
        write_disposition="append",
        pipeline_name="parallel",
        incremental=Incremental("ts"),
        data_interval=(start, end),
        run_context={
            "run_type": "backfill",
            "dag_id": "d",
            "task_id": "t",
            "run_id": f"backfill__{start.date()}",
        },
    )


def test_windows_loaded_in_parallel_all_land_once(spark, dataset):
    windows = [(DAYS[i], DAYS[i] + timedelta(days=1)) for i in range(4)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        infos = list(pool.map(lambda w: load_window(spark, dataset, *w), windows))
    assert sorted(r["id"] for r in read_rows(f"{dataset}/events")) == list(range(16))
    assert sorted(info.table_version for info in infos) == [0, 1, 2, 3]
    loaded = sorted((r["window_start"], r["metrics"]["numTargetRowsInserted"]) for r in read_loads(dataset))
    assert loaded == [(day.isoformat(), 4) for day in DAYS]


def test_loads_of_different_tables_at_once_all_get_their_load_records(spark, dataset):
    tables = [f"table_{i}" for i in range(4)]

    def load(table):
        return run_load([{"id": 1}], spark=spark, dataset=dataset, table_name=table, pipeline_name="parallel")

    with ThreadPoolExecutor(max_workers=4) as pool:
        infos = list(pool.map(load, tables))
    assert sorted(r["table_name"] for r in read_loads(dataset)) == tables
    assert sorted(r["load_id"] for r in read_loads(dataset)) == sorted(info.load_id for info in infos)
