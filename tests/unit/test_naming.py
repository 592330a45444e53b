"""Naming conventions: dlt's snake_case (docs and KEY-1 examples) and direct (pure)."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.model.arguments import check_table_name
from airflow_provider_deltamerge.model.naming import (
    direct,
    naming_convention,
    normalize_columns,
    snake_case,
    spark_string,
)
from airflow_provider_deltamerge.model.request import LoadRequest


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        # KEY-1: keys given in source spelling match the stored column
        ("ID", "id"),
        ("TxId", "tx_id"),
        # dlt docs: schema / naming convention
        ("CamelCase", "camel_case"),
        ("createdAt", "created_at"),
        ("DealFlow", "deal_flow"),
        # dlt's snake_case rules: trimmed, reduced alphabet, leading digits, underscores
        ("event_value", "event_value"),
        ("event value", "event_value"),
        (" Small Love Potion ", "small_love_potion"),
        ("event-.!:*<>value", "event_x_value"),
        ("1event_n'", "_1event_nx"),
        ("123BaNaNa", "_123_ba_na_na"),
        ("BANANA", "banana"),
        ("BAN_ANA", "ban_ana"),
        ("BANaNA", "ba_na_na"),
        ("CamelCaseSUPER", "camel_case_super"),
        ("BANANA_", "bananax"),
        ("BANANA____", "bananaxxxx"),
        ("+-!$*@#=|:", "x_xa_lx"),
        ("+1", "x1"),
        ("-1", "_1"),
        ("__CamelCase", "_camel_case"),
        ("event__value_value2____", "event_value_value2xxxx"),
        ("Zip-Code", "zip_code"),
    ],
)
def test_snake_case_matches_dlt(given, stored):
    assert snake_case(given) == stored


def test_snake_case_is_idempotent_on_its_output():
    for name in ("tx_id", "_1event_nx", "camel_case_super", "bananaxxxx"):
        assert snake_case(name) == name


@pytest.mark.parametrize("blank", ["", "   "])
def test_an_empty_name_is_refused(blank):
    with pytest.raises(ConfigError, match="empty"):
        snake_case(blank)
    with pytest.raises(ConfigError):
        direct("")


def test_direct_keeps_names_as_given():
    assert direct("TxId") == "TxId"
    assert direct("a b-c") == "a b-c"


def test_naming_convention_by_name():
    assert naming_convention("snake_case")("TxId") == "tx_id"
    assert naming_convention("direct")("TxId") == "TxId"
    with pytest.raises(ConfigError) as raised:
        naming_convention("camelCase")
    assert raised.value.argument == "naming"
    assert "'snake_case'" in str(raised.value) and "'direct'" in str(raised.value)


def test_normalize_columns_maps_each_source_column():
    assert normalize_columns(["ID", "TxId", "amount"], snake_case) == {
        "ID": "id",
        "TxId": "tx_id",
        "amount": "amount",
    }


def test_two_columns_that_become_one_name_are_refused():
    with pytest.raises(ConfigError) as raised:
        normalize_columns(["UserId", "user_id"], snake_case)
    message = str(raised.value)
    assert "'UserId'" in message and "'user_id'" in message and "direct" in message
    assert normalize_columns(["UserId", "user_id"], direct) == {"UserId": "UserId", "user_id": "user_id"}


@pytest.mark.parametrize(
    ("table_name", "naming"),
    [
        ("t" * 243, "direct"),  # its lock file `.<name>.create-lock` would be 256 bytes
        ("t" * 300, "snake_case"),
        ("é" * 122, "direct"),  # 244 bytes in UTF-8
        ("aB" * 100, "snake_case"),  # 200 characters given, 300 stored (`a_b_...`)
    ],
)
def test_a_table_name_the_store_cannot_hold_is_refused(table_name, naming):
    with pytest.raises(ConfigError, match="bytes long; a table's name may have at most 242 bytes") as error:
        LoadRequest.create(dataset="/lake", table_name=table_name, naming=naming)
    assert error.value.argument == "table_name"


@pytest.mark.parametrize(
    ("table_name", "naming", "stored"),
    [
        ("t" * 242, "direct", "t" * 242),
        ("é" * 121, "direct", "é" * 121),
        ("aB" * 60, "snake_case", "a_b" * 60),
    ],
)
def test_a_table_name_up_to_the_limit_is_taken(table_name, naming, stored):
    assert LoadRequest.create(dataset="/lake", table_name=table_name, naming=naming).table == stored


@pytest.mark.parametrize(
    ("dataset", "fits"),
    [
        ("s3://bucket/" + "p" * 680, True),  # the bucket is not part of the key
        ("s3://bucket/" + "p" * 750, False),  # + /<242-byte name> + Delta's files > 1024
        ("abfss://c@account.dfs.core.windows.net/" + "p" * 750, False),
        ("/" + "p/" * 1900, False),  # a local path longer than 4095 bytes
        ("/" + "p/" * 1800, True),
    ],
)
def test_a_table_whose_files_the_store_cannot_address_is_refused(dataset, fits):
    name = "t" * 242
    if fits:
        LoadRequest.create(dataset=dataset, table_name=name, naming="direct")
        return
    with pytest.raises(ConfigError, match="the store holds paths of at most"):
        LoadRequest.create(dataset=dataset, table_name=name, naming="direct")


@pytest.mark.parametrize("table_name", ["..", ".", "a\\b", "a\0b"])
def test_a_table_name_that_is_not_one_folder_is_refused_before_the_naming_convention(table_name):
    with pytest.raises(ConfigError, match="table_name"):
        check_table_name(table_name)


def test_names_equal_ignoring_case_are_refused_naming_both():
    from airflow_provider_deltamerge.errors import ColumnNameError
    from airflow_provider_deltamerge.model.naming import check_distinct_names

    with pytest.raises(ColumnNameError) as raised:
        normalize_columns(["ID", "id"], direct, "orders")
    assert raised.value.names == ("ID", "id") and raised.value.table == "orders"
    assert "naming='direct'" not in str(raised.value)  # direct keeps them equal but for case
    check_distinct_names("orders", ["id", "Name"], ["id", "Name", "extra"])  # the same columns: fine
    with pytest.raises(ColumnNameError, match="'name' and 'Name' .the first the table's"):
        check_distinct_names("orders", ["id", "Name"], ["name"])
    with pytest.raises(ColumnNameError, match="'Ä' and 'ä'"):
        check_distinct_names("orders", ["Ä", "ä"])


def test_backticked_names_parse_as_one_column_in_spark_sql():
    from airflow_provider_deltamerge.model.naming import backticked

    assert backticked("a.b") == "`a.b`"
    assert backticked("a`b") == "`a``b`"


@pytest.mark.parametrize("name", ["a b", "a,b", "a;b", "a{b", "a}b", "a(b", "a)b", "a=b", "a\tb", "a\nb"])
def test_a_name_delta_does_not_allow_is_refused(name):
    from airflow_provider_deltamerge.errors import InvalidColumnNameError
    from airflow_provider_deltamerge.model.naming import check_storable_names

    with pytest.raises(InvalidColumnNameError) as raised:
        check_storable_names("orders", ["id", name])
    assert raised.value.name == name
    check_storable_names("orders", ["a.b", "a`b", 'a"b', "a[0]", "ünï", "1st", "select", "a-b:c?"])


def test_a_spark_string_literal_escapes_quotes_and_backslashes():
    assert spark_string("it's a \\ path") == "'it\\'s a \\\\ path'"
    assert spark_string("") == "''"
