"""append and replace through run_load (dlt WD-2, WD-3, HD-9, MS-7, KEY-4), read back with delta-rs."""

from __future__ import annotations

import json
import logging

from deltalake import DeltaTable
from pyspark.sql import types as T

from airflow_provider_deltamerge import run_load
from tests.helpers import ordered, read_rows, table_version


def load(spark, dataset, data, **arguments):
    arguments.setdefault("table_name", "events")
    arguments.setdefault("pipeline_name", "shop")
    return run_load(data, spark=spark, dataset=dataset, **arguments)


def loads(dataset):
    rows = DeltaTable(f"{dataset}/_dlt_loads").to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: float(r["load_id"]))


def test_append_inserts_rows_as_given_and_ignores_delete_and_dedup_hints(spark, dataset, caplog, each_writer):
    hints = {"deleted": {"hard_delete": True}, "seq": {"dedup_sort": "desc"}}
    caplog.set_level(logging.WARNING)
    first = load(
        spark,
        dataset,
        [
            {"id": 1, "seq": 1, "deleted": None},
            {"id": 1, "seq": 2, "deleted": True},  # a "deleted" row is loaded like any other
            {"id": 1, "seq": 2, "deleted": True},  # and a primary key does not deduplicate (KEY-4)
        ],
        write_disposition="append",
        primary_key="id",
        columns=hints,
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("hard_delete" in m and "ignored" in m and "append" in m for m in warnings), warnings
    assert any("dedup_sort" in m and "ignored" in m and "append" in m for m in warnings), warnings

    path = f"{dataset}/events"
    assert first.table_path == path
    assert read_rows(path) == ordered(
        [
            {"id": 1, "seq": 1, "deleted": None},
            {"id": 1, "seq": 2, "deleted": True},
            {"id": 1, "seq": 2, "deleted": True},
        ]
    )
    assert table_version(path) == 0

    second = load(
        spark,
        dataset,
        [{"id": 1, "seq": 3, "deleted": False}],
        write_disposition="append",
        primary_key="id",
        columns=hints,
    )
    assert read_rows(path) == ordered(
        [
            {"id": 1, "seq": 1, "deleted": None},
            {"id": 1, "seq": 2, "deleted": True},
            {"id": 1, "seq": 2, "deleted": True},
            {"id": 1, "seq": 3, "deleted": False},
        ]
    )
    assert table_version(path) == 1
    metrics = second.metrics
    assert {k: metrics[k] for k in ("numSourceRows", "numTargetRowsInserted", "numTargetRowsUpdated")} == {
        "numSourceRows": 1,
        "numTargetRowsInserted": 1,
        "numTargetRowsUpdated": 0,
    }
    assert metrics["rows_extracted"] == metrics["rows_staged"] == 1
    assert (metrics["table"], metrics["table_version"], metrics["load_id"], metrics["writer"]) == (
        "events",
        1,
        second.load_id,
        each_writer,
    )
    assert [r["load_id"] for r in loads(dataset)] == [first.load_id, second.load_id]


def test_append_of_an_empty_batch_writes_nothing(spark, dataset):
    load(spark, dataset, [{"id": 1}], write_disposition="append")
    empty = spark.createDataFrame([], "id long")
    info = load(spark, dataset, empty, write_disposition="append")
    assert info.load_id is None
    assert read_rows(f"{dataset}/events") == [{"id": 1}]
    assert table_version(f"{dataset}/events") == 0
    assert len(loads(dataset)) == 1


def test_replace_leaves_exactly_the_batch_and_an_empty_batch_empties_the_table(spark, dataset, caplog):
    path = f"{dataset}/events"
    load(
        spark,
        dataset,
        [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}],
        write_disposition="replace",
    )
    assert read_rows(path) == ordered([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}])

    caplog.set_level(logging.WARNING)
    second = load(
        spark,
        dataset,
        [
            {"id": 2, "v": "b2", "gone": None},
            {"id": 2, "v": "b2", "gone": True},
            {"id": 9, "v": "z", "gone": None},
        ],
        write_disposition="replace",
        primary_key="id",
        columns={"gone": {"hard_delete": True}},
    )
    assert any("hard_delete" in r.getMessage() and "replace" in r.getMessage() for r in caplog.records)
    # no dedup by primary key and no hard deletes under replace (KEY-4, HD-9)
    assert read_rows(path) == ordered(
        [
            {"id": 2, "v": "b2", "gone": None},
            {"id": 2, "v": "b2", "gone": True},
            {"id": 9, "v": "z", "gone": None},
        ]
    )
    assert table_version(path) == 1
    assert second.metrics["numTargetRowsDeleted"] == 3
    assert second.metrics["numTargetRowsInserted"] == 3

    empty = spark.createDataFrame(
        [], T.StructType([T.StructField("id", T.LongType()), T.StructField("v", T.StringType())])
    )
    third = load(spark, dataset, empty, write_disposition="replace")
    assert read_rows(path) == []
    assert third.load_id is not None
    assert table_version(path) == 2
    assert third.metrics["numTargetRowsDeleted"] == 3
    assert third.metrics["numTargetRowsInserted"] == 0
    assert third.metrics["rows_extracted"] == third.metrics["rows_staged"] == 0

    load(spark, dataset, [{"id": 5, "v": "e"}], write_disposition="replace")
    assert read_rows(path) == [{"id": 5, "v": "e", "gone": None}]
    fifth = load(spark, dataset, [], write_disposition="replace")  # an empty list empties it too
    assert read_rows(path) == []
    assert table_version(path) == 4
    recorded = loads(dataset)
    assert [r["load_id"] for r in recorded][-1] == fifth.load_id
    assert len(recorded) == 5
    assert json.loads(recorded[-1]["metrics"])["numTargetRowsDeleted"] == 1


def test_replace_of_an_empty_batch_into_a_missing_table_creates_nothing(spark, dataset):
    info = load(spark, dataset, [], write_disposition="replace")
    assert info.load_id is None
    assert not DeltaTable.is_deltatable(f"{dataset}/events")
