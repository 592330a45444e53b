"""Source specs: parsing (pure), then each kind read by a real in-process load (reader with options,
table, SQL bound to the window, module:function callable), checked in the Delta table."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.load import run_request
from airflow_provider_deltamerge.model.request import LoadRequest
from airflow_provider_deltamerge.model.sources import parse_source
from airflow_provider_deltamerge.spark.session import default_session

WINDOW = {"start": "2024-03-01T00:00:00Z", "end": "2024-03-02T00:00:00Z"}


@pytest.mark.parametrize(
    ("given", "parsed"),
    [
        ("shop.sources:orders", {"callable": "shop.sources:orders"}),
        ("landing.orders", {"table": "landing.orders"}),
        ("SELECT * FROM landing.orders", {"sql": "SELECT * FROM landing.orders"}),
        (
            {"format": "csv", "path": "/in", "options": {"header": True, "sep": ";"}},
            {"format": "csv", "path": "/in", "options": {"header": "true", "sep": ";"}},
        ),
        ({"format": "jdbc", "options": {"dbtable": "t"}}, {"format": "jdbc", "options": {"dbtable": "t"}}),
    ],
)
def test_source_forms(given, parsed):
    assert parse_source(given) == parsed


@pytest.mark.parametrize(
    ("given", "argument"),
    [
        ({"table": "a", "sql": "SELECT 1"}, "source"),
        ({"format": "parquet", "options": {"nested": {"a": 1}}}, "source.options['nested']"),
        ({"callable": "no_function_here"}, "source.callable"),
        ({"table": "drop table x;"}, "source.table"),
        ({"format": ""}, "source.format"),
        ("   ", "source"),
    ],
)
def test_bad_sources_name_the_argument(given, argument):
    with pytest.raises(ConfigError) as error:
        parse_source(given)
    assert error.value.argument == argument


def load(tmp_path, source, **arguments) -> list[dict]:
    dataset = str(tmp_path / "lake")
    request = LoadRequest.create(source=source, dataset=dataset, table_name="orders", **arguments)
    run_request(request, default_session())
    return sorted(DeltaTable(f"{dataset}/orders").to_pyarrow_table().to_pylist(), key=lambda r: r["order_id"])


def test_reader_spec_with_options(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "orders.csv").write_text("order_id;status\n1;new\n2;paid\n")
    source = {"format": "csv", "path": str(tmp_path / "in"), "options": {"header": True, "sep": ";"}}
    rows = load(tmp_path, source)
    assert [(r["order_id"], r["status"]) for r in rows] == [("1", "new"), ("2", "paid")]


def test_table_name(tmp_path):
    spark = default_session()
    spark.createDataFrame([(7, "new")], "order_id int, status string").createOrReplaceTempView(
        "landing_orders"
    )
    assert [r["order_id"] for r in load(tmp_path, "landing_orders")] == [7]


def test_sql_with_window_markers(tmp_path):
    query = (
        "SELECT id AS order_id, timestamp_seconds(unix_timestamp(:window_start) + id * 3600) AS updated_at "
        "FROM range(-5, 30) WHERE id >= 0"
    )
    rows = load(
        tmp_path,
        {"sql": query},
        incremental={"cursor_path": "updated_at"},
        run_context={"run_type": "manual", "conf": WINDOW},
    )
    assert [r["order_id"] for r in rows] == list(range(24))  # the cursor filter keeps the window's day


def test_sql_window_marker_without_a_window_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="source.sql: the query uses \\['window_end'\\]"):
        load(tmp_path, {"sql": "SELECT 1 AS order_id WHERE current_timestamp() < :window_end"})


def test_module_function_source_gets_the_window(tmp_path):
    rows = load(
        tmp_path,
        "tests.airflow.sources_for_tests:orders_in_window",
        incremental={"cursor_path": "updated_at"},
        run_context={"run_type": "manual", "conf": WINDOW},
    )
    assert [r["order_id"] for r in rows] == list(range(24))
