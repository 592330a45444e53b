"""merge / upsert and merge / insert-only through run_load (dlt H, I; HD-7 as changed, HD-8, LD-5)."""

from __future__ import annotations

import logging

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import DuplicateKeyError, run_load
from tests.helpers import ordered, read_rows, table_version

UPSERT = {"disposition": "merge", "strategy": "upsert"}
INSERT_ONLY = {"disposition": "merge", "strategy": "insert-only"}


def load(spark, dataset, data, **arguments):
    arguments.setdefault("table_name", "users")
    arguments.setdefault("pipeline_name", "crm")
    arguments.setdefault("primary_key", "id")
    return run_load(data, spark=spark, dataset=dataset, **arguments)


def raw_rows(path):
    """Rows with their system columns, by id."""
    return {r["id"]: r for r in DeltaTable(path).to_pyarrow_table().to_pylist()}


def counts(info):
    m = info.metrics
    return m["numTargetRowsInserted"], m["numTargetRowsUpdated"], m["numTargetRowsDeleted"]


def test_upsert_updates_every_column_and_inserts_new_keys(spark, dataset):
    path = f"{dataset}/users"
    first = load(
        spark,
        dataset,
        [{"id": 1, "name": "ann", "city": "oslo"}, {"id": 2, "name": "bob", "city": "rome"}],
        write_disposition=UPSERT,
    )
    before = raw_rows(path)
    second = load(
        spark,
        dataset,
        [
            {"id": 1, "name": "anna"},
            {"id": 3, "name": "cid", "city": None},
        ],  # id 1 sends no city: NULL (UP-2)
        write_disposition=UPSERT,
    )
    assert read_rows(path) == ordered(
        [
            {"id": 1, "name": "anna", "city": None},
            {"id": 2, "name": "bob", "city": "rome"},
            {"id": 3, "name": "cid", "city": None},
        ]
    )
    assert counts(second) == (1, 1, 0)
    assert second.metrics["numSourceRows"] == 2
    assert table_version(path) == 1
    after = raw_rows(path)
    # the updated row takes the new load id, the untouched one keeps its own (LD-5)
    assert after[1]["_dlt_load_id"] == after[3]["_dlt_load_id"] == second.load_id
    assert after[2]["_dlt_load_id"] == first.load_id
    # _dlt_id is a hash of the primary key: the same for the same key in every load (UP-4)
    assert after[1]["_dlt_id"] == before[1]["_dlt_id"]
    assert after[2]["_dlt_id"] == before[2]["_dlt_id"]
    assert len({r["_dlt_id"] for r in after.values()}) == 3


def test_upsert_hard_deletes_and_flags_for_unknown_keys_insert_nothing(spark, dataset):
    path = f"{dataset}/users"
    hints = {"deleted": {"hard_delete": True}}
    # into a new table: a flagged row is not inserted either
    first = load(
        spark,
        dataset,
        [
            {"id": 1, "name": "ann", "deleted": False},
            {"id": 2, "name": "bob", "deleted": None},
            {"id": 3, "name": "cid", "deleted": None},
            {"id": 4, "name": "dan", "deleted": True},
        ],
        write_disposition=UPSERT,
        columns=hints,
    )
    assert read_rows(path) == ordered(
        [
            {"id": 1, "name": "ann", "deleted": False},
            {"id": 2, "name": "bob", "deleted": None},
            {"id": 3, "name": "cid", "deleted": None},
        ]
    )
    assert first.metrics["rows_staged"] == 4
    second = load(
        spark,
        dataset,
        [
            {"id": 2, "name": "bob", "deleted": True},  # matched and flagged: deleted
            {"id": 9, "name": "ghost", "deleted": True},  # unknown key and flagged: nothing (deliberate HD-7)
            {"id": 3, "name": "cyd", "deleted": False},  # matched, not flagged: updated
            {"id": 5, "name": "eve", "deleted": None},  # unknown, not flagged: inserted
        ],
        write_disposition=UPSERT,
        columns=hints,
    )
    assert read_rows(path) == ordered(
        [
            {"id": 1, "name": "ann", "deleted": False},
            {"id": 3, "name": "cyd", "deleted": False},
            {"id": 5, "name": "eve", "deleted": None},
        ]
    )
    assert counts(second) == (1, 1, 1)
    # a non-bool flag deletes on any value
    load(
        spark,
        dataset,
        [{"id": 1, "name": "ann", "op": "D"}],
        write_disposition=UPSERT,
        columns={"op": {"hard_delete": True}},
    )
    assert read_rows(path) == ordered(
        [
            {"id": 3, "name": "cyd", "deleted": False, "op": None},
            {"id": 5, "name": "eve", "deleted": None, "op": None},
        ]
    )


