"""The Debezium example DAG (dags_examples/customers_cdc.py) with dag.test(): day runs in any order, late
and repeated deliveries, and re-runs all give the table the feed's events give applied in log order."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from deltalake import DeltaTable

from .conftest import DAGS_FOLDER, DEMO_DIR, dags_folder_module
from .spark_servers import expected_writer

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

demo = dags_folder_module("run_demo")
landing = dags_folder_module("customers_cdc_landing")
TABLE = DEMO_DIR / "lake" / "crm" / "customers"
DAYS = [landing.FIRST_DAY + timedelta(days=i) for i in range(landing.DAYS)]


@pytest.fixture(scope="module")
def feed(airflow_db):
    landing.land(str(DEMO_DIR))


def customers() -> dict[int, dict]:
    rows = DeltaTable(str(TABLE)).to_pyarrow_table(columns=["id", "name", "city", "lsn"]).to_pylist()
    return {row["id"]: {k: row[k] for k in ("id", "name", "city", "lsn")} for row in rows}


def run_day(dag, day: date) -> dict:
    run = dag.test(logical_date=datetime(day.year, day.month, day.day, tzinfo=timezone.utc))
    assert run.state == "success"
    return demo.return_value(run, "apply_changes")


def test_a_change_feed_landed_late_and_twice_applies_as_in_log_order_whatever_the_run_order(
    feed, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # Spark SQL makes its spark-warehouse folder in the working directory
    dag = demo.load_dag(DAGS_FOLDER, "customers_cdc.py")
    order = [DAYS[3], DAYS[0], DAYS[6], DAYS[1], DAYS[5], DAYS[2], DAYS[4]]  # a backfill out of order
    deleted = 0
    for day in order:
        metrics = run_day(dag, day)
        assert metrics["numEventsApplied"] + metrics["numEventsSkippedStale"] == metrics["rows_extracted"]
        assert metrics["writer"] == expected_writer()
        deleted += metrics["numTargetRowsDeleted"]
    expected = landing.customers_now()
    assert customers() == expected
    assert deleted > 0 and len(expected) < landing.CUSTOMERS  # deletes happened and stayed deleted
    assert "op" not in DeltaTable(str(TABLE)).schema().to_arrow().names  # except_column_list

    again = run_day(dag, DAYS[2])  # a re-run: every event is already applied
    assert again["numEventsApplied"] == 0 and customers() == expected
