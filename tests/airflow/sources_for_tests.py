"""Source callables the tests name as ``{"callable": "tests.airflow.sources_for_tests:..."}``."""

from __future__ import annotations


def corrupt_landing(spark, window):
    raise ValueError("landing file orders-7.json is truncated")


def orders_in_window(spark, window):
    """Orders generated for the window's days (a source that pushes the window down itself)."""
    start, end = window.start, window.end
    return spark.sql(
        "SELECT id AS order_id, 'new' AS status, "
        "timestamp_seconds(unix_timestamp(:start) + id * 3600) AS updated_at FROM range(0, 48) "
        "WHERE timestamp_seconds(unix_timestamp(:start) + id * 3600) < :end",
        args={"start": start, "end": end},
    )