def test_upsert_ignores_merge_key_and_dedup_sort_with_a_warning(spark, dataset, caplog):
    caplog.set_level(logging.WARNING)
    load(
        spark,
        dataset,
        [{"id": 1, "day": "d1", "v": 1}],
        write_disposition=UPSERT,
        merge_key="day",
        columns={"v": {"dedup_sort": "desc"}},
    )
    load(spark, dataset, [{"id": 2, "day": "d1", "v": 2}], write_disposition=UPSERT, merge_key="day")
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("merge_key" in m and "upsert" in m for m in messages), messages
    assert any("dedup_sort" in m and "upsert" in m for m in messages), messages
    # the merge key replaced nothing: both rows of day d1 are there (UP-1)
    assert read_rows(f"{dataset}/users") == [{"id": 1, "day": "d1", "v": 1}, {"id": 2, "day": "d1", "v": 2}]


def test_insert_only_inserts_new_keys_and_never_updates_or_deletes(spark, dataset):
    path = f"{dataset}/users"
    hints = {"deleted": {"hard_delete": True}}
    first = load(
        spark,
        dataset,
        [{"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}],
        write_disposition=INSERT_ONLY,
        columns=hints,
    )
    before = raw_rows(path)
    second = load(
        spark,
        dataset,
        [
            {"id": 1, "name": "changed", "deleted": None},  # present: not updated
            {"id": 2, "name": "bob", "deleted": True},  # present and flagged: not deleted
            {"id": 3, "name": "cid", "deleted": False},  # new: inserted
            {"id": 4, "name": "dan", "deleted": True},  # new but flagged: filtered out (HD-8)
        ],
        write_disposition=INSERT_ONLY,
        columns=hints,
    )
    assert read_rows(path) == ordered(
        [
            {"id": 1, "name": "ann", "deleted": None},
            {"id": 2, "name": "bob", "deleted": None},
            {"id": 3, "name": "cid", "deleted": False},
        ]
    )
    assert counts(second) == (1, 0, 0)
    after = raw_rows(path)
    assert after[1]["_dlt_load_id"] == after[2]["_dlt_load_id"] == first.load_id  # existing rows untouched
    assert after[3]["_dlt_load_id"] == second.load_id
    assert after[1]["_dlt_id"] == before[1]["_dlt_id"]
    assert len({r["_dlt_id"] for r in after.values()}) == 3

    # only keys already present: nothing changes, but the load is still one commit and one record
    third = load(spark, dataset, [{"id": 3, "name": "other"}], write_disposition=INSERT_ONLY)
    assert read_rows(path) == ordered(
        [
            {"id": 1, "name": "ann", "deleted": None},
            {"id": 2, "name": "bob", "deleted": None},
            {"id": 3, "name": "cid", "deleted": False},
        ]
    )
    assert third.load_id is not None
    assert counts(third) == (0, 0, 0)
    assert table_version(path) == 2
    loads = DeltaTable(f"{dataset}/_dlt_loads").to_pyarrow_table().to_pylist()
    assert sorted(r["load_id"] for r in loads) == [first.load_id, second.load_id, third.load_id]


def test_upsert_and_insert_only_share_the_key_hash_for_row_ids(spark, dataset):
    load(spark, dataset, [{"id": 7, "v": "a"}], write_disposition=UPSERT, table_name="a")
    load(spark, dataset, [{"id": 7, "v": "b"}], write_disposition=INSERT_ONLY, table_name="b")
    (a,) = DeltaTable(f"{dataset}/a").to_pyarrow_table().to_pylist()
    (b,) = DeltaTable(f"{dataset}/b").to_pyarrow_table().to_pylist()
    assert a["_dlt_id"] == b["_dlt_id"]
    assert a["_dlt_load_id"] != b["_dlt_load_id"]


def test_insert_only_takes_duplicates_of_a_key_the_table_holds_and_refuses_those_of_a_new_key(spark, dataset):
    path = f"{dataset}/users"
    load(spark, dataset, [{"id": 1, "name": "ann"}], write_disposition=INSERT_ONLY)
    second = load(
        spark,
        dataset,
        [{"id": 1, "name": "x"}, {"id": 1, "name": "y"}, {"id": 2, "name": "bob"}],
        write_disposition=INSERT_ONLY,
    )
    assert read_rows(path) == ordered([{"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}])
    assert counts(second)[0] == 1
    with pytest.raises(DuplicateKeyError, match=r"for example 3"):
        load(spark, dataset, [{"id": 3, "name": "c"}, {"id": 3, "name": "d"}], write_disposition=INSERT_ONLY)
    assert read_rows(path) == ordered([{"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}])
