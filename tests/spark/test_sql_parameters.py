"""A source whose SQL takes parameters loads the same with each writer: a callable's own ``args`` and a
``{"sql": ...}`` source's window bounds stay bound in a session with Delta's SQL extension.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import Incremental, run_load
from airflow_provider_deltamerge.spark.extract import source_reader

pytestmark = pytest.mark.spark

WINDOW = (datetime(2024, 3, 1, tzinfo=timezone.utc), datetime(2024, 3, 2, tzinfo=timezone.utc))
HOURLY = "timestamp_seconds(unix_timestamp(:start) + id * 3600)"
QUERY = f"SELECT id AS order_id, {HOURLY} AS updated_at FROM range(0, 48) WHERE {HOURLY} < :end"


def orders_in_window(spark, window):
    """A callable source that binds its own named parameters (as the mapped-backfill example does)."""
    return spark.sql(QUERY, args={"start": window.start, "end": window.end})


SOURCES = {
    "callable": orders_in_window,
    # read as the hook and the spark-submit job read a spec
    "sql": source_reader({"sql": QUERY.replace(":start", ":window_start").replace(":end", ":window_end")}),
}


@pytest.mark.parametrize("disposition", ["append", "merge"])
@pytest.mark.parametrize("kind", SOURCES)
def test_sql_parameters_stay_bound(spark, dataset, kind, disposition):
    info = run_load(
        SOURCES[kind],
        spark=spark,
        dataset=dataset,
        table_name="orders",
        write_disposition=disposition,
        primary_key="order_id",
        incremental=Incremental("updated_at"),
        data_interval=WINDOW,
    )
    assert info.metrics["rows_extracted"] == 24
    loaded = DeltaTable(f"{dataset}/orders").to_pyarrow_table()["order_id"].to_pylist()
    assert sorted(loaded) == list(range(24))
