"""scd2 through run_load: delete-and-return, compound keys, empty runs, what a version is, one commit each."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import pytest
from deltalake import DeltaTable
from pyspark.sql import types as T

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.delta.store import read_commits, read_loads
from tests.helpers import table_version

pytestmark = pytest.mark.spark

UTC = timezone.utc
SCD2 = {"disposition": "merge", "strategy": "scd2"}
L1, L2, L3 = "1704067200.000000", "1704153600.000000", "1704240000.000000"  # 2024-01-01, -02, -03 UTC
D1, D2, D3 = (datetime(2024, 1, day, tzinfo=UTC) for day in (1, 2, 3))


def rows_of(path: str, columns: tuple[str, ...]) -> list[tuple]:
    rows = DeltaTable(path).to_pyarrow_table(columns=list(columns)).to_pylist()
    return sorted((tuple(r[c] for c in columns) for r in rows), key=repr)


def inserted_updated(info) -> tuple[int, int]:
    return info.metrics["numTargetRowsInserted"], info.metrics["numTargetRowsUpdated"]


def load(spark, dataset, rows, load_id=None, table="dim", **arguments):
    arguments.setdefault("write_disposition", SCD2)
    return run_load(rows, spark=spark, dataset=dataset, table_name=table, load_id=load_id, **arguments)


def test_deleted_version_returns_and_a_key_changes_back(spark, dataset):
    load(spark, dataset, [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], L1)
    second = load(spark, dataset, [{"id": 1, "v": "a2"}], L2)  # 1 changes, 2 is deleted
    third = load(spark, dataset, [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], L3)  # 1 back to a, 2 returns
    columns = ("id", "v", "_dlt_valid_from", "_dlt_valid_to")
    assert rows_of(third.table_path, columns) == sorted(
        [
            (1, "a", D1, D2),
            (1, "a2", D2, D3),
            (1, "a", D3, None),
            (2, "b", D1, D2),
            (2, "b", D3, None),
        ],
        key=repr,
    )
    assert inserted_updated(second) == (1, 2) and inserted_updated(third) == (2, 1)
    # the version id repeats for a returning version; (version, valid_from) stays unique
    versions = rows_of(third.table_path, ("id", "v", "_dlt_id", "_dlt_valid_from"))
    ids = {(i, v): {row[2] for row in versions if row[:2] == (i, v)} for i, v in ((1, "a"), (2, "b"))}
    assert all(len(found) == 1 for found in ids.values())
    assert len({(row[2], row[3]) for row in versions}) == len(versions) == 5


def test_compound_merge_key_compares_column_by_column(spark, dataset):
    key = ["country", "region"]
    first = [
        {"country": "a", "region": "bc", "v": 1},
        {"country": "ab", "region": "c", "v": 1},
        {"country": "q", "region": "r", "v": 1},
    ]
    load(spark, dataset, first, L1, merge_key=key)
    second = load(spark, dataset, [{"country": "a", "region": "bc", "v": 2}], L2, merge_key=key)
    third = load(
        spark,
        dataset,
        [{"country": "a", "region": "bc", "v": 1}, {"country": "q", "region": "r", "v": 1}],
        L3,
        merge_key=key,
    )
    columns = ("country", "region", "v", "_dlt_valid_from", "_dlt_valid_to")
    assert rows_of(third.table_path, columns) == sorted(
        [
            ("a", "bc", 1, D1, D2),
            ("a", "bc", 2, D2, D3),
            ("a", "bc", 1, D3, None),
            ("ab", "c", 1, D1, None),  # "a"+"bc" == "ab"+"c" concatenated, yet untouched
            ("q", "r", 1, D1, None),  # unchanged: not rewritten, keeps its load id
        ],
        key=repr,
    )
    assert inserted_updated(second) == (1, 1) and inserted_updated(third) == (1, 1)
    assert ("q", "r", L1) in rows_of(third.table_path, ("country", "region", "_dlt_load_id"))


def test_empty_batches_retire_nothing_and_record_no_load(spark, dataset):
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("v", T.StringType())])
    empty = spark.createDataFrame([], schema)
    nothing = load(spark, dataset, empty, table="never")
    assert not nothing.loaded and nothing.table_version is None
    assert not DeltaTable.is_deltatable(f"{dataset}/never")
    first = load(spark, dataset, [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], L1)
    before = rows_of(first.table_path, ("id", "v", "_dlt_valid_from", "_dlt_valid_to", "_dlt_load_id"))
    for merge_key in (None, "id"):
        info = load(spark, dataset, empty, merge_key=merge_key)
        assert not info.loaded and info.table_version == 0
    assert table_version(first.table_path) == 0
    assert (
        rows_of(first.table_path, ("id", "v", "_dlt_valid_from", "_dlt_valid_to", "_dlt_load_id")) == before
    )
    assert [r["load_id"] for r in read_loads(dataset)] == [L1]


def test_version_is_a_hash_of_stored_values_not_of_how_the_source_spells_them(spark, dataset):
    first = load(spark, dataset, [{"id": 1, "c": None, "d": "x"}, {"id": 2, "c": "y", "d": "z"}], L1)
    same_values = [
        # keys in another order, and id 1's null "c" left out
        [{"d": "x", "id": 1}, {"d": "z", "c": "y", "id": 2}],
        # a Spark DataFrame: other column order, a narrower integer type
        spark.createDataFrame(
            [("x", None, 1), ("z", "y", 2)],
            T.StructType(
                [
                    T.StructField("d", T.StringType()),
                    T.StructField("c", T.StringType()),
                    T.StructField("id", T.IntegerType()),
                ]
            ),
        ),
        # a column that holds only nulls this time (not even typed)
        [{"id": 1, "d": "x", "e": None}, {"id": 2, "c": "y", "d": "z", "e": None}],
    ]
    for batch in same_values:
        info = load(spark, dataset, batch)
        assert inserted_updated(info) == (0, 0)
    changed = load(spark, dataset, [{"id": 1, "c": "", "d": "x"}, {"id": 2, "c": "y", "d": "z"}])
    assert inserted_updated(changed) == (1, 1)  # an empty string is a value, unlike null
    rows = rows_of(first.table_path, ("id", "c", "_dlt_load_id"))
    assert rows == sorted([(1, None, L1), (1, "", changed.load_id), (2, "y", L1)], key=repr)


def test_a_new_column_does_not_make_new_versions_of_rows_that_lack_it(spark, dataset):
    first = load(spark, dataset, [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], L1)
    info = load(spark, dataset, [{"id": 1, "v": "a"}, {"id": 2, "v": "b", "extra": 7}], L2)
    assert inserted_updated(info) == (1, 1)  # only row 2 has a value in the new column
    assert rows_of(first.table_path, ("id", "extra", "_dlt_valid_to")) == sorted(
        [(1, None, None), (2, None, D2), (2, 7, None)], key=repr
    )


def test_primary_key_hard_delete_and_dedup_sort_are_ignored_with_a_warning(spark, dataset, caplog):
    rows = [
        {"id": 1, "v": "a", "deleted": False, "seq": 1},
        {"id": 1, "v": "a", "deleted": False, "seq": 1},  # identical duplicate: two active rows (SCD-11)
        {"id": 2, "v": "b", "deleted": True, "seq": 2},  # a hard-delete flag means nothing to scd2
    ]
    with caplog.at_level(logging.WARNING):
        info = load(
            spark,
            dataset,
            rows,
            L1,
            primary_key="id",
            columns={"deleted": {"hard_delete": True}, "seq": {"dedup_sort": "desc"}},
        )
    assert rows_of(info.table_path, ("id", "v", "deleted")) == [
        (1, "a", False),
        (1, "a", False),
        (2, "b", True),
    ]
    warned = " ".join(r.getMessage() for r in caplog.records)
    for hint in ("primary_key", "hard_delete", "dedup_sort"):
        assert f"{hint} hint" in warned and "ignored by merge strategy 'scd2'" in warned


def test_each_load_is_one_commit_carrying_its_load_id_even_when_nothing_changes(spark, dataset):
    rows = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    infos = [load(spark, dataset, rows, L1), load(spark, dataset, rows, L2, merge_key="id")]
    infos.append(load(spark, dataset, [{"id": 1, "v": "a1"}], L3, merge_key="id"))
    assert [i.table_version for i in infos] == [0, 1, 2]
    commits = read_commits(infos[0].table_path)
    assert [c.load_id for c in commits] == [L3, L2, L1]
    assert commits[0].operation == "MERGE"
    assert inserted_updated(infos[1]) == (0, 0) and inserted_updated(infos[2]) == (1, 1)
    loads = read_loads(dataset)
    assert [(r["load_id"], r["table_version"]) for r in loads] == [(L1, 0), (L2, 1), (L3, 2)]
    assert loads[2]["metrics"]["numTargetRowsUpdated"] == 1


def test_an_empty_incremental_window_records_a_table_that_scd2_can_load_next(spark, dataset):
    window = {"cursor_path": "n", "initial_value": 0, "end_value": 10}
    empty = load(spark, dataset, [{"id": 1, "n": 20}], L1, merge_key="id", incremental=window)
    assert empty.loaded and DeltaTable(empty.table_path).to_pyarrow_table().num_rows == 0
    names = DeltaTable(empty.table_path).schema().to_arrow().names
    assert {"_dlt_valid_from", "_dlt_valid_to", "_dlt_id"} <= set(names)
    rows = [{"id": 1, "n": 5}, {"id": 2, "n": 6}]
    info = load(spark, dataset, rows, L2, merge_key="id", incremental=window)
    assert rows_of(info.table_path, ("id", "n", "_dlt_valid_from", "_dlt_valid_to")) == [
        (1, 5, D2, None),
        (2, 6, D2, None),
    ]


def test_year_9999_timestamps_are_written_as_int64_and_read_back_with_deltalake(spark, dataset):
    """INT96 (Spark's default) reads back as nanoseconds in pyarrow and delta-rs, where 9999 overflows."""
    import pyarrow.parquet as pq

    far = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    disposition = {**SCD2, "active_record_timestamp": "9999-12-31", "boundary_timestamp": D1.isoformat()}
    load(
        spark,
        dataset,
        [{"id": 1, "expires": far}, {"id": 2, "expires": D2}],
        L1,
        write_disposition=disposition,
    )
    disposition["boundary_timestamp"] = D2.isoformat()
    info = load(spark, dataset, [{"id": 1, "expires": D3}], L2, write_disposition=disposition)

    high = datetime(9999, 12, 31, tzinfo=UTC)
    assert rows_of(info.table_path, ("id", "expires", "_dlt_valid_from", "_dlt_valid_to")) == sorted(
        [(1, far, D1, D2), (2, D2, D1, D2), (1, D3, D2, high)], key=repr
    )
    for file in DeltaTable(info.table_path).file_uris():
        schema = pq.ParquetFile(file.removeprefix("file://")).schema
        columns = [schema.column(i) for i in range(len(schema))]
        stamped = [c for c in columns if c.logical_type.type == "TIMESTAMP"]  # INT96 has no logical type
        assert {c.name for c in stamped} >= {"expires", "_dlt_valid_from", "_dlt_valid_to"}
        assert {c.physical_type for c in stamped} == {"INT64"}
