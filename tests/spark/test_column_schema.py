"""dlt's column schema on Delta: declared types, precision, nullability and partitioning, read back with
delta-rs; bad values refused naming column, value and key, with nothing written."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import CastError, ConfigError, NullValueError, SchemaError, run_load
from tests.helpers import read_rows

UTC = dt.timezone.utc
EVERY_TYPE = {
    "id": {"data_type": "bigint", "nullable": False},
    "name": {"data_type": "text"},
    "small": {"data_type": "bigint", "precision": 16},
    "medium": {"data_type": "bigint", "precision": 32},
    "tiny": {"data_type": "bigint", "precision": 8},
    "ratio": {"data_type": "double"},
    "flag": {"data_type": "bool"},
    "at": {"data_type": "timestamp"},
    "at_seconds": {"data_type": "timestamp", "precision": 0},
    "at_millis": {"data_type": "timestamp", "precision": 3},
    "local_at": {"data_type": "timestamp", "timezone": False},
    "utc_at": {"data_type": "timestamp", "timezone": False},
    "day": {"data_type": "date"},
    "clock": {"data_type": "time"},
    "amount": {"data_type": "decimal", "precision": 10, "scale": 2},
    "big": {"data_type": "wei"},
    "blob": {"data_type": "binary"},
    "doc": {"data_type": "json"},
}


def load(spark, dataset, data, **arguments):
    arguments.setdefault("table_name", "items")
    arguments.setdefault("write_disposition", "merge")
    arguments.setdefault("primary_key", "id")
    return run_load(data, spark=spark, dataset=dataset, **arguments)


def delta_schema(path):
    return {f.name: (f.type, f.nullable) for f in pa.schema(DeltaTable(path).schema().to_arrow())}


def test_every_dlt_type_is_stored_as_its_delta_type(spark, dataset):
    row = {
        "id": "7",
        "name": 12,
        "small": 300,
        "medium": "70000",
        "tiny": -5,
        "ratio": 2,
        "flag": "true",
        "at": "2024-03-01T10:20:30.123456+02:00",
        "at_seconds": "2024-03-01T10:20:30.987654Z",
        "at_millis": "2024-03-01T10:20:30.987654Z",
        "local_at": "2024-03-01T10:20:30",
        "utc_at": "2024-03-01T10:20:30+02:00",
        "day": "2024-03-01",
        "clock": "23:59:58.5",
        "amount": "12.5",
        "big": str(2**70),
        "blob": bytearray(b"\x00\x01"),
        "doc": {"a": [1, 2], "b": "x"},
    }
    load(spark, dataset, [row], columns=EVERY_TYPE)
    path = f"{dataset}/items"
    schema = delta_schema(path)
    assert {name: schema[name] for name in EVERY_TYPE} == {
        "id": (pa.int64(), False),
        "name": (pa.string(), True),
        "small": (pa.int16(), True),
        "medium": (pa.int32(), True),
        "tiny": (pa.int8(), True),
        "ratio": (pa.float64(), True),
        "flag": (pa.bool_(), True),
        "at": (pa.timestamp("us", tz="UTC"), True),
        "at_seconds": (pa.timestamp("us", tz="UTC"), True),
        "at_millis": (pa.timestamp("us", tz="UTC"), True),
        "local_at": (pa.timestamp("us"), True),
        "utc_at": (pa.timestamp("us"), True),
        "day": (pa.date32(), True),
        "clock": (pa.string(), True),
        "amount": (pa.decimal128(10, 2), True),
        "big": (pa.decimal128(38, 0), True),
        "blob": (pa.binary(), True),
        "doc": (pa.string(), True),
    }
    assert read_rows(path) == [
        {
            "id": 7,
            "name": "12",
            "small": 300,
            "medium": 70000,
            "tiny": -5,
            "ratio": 2.0,
            "flag": True,
            "at": dt.datetime(2024, 3, 1, 8, 20, 30, 123456, tzinfo=UTC),
            "at_seconds": dt.datetime(2024, 3, 1, 10, 20, 30, tzinfo=UTC),
            "at_millis": dt.datetime(2024, 3, 1, 10, 20, 30, 987000, tzinfo=UTC),
            "local_at": dt.datetime(2024, 3, 1, 10, 20, 30),
            "utc_at": dt.datetime(2024, 3, 1, 8, 20, 30),
            "day": dt.date(2024, 3, 1),
            "clock": "23:59:58.5",
            "amount": Decimal("12.50"),
            "big": Decimal(2**70),
            "blob": b"\x00\x01",
            "doc": '{"a":[1,2],"b":"x"}',
        }
    ]


@pytest.mark.parametrize(
    ("columns", "row", "column", "value"),
    [
        (
            {"amount": {"data_type": "decimal", "precision": 5, "scale": 2}},
            {"amount": "ten"},
            "amount",
            "ten",
        ),
        (
            {"amount": {"data_type": "decimal", "precision": 5, "scale": 2}},
            {"amount": 12345.5},
            "amount",
            12345.5,
        ),
        ({"n": {"data_type": "bigint", "precision": 8}}, {"n": 300}, "n", 300),
        ({"n": {"data_type": "bigint"}}, {"n": 2.5}, "n", 2.5),
        ({"n": {"data_type": "bigint"}}, {"n": "2.5"}, "n", "2.5"),
        ({"at": {"data_type": "timestamp"}}, {"at": "yesterday"}, "at", "yesterday"),
        ({"clock": {"data_type": "time"}}, {"clock": "25:00:00"}, "clock", "25:00:00"),
        ({"flag": {"data_type": "bool"}}, {"flag": "maybe"}, "flag", "maybe"),
    ],
)
def test_a_value_that_cannot_be_cast_is_refused_naming_column_value_and_key(
    spark, dataset, columns, row, column, value
):
    first = load(spark, dataset, [{"id": 1, "label": "kept"}])
    with pytest.raises(CastError) as raised:
        load(spark, dataset, [{"id": 2, "label": "ok"}, {"id": 3, "label": "bad", **row}], columns=columns)
    error = raised.value
    assert (error.column, error.value, error.row_key) == (column, value, {"id": 3})
    assert repr(column) in str(error) and repr(value) in str(error) and "{'id': 3}" in str(error)
    assert read_rows(f"{dataset}/items") == [{"id": 1, "label": "kept"}]
    assert DeltaTable(f"{dataset}/items").version() == first.table_version


def test_not_nullable_columns_are_not_null_in_delta_and_a_null_is_refused(spark, dataset):
    columns = [
        {"name": "id", "data_type": "bigint"},
        {"name": "code", "data_type": "text", "nullable": False},
    ]
    load(spark, dataset, [{"id": 1, "code": "a"}], columns=columns)
    path = f"{dataset}/items"
    assert delta_schema(path)["code"] == (pa.string(), False)
    version = DeltaTable(path).version()
    with pytest.raises(NullValueError) as raised:
        load(spark, dataset, [{"id": 2, "code": "b"}, {"id": 3, "code": None}])  # the stored schema applies
    assert (raised.value.column, raised.value.row_key, raised.value.null_rows) == ("code", {"id": 3}, 1)
    with pytest.raises(NullValueError):
        load(spark, dataset, [{"id": 4}])  # a missing value is a NULL
    with pytest.raises(NullValueError) as raised:  # declared without a type, and missing
        load(spark, dataset, [{"id": 5, "code": "e"}], columns={"label": {"nullable": False}})
    assert (raised.value.column, raised.value.row_key) == ("label", {"id": 5})
    assert DeltaTable(path).version() == version
    load(spark, dataset, [{"id": 2, "code": "b"}], write_disposition="append", primary_key=None)
    load(
        spark,
        dataset,
        [{"id": 1, "code": "z"}],
        write_disposition={"disposition": "merge", "strategy": "upsert"},
    )
    assert delta_schema(path)["code"] == (pa.string(), False)
    assert read_rows(path, order_by=["id"]) == [{"id": 1, "code": "z"}, {"id": 2, "code": "b"}]


def test_declared_columns_the_batch_lacks_are_created_and_partitioning_is_kept(spark, dataset):
    columns = {
        "region": {"data_type": "text", "partition": True},
        "note": {"data_type": "text"},
        "score": {"data_type": "double"},
    }
    load(spark, dataset, [{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}], columns=columns)
    path = f"{dataset}/items"
    assert DeltaTable(path).metadata().partition_columns == ["region"]
    schema = delta_schema(path)
    assert schema["note"] == (pa.string(), True) and schema["score"] == (pa.float64(), True)
    assert read_rows(path) == [
        {"id": 1, "region": "eu", "note": None, "score": None},
        {"id": 2, "region": "us", "note": None, "score": None},
    ]
    with pytest.raises(ConfigError) as raised:
        load(spark, dataset, [{"id": 3, "region": "eu"}], columns={"id": {"partition": True}})
    assert raised.value.argument == "columns" and "['region']" in str(raised.value)
    load(spark, dataset, [{"id": 3, "region": "eu", "score": "1.5"}], columns={"region": {"partition": True}})
    assert DeltaTable(path).metadata().partition_columns == ["region"]
    assert read_rows(path)[-1] == {"id": 3, "region": "eu", "note": None, "score": 1.5}


def test_a_later_load_keeps_the_declared_types_and_a_declared_type_cannot_change(spark, dataset):
    columns = {"doc": {"data_type": "json"}, "amount": {"data_type": "decimal", "precision": 8, "scale": 3}}
    load(spark, dataset, [{"id": 1, "doc": {"a": 1}, "amount": 1}], columns=columns)
    load(spark, dataset, [{"id": 2, "doc": [{"b": None}], "amount": "2.5"}])  # no columns given
    path = f"{dataset}/items"
    assert delta_schema(path)["amount"] == (pa.decimal128(8, 3), True)
    assert read_rows(path) == [
        {"id": 1, "doc": '{"a":1}', "amount": Decimal("1.000")},
        {"id": 2, "doc": '[{"b":null}]', "amount": Decimal("2.500")},
    ]
    hashes = [
        r["schema_version_hash"] for r in DeltaTable(f"{dataset}/_dlt_loads").to_pyarrow_table().to_pylist()
    ]
    assert len(hashes) == 2 and hashes[0] == hashes[1] and len(hashes[0]) == 20  # the same declared schema
    version = DeltaTable(path).version()
    with pytest.raises(SchemaError) as raised:
        load(spark, dataset, [{"id": 3, "amount": 3}], columns={"amount": {"data_type": "double"}})
    assert raised.value.column == "amount" and "decimal(8,3)" in str(raised.value)
    with pytest.raises(SchemaError) as raised:  # an undeclared column's type is the table's
        load(spark, dataset, [{"id": 3}], columns={"id": {"data_type": "text"}})
    assert raised.value.column == "id"
    assert DeltaTable(path).version() == version


def test_scd2_versions_rows_of_declared_types(spark, dataset):
    scd2 = {"disposition": "merge", "strategy": "scd2"}
    columns = {"price": {"data_type": "decimal", "precision": 6, "scale": 2}, "tier": {"data_type": "bigint"}}
    load(spark, dataset, [{"id": 1, "price": "9.5", "tier": "1"}], write_disposition=scd2, columns=columns)
    load(spark, dataset, [{"id": 1, "price": 10, "tier": 1}], write_disposition=scd2)
    path = f"{dataset}/items"
    assert delta_schema(path)["price"] == (pa.decimal128(6, 2), True)
    rows = read_rows(path, order_by=["price"], drop=("_dlt_load_id", "_dlt_id", "_dlt_valid_from"))
    assert [(r["price"], r["tier"], r["_dlt_valid_to"] is None) for r in rows] == [
        (Decimal("9.50"), 1, False),
        (Decimal("10.00"), 1, True),
    ]
