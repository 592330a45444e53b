"""merge / delete-insert through run_load (dlt sections E, F, G: DI-*, DS-*, HD-1..4), read with delta-rs."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from deltalake import DeltaTable

from airflow_provider_deltamerge import run_load
from tests.helpers import ordered, read_rows, table_version

MERGE = "merge"


def load(spark, dataset, data, **arguments):
    arguments.setdefault("table_name", "items")
    arguments.setdefault("pipeline_name", "shop")
    arguments.setdefault("write_disposition", MERGE)
    return run_load(data, spark=spark, dataset=dataset, **arguments)


def counts(info):
    m = info.metrics
    return m["numTargetRowsInserted"], m["numTargetRowsDeleted"], m["numTargetRowsUpdated"]


def test_primary_key_dedup_sort_desc_then_asc_replaces_whole_rows(spark, dataset):
    path = f"{dataset}/items"
    # the docs example (DS-2, DS-3): desc keeps the latest; a tie keeps the first row in input order
    first = load(
        spark,
        dataset,
        [
            {"id": 1, "modified": "2024-01-01", "value": "A"},
            {"id": 1, "modified": "2024-01-02", "value": "B"},
            {"id": 2, "modified": "2024-01-01", "value": "C"},
            {"id": 2, "modified": "2024-01-01", "value": "D"},
        ],
        primary_key="id",
        columns={"modified": {"dedup_sort": "desc"}},
    )
    assert read_rows(path) == ordered(
        [{"id": 1, "modified": "2024-01-02", "value": "B"}, {"id": 2, "modified": "2024-01-01", "value": "C"}]
    )
    assert first.metrics["rows_extracted"] == 4
    assert first.metrics["rows_staged"] == 2

    second = load(
        spark,
        dataset,
        [
            {"id": 1, "modified": "2024-01-05", "value": "late"},
            {"id": 1, "modified": "2024-01-03", "value": "early"},
            {"id": 3, "modified": "2024-01-04"},  # no value: stored as NULL, not coalesced (DI-6)
        ],
        primary_key="id",
        columns={"modified": {"dedup_sort": "asc"}},
    )
    assert read_rows(path) == ordered(
        [
            {"id": 1, "modified": "2024-01-03", "value": "early"},
            {"id": 2, "modified": "2024-01-01", "value": "C"},
            {"id": 3, "modified": "2024-01-04", "value": None},
        ]
    )
    assert counts(second) == (2, 1, 0)
    assert (second.metrics["rows_extracted"], second.metrics["rows_staged"]) == (3, 2)
    assert table_version(path) == 1

    # a key replaced again: its old row goes, whatever it held (DI-5, DI-6)
    load(spark, dataset, [{"id": 2, "modified": "2024-02-01"}], primary_key="id")
    assert read_rows(path) == ordered(
        [
            {"id": 1, "modified": "2024-01-03", "value": "early"},
            {"id": 2, "modified": "2024-02-01", "value": None},
            {"id": 3, "modified": "2024-01-04", "value": None},
        ]
    )


def test_ties_keep_the_first_row_in_input_order_across_partitions(spark, dataset):
    rows = [
        {"id": 1, "rank": 1, "pos": 0},
        {"id": 2, "rank": 1, "pos": 1},
        {"id": 1, "rank": 5, "pos": 2},  # first of the id=1 ties at the top
        {"id": 2, "rank": 0, "pos": 3},
        {"id": 3, "rank": 7, "pos": 4},  # without a sort the first row of id=3 wins
        {"id": 2, "rank": 9, "pos": 5},  # first of the id=2 ties at the top
        {"id": 1, "rank": 5, "pos": 6},
        {"id": 3, "rank": 8, "pos": 7},
        {"id": 2, "rank": 9, "pos": 8},
        {"id": 1, "rank": 5, "pos": 9},
    ]
    frame = spark.createDataFrame(rows, "id long, rank long, pos long")
    assert frame.rdd.getNumPartitions() > 1  # the ties of id=1 span partitions
    load(
        spark, dataset, frame, primary_key="id", columns={"rank": {"dedup_sort": "desc"}}, table_name="sorted"
    )
    assert read_rows(f"{dataset}/sorted") == ordered(
        [{"id": 1, "rank": 5, "pos": 2}, {"id": 2, "rank": 9, "pos": 5}, {"id": 3, "rank": 8, "pos": 7}]
    )
    load(spark, dataset, frame, primary_key="id", table_name="unsorted")
    assert read_rows(f"{dataset}/unsorted") == ordered(
        [{"id": 1, "rank": 1, "pos": 0}, {"id": 2, "rank": 1, "pos": 1}, {"id": 3, "rank": 7, "pos": 4}]
    )


def test_deduplicated_true_inserts_every_staged_row(spark, dataset, caplog):
    path = f"{dataset}/items"
    dedup_off = {"disposition": "merge", "strategy": "delete-insert", "deduplicated": True}
    caplog.set_level(logging.WARNING)
    load(
        spark,
        dataset,
        [{"id": 1, "v": "a"}, {"id": 1, "v": "b"}, {"id": 2, "v": "c"}],
        write_disposition=dedup_off,
        primary_key="id",
        columns={"v": {"dedup_sort": "desc"}},
    )
    assert any("dedup_sort" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
    assert read_rows(path) == ordered([{"id": 1, "v": "a"}, {"id": 1, "v": "b"}, {"id": 2, "v": "c"}])
    # both stored rows of key 1 are replaced by the one staged row (DI-5)
    info = load(spark, dataset, [{"id": 1, "v": "z"}], primary_key="id")
    assert read_rows(path) == ordered([{"id": 1, "v": "z"}, {"id": 2, "v": "c"}])
    assert counts(info) == (1, 2, 0)


def test_merge_key_replaces_whole_partitions_keeping_all_staged_rows(spark, dataset, caplog):
    path = f"{dataset}/items"
    load(
        spark,
        dataset,
        [
            {"day": "d1", "id": 1, "v": "old"},
            {"day": "d1", "id": 2, "v": "old"},
            {"day": "d2", "id": 3, "v": "old"},
            {"day": "d3", "id": 4, "v": "old"},
            {"day": "d4", "id": 5, "v": "old"},
        ],
        merge_key="day",
    )
    caplog.set_level(logging.WARNING)
    info = load(
        spark,
        dataset,
        [
            {"day": "d1", "id": 10, "v": "new", "deleted": None},
            {
                "day": "d1",
                "id": 10,
                "v": "new",
                "deleted": None,
            },  # duplicates kept: no dedup without pk (DI-4)
            {"day": "d1", "id": 11, "v": "new", "deleted": False},
            {"day": "d2", "id": 3, "v": "gone", "deleted": True},  # empties d2, inserts nothing (HD-3)
            {"day": "d3", "id": 4, "v": "gone", "deleted": True},
            {"day": "d3", "id": 12, "v": "new", "deleted": None},  # same partition, not flagged: inserted
        ],
        merge_key="day",
        columns={"deleted": {"hard_delete": True}, "v": {"dedup_sort": "desc"}},
    )
    # dedup_sort needs a primary key (DS-1, MS-7)
    assert any("dedup_sort" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
    assert read_rows(path) == ordered(
        [
            {"day": "d1", "id": 10, "v": "new", "deleted": None},
            {"day": "d1", "id": 10, "v": "new", "deleted": None},
            {"day": "d1", "id": 11, "v": "new", "deleted": False},
            {"day": "d3", "id": 12, "v": "new", "deleted": None},
            {"day": "d4", "id": 5, "v": "old", "deleted": None},
        ]
    )
    assert counts(info) == (4, 4, 0)
    assert (info.metrics["rows_extracted"], info.metrics["rows_staged"]) == (6, 6)
    assert table_version(path) == 1


def test_primary_key_or_merge_key_match_deletes(spark, dataset):
    path = f"{dataset}/items"
    load(
        spark,
        dataset,
        [
            {"id": 1, "day": "d1", "v": "a"},
            {"id": 2, "day": "d1", "v": "b"},
            {"id": 3, "day": "d2", "v": "c"},
            {"id": 4, "day": "d3", "v": "d"},
            {"id": 5, "day": "d3", "v": "e"},
        ],
        primary_key="id",
        merge_key="day",
    )
    # id 4 moves to d1: the whole d1 partition goes (merge key) and id 4 leaves d3 (primary key)
    info = load(spark, dataset, [{"id": 4, "day": "d1", "v": "moved"}], primary_key="id", merge_key="day")
    assert read_rows(path) == ordered(
        [
            {"id": 3, "day": "d2", "v": "c"},
            {"id": 4, "day": "d1", "v": "moved"},
            {"id": 5, "day": "d3", "v": "e"},
        ]
    )
    assert counts(info) == (1, 3, 0)
    # a row whose merge key is NULL in the table (the column came later) still goes on its primary key;
    # a flagged row deletes on both keys and is not inserted (DI-1)
    load(spark, dataset, [{"id": 6, "v": "no day"}], primary_key="id")
    load(
        spark,
        dataset,
        [{"id": 6, "day": "d9", "v": "now with day"}, {"id": 99, "day": "d3", "gone": True}],
        primary_key="id",
        merge_key="day",
        columns={"gone": {"hard_delete": True}},
    )
    assert read_rows(path) == ordered(
        [
            {"id": 3, "day": "d2", "v": "c", "gone": None},
            {"id": 4, "day": "d1", "v": "moved", "gone": None},
            {"id": 6, "day": "d9", "v": "now with day", "gone": None},
        ]
    )


def test_no_keys_behaves_as_append_dropping_flagged_rows(spark, dataset, caplog):
    path = f"{dataset}/items"
    batch = [{"v": "a", "deleted": None}, {"v": "b", "deleted": True}]
    caplog.set_level(logging.WARNING)
    load(spark, dataset, batch, columns={"deleted": {"hard_delete": True}})
    assert any("append" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    info = load(spark, dataset, batch, columns={"deleted": {"hard_delete": True}})
    # repeated loads duplicate data; flagged rows are dropped and delete nothing (DI-9, HD-4)
    assert read_rows(path) == [{"v": "a", "deleted": None}, {"v": "a", "deleted": None}]
    assert counts(info) == (1, 0, 0)
    assert table_version(path) == 1


def test_hard_delete_is_evaluated_after_dedup(spark, dataset):
    """The docs' lsn example (DS-4), against a table that already holds the keys."""
    path = f"{dataset}/items"
    hints = {"deleted_flag": {"hard_delete": True}, "lsn": {"dedup_sort": "desc"}}
    load(
        spark,
        dataset,
        [
            {"id": 1, "val": "old", "lsn": 0, "deleted_flag": None},
            {"id": 2, "val": "old", "lsn": 0, "deleted_flag": None},
            {"id": 3, "val": "old", "lsn": 0, "deleted_flag": None},
        ],
        primary_key="id",
        columns=hints,
    )
    info = load(
        spark,
        dataset,
        [
            {"id": 1, "val": "foo", "lsn": 1, "deleted_flag": None},
            {"id": 1, "val": "baz", "lsn": 3, "deleted_flag": None},  # the winner is not flagged: inserted
            {"id": 1, "val": "bar", "lsn": 2, "deleted_flag": True},
            {"id": 2, "val": "foo", "lsn": 1, "deleted_flag": False},
            {"id": 2, "lsn": 2, "deleted_flag": True},  # the winner is a delete: key 2 goes, nothing inserted
            {"id": 7, "lsn": 1, "deleted_flag": True},  # a delete of an unknown key is a no-op (HD-2)
        ],
        primary_key="id",
        columns=hints,
    )
    assert read_rows(path) == ordered(
        [
            {"id": 1, "val": "baz", "lsn": 3, "deleted_flag": None},
            {"id": 3, "val": "old", "lsn": 0, "deleted_flag": None},
        ]
    )
    assert counts(info) == (1, 2, 0)
    assert (info.metrics["rows_extracted"], info.metrics["rows_staged"]) == (6, 3)


