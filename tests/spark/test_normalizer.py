"""dlt's normaliser for Python rows through run_load: values coerced one by one, variant columns within a
batch, dicts flattened into `<field>__<subfield>` columns (or kept as structs on request, or where the
table has them), and max_table_nesting keeping nested values as JSON text."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import ConfigError, run_load
from tests.helpers import read_rows


def load(spark, dataset, data, **arguments):
    arguments.setdefault("table_name", "items")
    arguments.setdefault("write_disposition", "append")
    return run_load(data, spark=spark, dataset=dataset, **arguments)


def delta_types(path):
    return {f.name: f.type for f in pa.schema(DeltaTable(path).schema().to_arrow())}


def rows(path):
    return [
        {k: v for k, v in row.items() if not k.startswith("_dlt")} for row in read_rows(path, order_by=["id"])
    ]


def test_declared_columns_take_mixed_values_one_by_one(spark, dataset):
    columns = {"s": {"data_type": "text"}, "ts": {"data_type": "timestamp"}, "j": {"data_type": "json"}}
    data = [
        {"id": 1, "s": "hello", "ts": datetime(2024, 1, 2, 3, 4, 5), "j": {"a": 1}},
        {"id": 2, "s": 5, "ts": "2024-01-02T03:04:05+02:00", "j": [1, 2]},
    ]
    load(spark, dataset, data, columns=columns)
    got = rows(f"{dataset}/items")
    assert [r["s"] for r in got] == ["hello", "5"]
    assert [r["ts"] for r in got] == [
        datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
        datetime(2024, 1, 2, 1, 4, 5, tzinfo=timezone.utc),
    ]
    assert [json.loads(r["j"]) for r in got] == [{"a": 1}, [1, 2]]


def test_a_value_of_another_type_goes_to_its_variant_column_in_the_same_load(spark, dataset):
    path = f"{dataset}/items"
    load(spark, dataset, [{"id": 1}])
    load(spark, dataset, [{"id": 2}, {"id": "idx-nr-456"}, {"id": "3"}])
    assert delta_types(path)["id"] == pa.int64()
    got = [(r["id"], r["id__v_text"]) for r in read_rows(path) if r["id"] != 1]
    assert sorted(got, key=str) == sorted([(2, None), (3, None), (None, "idx-nr-456")], key=str)


def test_in_a_new_table_the_first_type_seen_wins(spark, dataset):
    path = f"{dataset}/items"
    load(spark, dataset, [{"n": 1, "t": "hello"}, {"n": "many", "t": 5}, {"n": 2.0, "t": None}])
    types = delta_types(path)
    assert (types["n"], types["n__v_text"], types["t"]) == (pa.int64(), pa.string(), pa.string())
    got = [(r["n"], r["n__v_text"], r["t"]) for r in read_rows(path)]
    assert sorted(got, key=str) == sorted([(1, None, "hello"), (None, "many", "5"), (2, None, None)], key=str)


def test_nested_dicts_are_flattened_into_columns(spark, dataset):
    path = f"{dataset}/items"
    load(spark, dataset, [{"id": 1, "Addr": {"City": "Berlin", "geo": {"lat": 52.5}}}])
    load(spark, dataset, [{"id": 2, "Addr": {"City": "Paris", "zip": "75001"}}])
    types = delta_types(path)
    assert {k: v for k, v in types.items() if not k.startswith("_dlt")} == {
        "id": pa.int64(),
        "addr__city": pa.string(),
        "addr__geo__lat": pa.float64(),
        "addr__zip": pa.string(),
    }
    assert [(r["addr__city"], r["addr__zip"]) for r in rows(path)] == [("Berlin", None), ("Paris", "75001")]


def test_the_struct_layout_keeps_dicts_as_structs_and_a_struct_table_keeps_it(spark, dataset):
    path = f"{dataset}/items"
    load(spark, dataset, [{"id": 1, "addr": {"city": "Berlin"}}], nested_layout="struct")
    load(spark, dataset, [{"id": 2, "addr": {"city": "Paris"}}])  # no layout given: the table's own
    assert pa.types.is_struct(delta_types(path)["addr"])
    assert [r["addr"] for r in rows(path)] == [{"city": "Berlin"}, {"city": "Paris"}]
    with pytest.raises(ConfigError, match="nested_layout"):
        load(spark, dataset, [{"id": 3}], nested_layout="tree")


def test_max_table_nesting_0_keeps_nested_values_as_json_text(spark, dataset):
    path = f"{dataset}/items"
    data = [{"id": 1, "addr": {"city": "Berlin"}, "tags": ["a", "b"], "items": [{"sku": 1}]}]
    load(spark, dataset, data, max_table_nesting=0)
    types = delta_types(path)
    assert (types["addr"], types["tags"], types["items"]) == (pa.string(), pa.string(), pa.string())
    got = rows(path)[0]
    assert (json.loads(got["addr"]), json.loads(got["tags"]), json.loads(got["items"])) == (
        {"city": "Berlin"},
        ["a", "b"],
        [{"sku": 1}],
    )
    assert not DeltaTable.is_deltatable(f"{dataset}/items__tags")


def test_max_table_nesting_1_flattens_one_level_and_keeps_deeper_values_as_json(spark, dataset):
    path = f"{dataset}/items"
    load(spark, dataset, [{"id": 1, "addr": {"city": "Berlin", "geo": {"lat": 1}}}], max_table_nesting=1)
    got = rows(path)[0]
    assert (got["addr__city"], json.loads(got["addr__geo"])) == ("Berlin", {"lat": 1})


def test_every_dlt_column_hint_is_accepted(spark, dataset):
    hints = {
        "id": {"data_type": "bigint", "sort": True, "unique": True, "cluster": True, "description": "the id"},
        "v": {"variant": False, "incremental": False, "x-annotation": "kept"},
    }
    load(spark, dataset, [{"id": 1, "v": "a"}], columns=hints)
    assert rows(f"{dataset}/items") == [{"id": 1, "v": "a"}]


def test_a_list_inside_a_dict_becomes_a_child_table_one_level_down(spark, dataset):
    data = [{"id": 1, "addr": {"city": "Berlin", "rooms": [{"n": 1, "meta": {"x": 1}}]}}]
    load(spark, dataset, data, max_table_nesting=2)
    child = read_rows(f"{dataset}/items__addr__rooms")
    assert [(r["n"], json.loads(r["meta"])) for r in child] == [(1, {"x": 1})]  # its rows sit at level 0
    assert rows(f"{dataset}/items")[0]["addr__city"] == "Berlin"
