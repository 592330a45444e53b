"""Schema evolution through run_load: new columns are added; lossy types are refused, the table unchanged."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import types as T

from airflow_provider_deltamerge import SchemaError, run_load
from tests.helpers import ordered, read_rows, table_version

UPSERT = {"disposition": "merge", "strategy": "upsert"}


def load(spark, dataset, data, **arguments):
    arguments.setdefault("table_name", "products")
    arguments.setdefault("pipeline_name", "catalog")
    return run_load(data, spark=spark, dataset=dataset, **arguments)


def column_types(path):
    return {f.name: f.type for f in pa.schema(DeltaTable(path).schema().to_arrow())}


def test_new_columns_are_added_and_older_rows_get_null(spark, dataset):
    path = f"{dataset}/products"
    load(spark, dataset, [{"id": 1, "name": "a"}], write_disposition="merge", primary_key="id")
    load(spark, dataset, [{"id": 2, "name": "b", "Price": 10}], write_disposition="merge", primary_key="id")
    assert read_rows(path) == ordered(
        [{"id": 1, "name": "a", "price": None}, {"id": 2, "name": "b", "price": 10}]
    )

    load(spark, dataset, [{"id": 1, "name": "a2", "tag": "x"}], write_disposition=UPSERT, primary_key="id")
    assert read_rows(path) == ordered(
        [{"id": 1, "name": "a2", "price": None, "tag": "x"}, {"id": 2, "name": "b", "price": 10, "tag": None}]
    )
    # a column holding only nulls has no type yet and is not added; a later typed value adds it
    load(spark, dataset, [{"id": 3, "note": None}], write_disposition="append")
    assert "note" not in column_types(path)
    load(spark, dataset, [{"id": 4, "note": "hi"}], write_disposition="append")
    assert read_rows(path) == ordered(
        [
            {"id": 1, "name": "a2", "price": None, "tag": "x", "note": None},
            {"id": 2, "name": "b", "price": 10, "tag": None, "note": None},
            {"id": 3, "name": None, "price": None, "tag": None, "note": None},
            {"id": 4, "name": None, "price": None, "tag": None, "note": "hi"},
        ]
    )
    assert table_version(path) == 4


def test_narrower_types_are_widened_into_existing_columns(spark, dataset):
    path = f"{dataset}/products"
    load(spark, dataset, [{"id": 1, "price": 1.5}], write_disposition="append")
    narrow = spark.createDataFrame(
        [(2, 2.25)],
        T.StructType([T.StructField("id", T.IntegerType()), T.StructField("price", T.FloatType())]),
    )
    load(spark, dataset, narrow, write_disposition="merge", primary_key="id")
    assert read_rows(path) == ordered([{"id": 1, "price": 1.5}, {"id": 2, "price": 2.25}])
    assert column_types(path) == {
        "id": pa.int64(),
        "price": pa.float64(),
        "_dlt_load_id": pa.string(),
        "_dlt_id": pa.string(),
    }


def test_whole_numbers_land_in_an_existing_double_column(spark, dataset):
    path = f"{dataset}/products"
    load(spark, dataset, [{"id": 1, "price": 2.5}], write_disposition="merge", primary_key="id")
    load(spark, dataset, [{"id": 2, "price": 2}], write_disposition="merge", primary_key="id")
    assert read_rows(path) == ordered([{"id": 1, "price": 2.5}, {"id": 2, "price": 2.0}])
    assert column_types(path)["price"] == pa.float64()


@pytest.mark.parametrize(
    ("disposition", "batch", "column", "table_type", "batch_type"),
    [
        ("merge", [{"id": "two", "name": "b", "price": 1}], "id", "bigint", "string"),
        ("upsert", [{"id": 2.5, "name": "b", "price": 2}], "id", "bigint", "double"),
    ],
)
def test_a_type_clash_fails_naming_column_and_types_with_the_table_unchanged(
    spark, dataset, disposition, batch, column, table_type, batch_type
):
    path = f"{dataset}/products"
    first = load(
        spark, dataset, [{"id": 1, "name": "a", "price": 3}], write_disposition="merge", primary_key="id"
    )
    disposition = UPSERT if disposition == "upsert" else disposition
    with pytest.raises(SchemaError) as raised:  # a key column never moves to a variant column
        load(spark, dataset, batch, write_disposition=disposition, primary_key="id")
    error = raised.value
    assert (error.table, error.column, error.table_type, error.batch_type) == (
        "products",
        column,
        table_type,
        batch_type,
    )
    message = str(error)
    assert repr(column) in message and table_type in message and batch_type in message
    assert read_rows(path) == [{"id": 1, "name": "a", "price": 3}]
    assert table_version(path) == 0
    loads = DeltaTable(f"{dataset}/_dlt_loads").to_pyarrow_table().to_pylist()
    assert [r["load_id"] for r in loads] == [first.load_id]
