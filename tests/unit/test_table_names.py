"""Table names: a plain table under the dataset, `schema.table`, `catalog.schema.table`, backticks."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import LoadRequest
from airflow_provider_deltamerge.errors import CatalogError, ConfigError
from airflow_provider_deltamerge.model.table_names import TableName, parse_table_name


@pytest.mark.parametrize(
    "given_name, parts",
    [
        ("orders", TableName("orders")),
        ("sales.orders", TableName("orders", "sales")),
        ("main.sales.orders", TableName("orders", "sales", "main")),
        ("`my-db`.`orders`", TableName("orders", "my-db")),
        ("`my.db`.`or.ders`", TableName("or.ders", "my.db")),
        ("`a``b`.c", TableName("c", "a`b")),
        ("`one.table`", TableName("one.table")),
    ],
)
def test_names_parse_into_their_parts(given_name, parts):
    assert parse_table_name(given_name) == parts


@pytest.mark.parametrize(
    "bad, says",
    [
        ("a.b.c.d", "has 4 parts"),
        ("sales.", "empty part"),
        (".orders", "empty part"),
        ("a..b", "empty part"),
        ("sales.` `", "empty part"),
        ("`sales.orders", "backtick"),
        ("sa`les`.orders", "backtick"),
        ("`sales`x.orders", "backtick"),
    ],
)
def test_malformed_names_are_refused_naming_the_name(bad, says):
    with pytest.raises(CatalogError) as refused:
        LoadRequest.create(table_name=bad, dataset="/tmp/d")
    assert says in str(refused.value) and refused.value.name == bad
    assert "Nothing was read or written" in str(refused.value)
    assert pickle.loads(pickle.dumps(refused.value)).name == bad


def test_the_naming_convention_applies_to_the_table_part_only():
    request = LoadRequest.create(table_name="Sales_Dept.OrderLines")
    assert (request.table, request.target.schema) == ("order_lines", "Sales_Dept")
    assert request.dataset is None and request.table_uri == "catalog://spark_catalog/Sales_Dept/order_lines"
    placed = request.placed("/data/sales")
    assert placed.table_path == "/data/sales/order_lines" and placed.target == request.target


def test_a_plain_table_stays_a_folder_of_the_dataset_and_needs_one():
    request = LoadRequest.create(table_name="Orders", dataset="/data")
    assert not request.target.in_catalog and request.table_path == "/data/orders"
    with pytest.raises(ConfigError, match="dataset: is required for table 'orders'"):
        LoadRequest.create(table_name="orders")


def test_catalog_arguments_travel_in_the_request_json():
    request = LoadRequest.create(table_name="`my-db`.orders", catalog="glue", create_schema=True)
    again = LoadRequest.from_json(request.to_json())
    assert (again.table_name, again.catalog, again.create_schema, again.dataset) == (
        "`my-db`.orders",
        "glue",
        True,
        None,
    )
    with pytest.raises(ConfigError, match="catalog: 'hive' is not valid"):
        LoadRequest.create(table_name="a.b", catalog="hive")


_part = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=6).filter(
    str.strip
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_part, min_size=1, max_size=3))
def test_a_displayed_name_parses_back_into_its_parts(parts):
    name = TableName(*reversed(parts))
    assert parse_table_name(name.display()) == name
    assert parse_table_name(name.sql()) == name


@pytest.mark.parametrize(
    "argument, is_table",
    [
        ("sales.orders", True),
        ("main.sales.orders", True),
        ("/lake/shop", False),
        ("s3://b/lake", False),
        ("./my.data", False),
        ("lake", False),
        ("a.b.c.d", False),
    ],
)
def test_a_cli_dataset_argument_names_a_catalog_table_only_as_schema_table(argument, is_table):
    from airflow_provider_deltamerge.cli.catalog_names import names_catalog_table

    assert names_catalog_table(argument) is is_table
