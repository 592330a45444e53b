"""The silver-from-a-change-feed example DAG run with dag.test(), week by week: a bronze table loaded by
this project with its change data feed on, its commits dated in the weeks of January 2024 (as a table
with that history has them), and silver compared with bronze as of each week's end."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.delta.store import read_loads

from .conftest import DAGS_FOLDER, DEMO_DIR, dags_folder_module
from .spark_servers import expected_writer

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

BRONZE = f"{DEMO_DIR}/lake/shop_bronze/orders"
SILVER = f"{DEMO_DIR}/lake/shop_silver/orders"
SUNDAYS = [datetime(2024, 1, 7, tzinfo=timezone.utc) + timedelta(weeks=n) for n in range(3)]
# Bronze's loads: (when it committed, its rows); deleted=True deletes the order.
BRONZE_LOADS = [
    (datetime(2024, 1, 2, 9, tzinfo=timezone.utc), [{"order_id": n, "status": "new"} for n in (1, 2, 3)]),
    (datetime(2024, 1, 4, 9, tzinfo=timezone.utc), [{"order_id": 2, "status": "paid"}]),
    (
        datetime(2024, 1, 9, 9, tzinfo=timezone.utc),
        [{"order_id": 1, "deleted": True}, {"order_id": 4, "status": "new"}],
    ),
    (
        datetime(2024, 1, 15, 9, tzinfo=timezone.utc),
        [{"order_id": 3, "status": "shipped"}, {"order_id": 4, "status": "paid"}],
    ),
    (datetime(2024, 1, 20, 9, tzinfo=timezone.utc), [{"order_id": 4, "status": "shipped"}]),
]

demo = dags_folder_module("run_demo")


def dated(table: str, version: int, when: datetime) -> None:
    """Give a commit the timestamp it would have had, committed then. Only this test edits a commit: the
    checksum Spark's local file system kept beside the file it wrote (delta-spark) goes with the edit,
    as Spark's next read of the log would otherwise refuse the file."""
    path = Path(table) / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for action in actions:
        if "commitInfo" in action:
            action["commitInfo"]["timestamp"] = int(when.timestamp() * 1000)
    path.write_text("".join(json.dumps(action) + "\n" for action in actions))
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def bronze_history(airflow_db) -> list[dict[int, str]]:
    """The bronze table with its history; returns its orders after each version."""
    states, orders = [], {}
    for version, (when, rows) in enumerate(BRONZE_LOADS):
        run_load(
            rows,
            dataset=f"{DEMO_DIR}/lake/shop_bronze",
            table_name="orders",
            write_disposition={"disposition": "merge", "strategy": "upsert"},
            primary_key="order_id",
            columns={"deleted": {"data_type": "bool", "hard_delete": True}},
            table_properties={"delta.enableChangeDataFeed": True},
            pipeline_name="shop_bronze",
        )
        assert DeltaTable(BRONZE).version() == version
        dated(BRONZE, version, when)
        for row in rows:
            if row.get("deleted"):
                orders.pop(row["order_id"])
            else:
                orders[row["order_id"]] = row["status"]
        states.append(dict(orders))
    return states


def bronze_at(states: list[dict[int, str]], instant: datetime) -> dict[int, str]:
    """Bronze's orders as of `instant`."""
    committed = [n for n, (when, _) in enumerate(BRONZE_LOADS) if when < instant]
    return states[committed[-1]] if committed else {}


def silver() -> dict[int, str]:
    rows = DeltaTable(SILVER).to_pyarrow_table(columns=["order_id", "status"]).to_pylist()
    return {r["order_id"]: r["status"] for r in rows}


def test_each_week_upserts_the_changes_bronze_committed_in_it(bronze_history):
    dag = demo.load_dag(DAGS_FOLDER, "shop_orders_silver_from_feed.py")
    for sunday in SUNDAYS:
        run = dag.test(logical_date=sunday, run_conf=demo.week_conf(sunday))
        assert run.state == "success"
        metrics = demo.return_value(run, "orders_silver")
        week = [n for n, (when, _) in enumerate(BRONZE_LOADS) if sunday - timedelta(weeks=1) <= when < sunday]
        assert (metrics["window_start"], metrics["window_end"]) == (week[0], week[-1] + 1)
        assert metrics["writer"] == expected_writer()
        assert silver() == bronze_at(bronze_history, sunday)
    assert 1 not in silver() and silver()[4] == "shipped"  # order 1 was deleted in bronze
    assert "_change_type" not in DeltaTable(SILVER).schema().to_arrow().names

    before = silver()
    again = dag.test(logical_date=SUNDAYS[1], run_conf=demo.week_conf(SUNDAYS[1]))  # a re-run of week 2
    metrics = demo.return_value(again, "orders_silver")
    assert again.state == "success" and (metrics["window_start"], metrics["window_end"]) == (2, 3)
    assert metrics["numEventsApplied"] == 0 and silver() == before
    loads = read_loads(f"{DEMO_DIR}/lake/shop_silver")
    assert [(r["window_start"], r["window_end"]) for r in loads] == [
        ("0", "2"),
        ("2", "3"),
        ("3", "5"),
        ("2", "3"),
    ]
