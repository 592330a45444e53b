"""Naming conventions: dlt's snake_case (docs and KEY-1 examples) and direct (pure)."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.spec.naming import direct, naming_convention, normalize_columns, snake_case


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
