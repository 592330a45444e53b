"""Scheduled loads across daylight saving changes hold every event exactly once (issue 47).

DAGs in Europe/Amsterdam (``0 2 * * *`` across 2024-03-31 and 2024-10-27, ``0 * * * *`` across the
fall-back hour) run by the operator's execute, run after run: each run's data interval is the one
Airflow's scheduler gives it (``scheduled_runs``: the DAG's serialized timetable asked with
``next_dagrun_info``), its run type Airflow's own ``DagRunType.SCHEDULED``; the source holds an event
every 15 minutes.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pendulum
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltamerge import ConfigError
from tests.airflow_compat import drifting_timetable
from tests.helpers import read_rows, table_version
from tests.spark.test_windows_airflow import scheduled_runs

pytestmark = pytest.mark.spark

UTC = timezone.utc
AMSTERDAM = "Europe/Amsterdam"


def landed_events(folder, first: datetime, last: datetime) -> tuple[str, list[datetime]]:
    """A parquet file with an event every 15 minutes of elapsed time in [first, last)."""
    # counted in UTC: pendulum adds a timedelta to a zoned time on its wall clock, across a change too
    moments, moment = [], datetime.fromtimestamp(first.timestamp(), UTC)
    while moment < last:
        moments.append(moment)
        moment += timedelta(minutes=15)
    folder.mkdir()
    table = pa.table({"id": list(range(len(moments))), "ts": pa.array(moments, pa.timestamp("us", tz="UTC"))})
    pq.write_table(table, folder / "events.parquet")
    return str(folder), moments


def run_context(dag, interval) -> dict:
    """The task context Airflow gives a scheduled run's task instance, as far as the operator reads it."""
    from airflow.utils.types import DagRunType

    run_id = f"scheduled__{interval.end.isoformat()}"
    return {
        "ti": SimpleNamespace(dag_id=dag.dag_id, task_id="load", run_id=run_id, try_number=1, map_index=-1),
        "dag_run": SimpleNamespace(run_type=DagRunType.SCHEDULED, conf={}),
        "data_interval_start": interval.start,
        "data_interval_end": interval.end,
        "logical_date": interval.end,
        "params": {},
    }


def daily_operator(dag, dataset: str, source: str):
    from airflow_provider_deltamerge.operators import DeltaMergeOperator

    with dag:
        return DeltaMergeOperator(
            task_id="load",
            source={"format": "parquet", "path": source},
            dataset=dataset,
            table_name="events",
            incremental={"cursor_path": "ts"},
            emit_asset=False,
        )


def run_all(dag, dataset, source, count):
    operator = daily_operator(dag, dataset, source)
    return [
        operator.execute(run_context(dag, interval))
        for interval in (run.data_interval for run in scheduled_runs(dag, count))
    ]


def loaded(dataset) -> list[datetime]:
    return sorted(row["ts"] for row in read_rows(f"{dataset}/events"))


def in_range(moments, start: str, end: str) -> list[datetime]:
    return [m for m in moments if datetime.fromisoformat(start) <= m < datetime.fromisoformat(end)]


@pytest.mark.parametrize(
    ("first_run_day", "change_day_hours"),
    [
        (
            datetime(2024, 3, 29),
            23,
        ),  # spring forward: 2024-03-31 02:00 does not exist, the run fires at 03:00
        (datetime(2024, 10, 25), 25),  # fall back: 2024-10-27 has 25 hours
    ],
)
def test_a_daily_dag_in_amsterdam_loads_each_event_once_across_a_change(
    spark, dataset, tmp_path, first_run_day, change_day_hours
):
    from airflow.sdk import DAG

    start = pendulum.datetime(first_run_day.year, first_run_day.month, first_run_day.day, tz=AMSTERDAM)
    dag = DAG("daily_amsterdam", schedule="0 2 * * *", start_date=start, catchup=True)
    source, moments = landed_events(tmp_path / "landing", start.subtract(days=2), start.add(days=6))

    metrics = run_all(dag, dataset, source, 4)

    windows = [(m["window_start"], m["window_end"]) for m in metrics]
    assert all(one[1] == two[0] for one, two in zip(windows, windows[1:], strict=False))  # no gap, no overlap
    expected = in_range(moments, windows[0][0], windows[-1][1])
    assert loaded(dataset) == expected  # each event exactly once
    per_run = [m["rows_staged"] for m in metrics]
    assert per_run == [len(in_range(moments, *window)) for window in windows]
    assert sorted(per_run) == sorted([4 * 24, 4 * 24, 4 * 24, 4 * change_day_hours])


def test_an_hourly_dag_in_amsterdam_loads_the_fall_back_hour_once(spark, dataset, tmp_path):
    from airflow.sdk import DAG

    start = pendulum.datetime(2024, 10, 27, 1, tz=AMSTERDAM)  # 23:00 UTC the day before
    dag = DAG("hourly_amsterdam", schedule="0 * * * *", start_date=start, catchup=True)
    source, moments = landed_events(tmp_path / "landing", start.subtract(hours=3), start.add(hours=8))

    metrics = run_all(dag, dataset, source, 5)  # 02:00+02:00, 02:00+01:00 (the repeated hour), 03:00, ...

    windows = [(m["window_start"], m["window_end"]) for m in metrics]
    assert all(one[1] == two[0] for one, two in zip(windows, windows[1:], strict=False))
    assert loaded(dataset) == in_range(moments, windows[0][0], windows[-1][1])
    assert [m["rows_staged"] for m in metrics] == [4] * 5  # every hour is an hour, the repeated one too


def test_a_run_of_a_timetable_that_cannot_tell_its_period_is_refused_and_changes_nothing(
    spark, dataset, tmp_path
):
    from airflow.providers.common.compat.sdk import AirflowFailException
    from airflow.sdk import DAG
    from airflow.timetables.base import DataInterval

    start = pendulum.datetime(2024, 3, 30, tz=AMSTERDAM)
    dag = DAG("custom_timetable", schedule=drifting_timetable(), start_date=start, catchup=True)
    source, moments = landed_events(tmp_path / "landing", start, start.add(days=2))
    operator = daily_operator(dag, dataset, source)
    manual = run_context(dag, DataInterval.exact(start.add(days=1)))
    manual["dag_run"] = SimpleNamespace(
        run_type="manual", conf={"start": start.isoformat(), "end": "2024-03-31"}
    )
    operator.execute(manual)
    version = table_version(f"{dataset}/events")

    with pytest.raises(AirflowFailException) as refused:
        operator.execute(run_context(dag, DataInterval.exact(pendulum.datetime(2024, 3, 31, 1, tz="UTC"))))
    cause = refused.value.__cause__
    assert isinstance(cause, ConfigError) and cause.argument == "run_context.period_start"
    assert "Give the task its own window (`window=`)" in str(cause)
    assert table_version(f"{dataset}/events") == version
    assert loaded(dataset) == [m for m in moments if m < datetime(2024, 3, 31, tzinfo=UTC)]