def test_hard_delete_flag_types(spark, dataset):
    """A bool flag deletes on True only; any other type on any non-null value (HD-1)."""
    seed = [{"id": i, "v": "old"} for i in range(1, 7)]
    load(spark, dataset, seed, primary_key="id", table_name="by_bool")
    load(spark, dataset, seed, primary_key="id", table_name="by_text")
    load(
        spark,
        dataset,
        [
            {"id": 1, "v": "t", "gone": True},
            {"id": 2, "v": "f", "gone": False},
            {"id": 3, "v": "n", "gone": None},
        ],
        primary_key="id",
        columns={"gone": {"hard_delete": True}},
        table_name="by_bool",
    )
    assert read_rows(f"{dataset}/by_bool") == ordered(
        [
            {"id": 2, "v": "f", "gone": False},
            {"id": 3, "v": "n", "gone": None},
            {"id": 4, "v": "old", "gone": None},
            {"id": 5, "v": "old", "gone": None},
            {"id": 6, "v": "old", "gone": None},
        ]
    )
    when = datetime(2024, 2, 22, 12, 34, 56, tzinfo=timezone.utc)
    load(
        spark,
        dataset,
        [
            {"id": 1, "v": "u", "op": "U", "at": None},
            {"id": 2, "v": "f", "op": "false", "at": None},  # the text "false" is a value, so a delete
            {"id": 3, "v": "n", "op": None, "at": None},
            {"id": 4, "v": "ts", "op": None, "at": when},
        ],
        primary_key="id",
        columns={"op": {"hard_delete": True}},
        table_name="by_text",
    )
    assert read_rows(f"{dataset}/by_text") == ordered(
        [
            {"id": 3, "v": "n", "op": None, "at": None},
            {"id": 4, "v": "ts", "op": None, "at": when},
            {"id": 5, "v": "old", "op": None, "at": None},
            {"id": 6, "v": "old", "op": None, "at": None},
        ]
    )
    load(
        spark,
        dataset,
        [{"id": 4, "v": "x", "at": when}, {"id": 5, "v": "y", "at": None}],
        primary_key="id",
        columns={"at": {"hard_delete": True}},
        table_name="by_text",
    )
    assert read_rows(f"{dataset}/by_text") == ordered(
        [
            {"id": 3, "v": "n", "op": None, "at": None},
            {"id": 5, "v": "y", "op": None, "at": None},
            {"id": 6, "v": "old", "op": None, "at": None},
        ]
    )


def test_empty_merge_batch_changes_nothing(spark, dataset):
    path = f"{dataset}/items"
    load(spark, dataset, [{"id": 1, "v": "a"}], primary_key="id")
    frame = spark.createDataFrame([], "id long, v string")
    for empty in (frame, []):
        info = load(spark, dataset, empty, primary_key="id")
        assert info.load_id is None
        assert info.metrics["rows_staged"] == 0
    assert read_rows(path) == [{"id": 1, "v": "a"}]
    assert table_version(path) == 0
    assert len(DeltaTable(f"{dataset}/_dlt_loads").to_pyarrow_table()) == 1
