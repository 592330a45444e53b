"""Variant columns for values of another type, and schema contracts (evolve, freeze, discard_row,
discard_value) over new tables, new columns and new variant columns."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import ContractError, run_load
from tests.helpers import read_rows


def load(spark, dataset, data, **arguments):
    arguments.setdefault("table_name", "events")
    arguments.setdefault("write_disposition", "merge")
    arguments.setdefault("primary_key", "id")
    return run_load(data, spark=spark, dataset=dataset, **arguments)


def delta_types(path):
    return {f.name: f.type for f in pa.schema(DeltaTable(path).schema().to_arrow())}


def test_values_of_another_type_go_to_variant_columns(spark, dataset):
    path = f"{dataset}/events"
    load(spark, dataset, [{"id": 1, "size": 10, "seen": "2024-01-01", "score": 1.5}])
    load(spark, dataset, [{"id": 2, "size": "large", "seen": "2024-01-02", "score": 2}])
    load(spark, dataset, [{"id": 3, "size": "small", "score": True}], write_disposition="append")
    types = delta_types(path)
    assert types["size"] == pa.int64() and types["size__v_text"] == pa.string()
    assert types["score"] == pa.float64() and types["score__v_bool"] == pa.bool_()
    assert "seen__v_text" not in types  # text into text: no variant
    assert read_rows(path, order_by=["id"]) == [
        {
            "id": 1,
            "size": 10,
            "seen": "2024-01-01",
            "score": 1.5,
            "size__v_text": None,
            "score__v_bool": None,
        },
        {
            "id": 2,
            "size": None,
            "seen": "2024-01-02",
            "score": 2.0,
            "size__v_text": "large",
            "score__v_bool": None,
        },
        {"id": 3, "size": None, "seen": None, "score": None, "size__v_text": "small", "score__v_bool": True},
    ]


def test_lossless_values_are_cast_into_the_existing_column(spark, dataset):
    path = f"{dataset}/events"
    load(spark, dataset, [{"id": 1, "label": "a", "ratio": 0.5}])
    load(spark, dataset, [{"id": 2, "label": 7, "ratio": 3}])
    assert not [name for name in delta_types(path) if "__v_" in name]
    assert read_rows(path, order_by=["id"]) == [
        {"id": 1, "label": "a", "ratio": 0.5},
        {"id": 2, "label": "7", "ratio": 3.0},
    ]


@pytest.mark.parametrize("contract", ["freeze", {"columns": "freeze"}])
def test_freeze_refuses_a_new_column_naming_it_and_writes_nothing(spark, dataset, contract):
    first = load(spark, dataset, [{"id": 1, "name": "a"}])
    with pytest.raises(ContractError) as raised:
        load(spark, dataset, [{"id": 2, "name": "b", "colour": "red"}], schema_contract=contract)
    assert (raised.value.entity, raised.value.name) == ("columns", "colour")
    assert "'colour'" in str(raised.value) and "freezes columns" in str(raised.value)
    assert read_rows(f"{dataset}/events") == [{"id": 1, "name": "a"}]
    assert DeltaTable(f"{dataset}/events").version() == first.table_version
    load(spark, dataset, [{"id": 2, "name": "b"}], schema_contract=contract)  # known columns still load
    assert read_rows(f"{dataset}/events") == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


def test_freeze_refuses_a_new_table_and_a_new_variant(spark, dataset):
    with pytest.raises(ContractError) as raised:
        load(spark, dataset, [{"id": 1}], schema_contract={"tables": "freeze"})
    assert (raised.value.entity, raised.value.name) == ("tables", "events")
    assert not DeltaTable.is_deltatable(f"{dataset}/events")
    load(spark, dataset, [{"id": 1, "size": 3}], schema_contract={"columns": "freeze", "data_type": "evolve"})
    with pytest.raises(ContractError) as raised:
        load(spark, dataset, [{"id": 2, "size": "big"}], schema_contract={"data_type": "freeze"})
    assert (raised.value.entity, raised.value.name) == ("data_type", "size__v_text")
    assert "'size'" in str(raised.value)
    assert read_rows(f"{dataset}/events") == [{"id": 1, "size": 3}]
    load(spark, dataset, [{"id": 2, "size": "big"}])  # evolve: the variant column is added
    load(spark, dataset, [{"id": 3, "size": "small"}], schema_contract="freeze")  # it exists now
    assert read_rows(f"{dataset}/events", order_by=["id"]) == [
        {"id": 1, "size": 3, "size__v_text": None},
        {"id": 2, "size": None, "size__v_text": "big"},
        {"id": 3, "size": None, "size__v_text": "small"},
    ]


def test_discard_row_drops_the_rows_carrying_new_columns_or_types_and_counts_them(spark, dataset):
    path = f"{dataset}/events"
    load(spark, dataset, [{"id": 1, "size": 1}])
    batch = [
        {"id": 2, "size": 2, "colour": None},
        {"id": 3, "size": 3, "colour": "red"},
        {"id": 4, "size": 4, "colour": "blue"},
    ]
    info = load(spark, dataset, batch, schema_contract="discard_row")
    assert info.metrics["rows_discarded"] == 2 and info.metrics["rows_staged"] == 1
    assert "colour" not in delta_types(path)
    assert read_rows(path) == [{"id": 1, "size": 1}, {"id": 2, "size": 2}]
    typed = [{"id": 5, "size": "huge"}, {"id": 6, "size": None}]
    info = load(spark, dataset, typed, schema_contract={"data_type": "discard_row"})
    assert info.metrics["rows_discarded"] == 1
    assert "size__v_text" not in delta_types(path)
    assert read_rows(path)[-1] == {"id": 6, "size": None}


def test_discard_value_drops_just_the_new_values(spark, dataset):
    path = f"{dataset}/events"
    load(spark, dataset, [{"id": 1, "size": 1}])
    batch = [{"id": 2, "size": "huge", "colour": "red"}, {"id": 3, "size": None, "colour": None}]
    info = load(spark, dataset, batch, schema_contract="discard_value")
    assert info.metrics["rows_discarded"] == 0
    assert set(delta_types(path)) == {"id", "size", "_dlt_load_id", "_dlt_id"}
    assert read_rows(path, order_by=["id"]) == [
        {"id": 1, "size": 1},
        {"id": 2, "size": None},
        {"id": 3, "size": None},
    ]


def test_declared_columns_are_not_new_under_a_frozen_contract(spark, dataset):
    path = f"{dataset}/events"
    load(spark, dataset, [{"id": 1}])
    load(
        spark,
        dataset,
        [{"id": 2, "note": "declared"}],
        columns={"note": {"data_type": "text"}},
        schema_contract="freeze",
    )
    assert read_rows(path) == [{"id": 1, "note": None}, {"id": 2, "note": "declared"}]


def test_a_new_table_under_discard_row_is_not_created(spark, dataset):
    info = load(spark, dataset, [{"id": 1}, {"id": 2}], schema_contract={"tables": "discard_row"})
    assert info.load_id is None and info.metrics["rows_discarded"] == 2
    assert not DeltaTable.is_deltatable(f"{dataset}/events")
