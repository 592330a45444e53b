"""dlt's column schema and schema contracts as arguments: parsed, checked, stored (pure)."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge import ConfigError, LoadRequest
from airflow_provider_deltamerge.model.columns import (
    merged_columns,
    parse_column_schema,
    storage_type,
    variant_name,
)
from airflow_provider_deltamerge.model.contract import SchemaContract, tightened


def column(hints, name="c"):
    return parse_column_schema({name: hints})[name]


@pytest.mark.parametrize(
    ("hints", "stored"),
    [
        ({"data_type": "text"}, "string"),
        ({"data_type": "bigint"}, "bigint"),
        ({"data_type": "bigint", "precision": 8}, "tinyint"),
        ({"data_type": "bigint", "precision": 16}, "smallint"),
        ({"data_type": "bigint", "precision": 17}, "int"),
        ({"data_type": "bigint", "precision": 33}, "bigint"),
        ({"data_type": "double"}, "double"),
        ({"data_type": "bool"}, "boolean"),
        ({"data_type": "timestamp"}, "timestamp"),
        ({"data_type": "timestamp", "timezone": False, "precision": 3}, "timestamp_ntz"),
        ({"data_type": "date"}, "date"),
        ({"data_type": "time"}, "string"),
        ({"data_type": "decimal"}, "decimal(38,9)"),
        ({"data_type": "decimal", "precision": 10, "scale": 2}, "decimal(10,2)"),
        ({"data_type": "decimal", "precision": 5}, "decimal(5,5)"),
        ({"data_type": "wei"}, "decimal(38,0)"),
        ({"data_type": "binary"}, "binary"),
        ({"data_type": "json"}, "string"),
        ({"primary_key": True}, None),
    ],
)
def test_each_dlt_type_has_one_storage_type(hints, stored):
    assert storage_type(column(hints)) == stored


def test_the_list_form_is_the_dict_form():
    as_list = [{"name": "id", "data_type": "bigint", "nullable": False}, {"name": "ts", "dedup_sort": "desc"}]
    as_dict = {"id": {"data_type": "bigint", "nullable": False}, "ts": {"dedup_sort": "desc"}}
    assert parse_column_schema(as_list) == parse_column_schema(as_dict)
    request = LoadRequest.create(dataset="/lake", table_name="t", columns=as_list)
    assert request.columns == as_dict
    assert request.declared["id"].required and not request.declared["ts"].required
    assert LoadRequest.from_json(request.to_json()).declared == request.declared


@pytest.mark.parametrize(
    ("columns", "argument", "words"),
    [
        ({"c": {"data_type": "varchar"}}, "columns['c'].data_type", "'text'"),
        ({"c": {"data_type": "timestamp", "precision": 9}}, "columns['c'].precision", "microseconds"),
        ({"c": {"data_type": "bigint", "precision": 65}}, "columns['c'].precision", "bits"),
        ({"c": {"data_type": "decimal", "precision": 39}}, "columns['c'].precision", "38"),
        ({"c": {"data_type": "decimal", "precision": 4, "scale": 6}}, "columns['c'].scale", "larger"),
        ({"c": {"data_type": "text", "scale": 2}}, "columns['c'].scale", "decimal"),
        ({"c": {"data_type": "date", "timezone": True}}, "columns['c'].timezone", "timestamp"),
        ({"c": {"data_type": "bool", "precision": 1}}, "columns['c'].precision", "bool"),
        ({"c": {"precision": 3}}, "columns['c']", "data_type"),
        ({"c": {"nullable": "no"}}, "columns['c'].nullable", "true or false"),
        ({"c": {"partition": 1}}, "columns['c'].partition", "true or false"),
        ({"c": {"name": "d"}}, "columns['c']", "one name"),
        ([{"data_type": "text"}], "columns[0]", "'name'"),
        ([{"name": "a"}, {"name": "a"}], "columns[1]", "twice"),
        ("c", "columns", "dict"),
    ],
)
def test_bad_column_schemas_are_refused_naming_the_hint(columns, argument, words):
    with pytest.raises(ConfigError) as raised:
        LoadRequest.create(dataset="/lake", table_name="t", columns=columns)
    assert raised.value.argument == argument and words in str(raised.value)


def test_every_hint_dlt_accepts_is_accepted():
    hints = {
        "data_type": "bigint",
        "nullable": False,
        "primary_key": True,
        "unique": True,
        "partition": True,
        "cluster": True,
        "row_key": False,
        "parent_key": False,
        "root_key": False,
    }
    assert column(hints).to_dict() == hints


def test_only_how_columns_are_stored_is_kept_for_later_loads():
    stored = {"a": {"data_type": "bigint", "primary_key": True}, "b": {"data_type": "text"}}
    given = {"a": {"nullable": False}, "c": {"dedup_sort": "asc"}}
    assert merged_columns(stored, given) == {
        "a": {"data_type": "bigint", "nullable": False},
        "b": {"data_type": "text"},
    }
    assert merged_columns(None, None) is None
    assert variant_name("price", "text") == "price__v_text"


def test_schema_contracts():
    assert SchemaContract.parse(None) == SchemaContract("evolve", "evolve", "evolve")
    assert SchemaContract.parse("freeze") == SchemaContract("freeze", "freeze", "freeze")
    assert SchemaContract.parse({"columns": "discard_row"}) == SchemaContract(columns="discard_row")
    request = LoadRequest.create(dataset="/lake", table_name="t", schema_contract={"data_type": "freeze"})
    assert request.schema_contract == {"tables": "evolve", "columns": "evolve", "data_type": "freeze"}
    assert (
        LoadRequest.create(dataset="/lake", table_name="t", schema_contract="evolve").schema_contract is None
    )
    for bad, argument in (("strict", "schema_contract"), ({"rows": "freeze"}, "schema_contract")):
        with pytest.raises(ConfigError) as raised:
            LoadRequest.create(dataset="/lake", table_name="t", schema_contract=bad)
        assert raised.value.argument == argument
    with pytest.raises(ConfigError) as raised:
        SchemaContract.parse({"columns": "lenient"})
    assert raised.value.argument == "schema_contract.columns"


def test_a_run_can_only_tighten_a_contract():
    assert tightened("freeze", "evolve") == {"tables": "freeze", "columns": "freeze", "data_type": "freeze"}
    assert tightened({"columns": "discard_value"}, {"columns": "discard_row", "tables": "evolve"}) == {
        "tables": "evolve",
        "columns": "discard_row",
        "data_type": "evolve",
    }
    assert tightened(None, "evolve") is None
