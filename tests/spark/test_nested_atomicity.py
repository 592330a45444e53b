"""A load with child tables stopped at any table boundary: nothing is recorded until every table has the
load, and a retry of the same run leaves every table with one batch, its own, never a table twice."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import DuplicateKeyError, run_load
from tests.faults import InjectedFault

TABLES = ("parent", "parent__child", "parent__child__grandchild")
ROWS = [
    {"id": 1, "child": [{"bar": 1, "grandchild": [{"baz": 1}, {"baz": 2}]}]},
    {"id": 2, "child": [{"bar": 2}, {"bar": 3, "grandchild": [{"baz": 3}]}]},
]
COUNTS = {"parent": 2, "parent__child": 3, "parent__child__grandchild": 3}
# every boundary between two commits of the load: before the first child table, between child tables,
# after the last child table (before the root table), after the root table (before the record)
BOUNDARIES = (
    "commit:parent__child",
    "committed:parent__child",
    "committed:parent__child__grandchild",
    "after_commit",
    "after_state_row",
)


def run(attempt: int) -> dict:
    return {"dag_id": "d", "task_id": "t", "run_id": "r1", "try_number": attempt}


def load(spark, dataset, **arguments):
    return run_load(ROWS, spark=spark, dataset=dataset, table_name="parent", **arguments)


def rows(dataset, name):
    path = f"{dataset}/{name}"
    return DeltaTable(path).to_pyarrow_table().to_pylist() if DeltaTable.is_deltatable(path) else []


def versions(dataset):
    return {
        n: DeltaTable(f"{dataset}/{n}").version()
        for n in TABLES
        if DeltaTable.is_deltatable(f"{dataset}/{n}")
    }


def recorded(dataset):
    path = f"{dataset}/_dlt_loads"
    return DeltaTable(path).to_pyarrow_table().to_pylist() if DeltaTable.is_deltatable(path) else []


@pytest.mark.parametrize("disposition", ["append", {"disposition": "merge", "strategy": "delete-insert"}])
@pytest.mark.parametrize("step", BOUNDARIES)
def test_a_retry_of_the_run_completes_the_load_where_it_stopped(
    spark, dataset, monkeypatch, step, disposition
):
    arguments = {"write_disposition": disposition, "primary_key": "id"}
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", step)
    with pytest.raises(InjectedFault, match=step):
        load(spark, dataset, run_context=run(1), **arguments)
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")
    assert recorded(dataset) == []  # readers see no load until every table has it
    landed = versions(dataset)

    info = load(spark, dataset, run_context=run(2), **arguments)
    assert {n: len(rows(dataset, n)) for n in TABLES} == COUNTS  # every table once, none twice
    for name in TABLES:
        assert {r["_dlt_load_id"] for r in rows(dataset, name)} == {info.load_id}
    # the root landed: the load is finished, nothing re-applied; else each child table that landed gets
    # one more commit, which replaces the interrupted attempt's rows with this attempt's
    assert all(v == 0 for v in landed.values())
    finished = "parent" in landed
    assert versions(dataset) == {n: 1 if n in landed and not finished else 0 for n in TABLES}
    (record,) = recorded(dataset)
    assert record["load_id"] == info.load_id
    metrics = json.loads(record["metrics"])
    assert set(metrics["tables"]) == set(TABLES)
    assert metrics["tables"]["parent__child__grandchild"]["table_version"] == versions(dataset)[TABLES[2]]
    assert info.metrics["tables"]["parent__child"]["numTargetRowsInserted"] == 3


def test_a_resubmitted_load_id_outside_airflow_finishes_the_tables_that_did_not_land(
    spark, dataset, monkeypatch
):
    load_id = "1717171717.000001"
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", "committed:parent__child")
    with pytest.raises(InjectedFault):
        load(spark, dataset, write_disposition="append", load_id=load_id)
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")
    assert versions(dataset) == {"parent__child": 0}
    info = load(spark, dataset, write_disposition="append", load_id=load_id)
    assert info.load_id == load_id
    assert {n: len(rows(dataset, n)) for n in TABLES} == COUNTS
    assert versions(dataset) == dict.fromkeys(TABLES, 0)
    assert [r["load_id"] for r in recorded(dataset)] == [load_id]


def test_a_failure_before_any_commit_leaves_every_table_as_it_was(spark, dataset, monkeypatch):
    first = load(spark, dataset, write_disposition="merge", primary_key="id")
    before = {n: rows(dataset, n) for n in TABLES}
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", "commit:parent__child")
    changed = [{"id": 1, "child": [{"bar": 9}]}]
    with pytest.raises(InjectedFault):
        run_load(
            changed,
            spark=spark,
            dataset=dataset,
            table_name="parent",
            write_disposition="merge",
            primary_key="id",
        )
    assert {n: rows(dataset, n) for n in TABLES} == before
    assert [r["load_id"] for r in recorded(dataset)] == [first.load_id]


@pytest.mark.parametrize("strategy", ["upsert", "insert-only"])
def test_duplicate_keys_the_root_refuses_are_refused_before_any_child_table_commits(spark, dataset, strategy):
    disposition = {"disposition": "merge", "strategy": strategy}
    load(spark, dataset, write_disposition=disposition, primary_key="id")
    before = {n: rows(dataset, n) for n in TABLES}
    twice = [{"id": 5, "child": [{"bar": 50}]}, {"id": 5, "child": [{"bar": 51}]}]
    with pytest.raises(DuplicateKeyError):
        run_load(
            twice,
            spark=spark,
            dataset=dataset,
            table_name="parent",
            write_disposition=disposition,
            primary_key="id",
        )
    assert {n: rows(dataset, n) for n in TABLES} == before


def test_insert_only_duplicates_of_a_held_key_add_no_child_rows(spark, dataset):
    disposition = {"disposition": "merge", "strategy": "insert-only"}
    load(spark, dataset, write_disposition=disposition, primary_key="id")
    held_twice = [
        {"id": 1, "child": [{"bar": 90}]},
        {"id": 1, "child": [{"bar": 91}]},
        {"id": 7, "child": [{"bar": 70}]},
    ]
    run_load(
        held_twice,
        spark=spark,
        dataset=dataset,
        table_name="parent",
        write_disposition=disposition,
        primary_key="id",
    )
    assert sorted(r["bar"] for r in rows(dataset, "parent__child")) == [1, 2, 3, 70]
    assert sorted(r["id"] for r in rows(dataset, "parent")) == [1, 2, 7]


CHANGED = [
    {"id": 1, "child": [{"bar": 10}]},
    {"id": 3, "child": [{"bar": 30}, {"bar": 31, "grandchild": [{"baz": 30}]}]},
]


@pytest.mark.parametrize(
    "disposition",
    [
        "append",
        "replace",
        {"disposition": "merge", "strategy": "delete-insert"},
        {"disposition": "merge", "strategy": "upsert"},
    ],
)
@pytest.mark.parametrize("step", ["committed:parent__child", "committed:parent__child__grandchild"])
def test_a_retry_with_a_changed_batch_leaves_every_table_with_that_batch(
    spark, dataset, monkeypatch, step, disposition
):
    arguments = {"write_disposition": disposition, "primary_key": "id", "root_key": True}
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", step)
    with pytest.raises(InjectedFault, match=step):
        load(spark, dataset, run_context=run(1), **arguments)
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")

    info = run_load(
        CHANGED, spark=spark, dataset=dataset, table_name="parent", run_context=run(2), **arguments
    )

    assert sorted(r["id"] for r in rows(dataset, "parent")) == [1, 3]
    assert sorted(r["bar"] for r in rows(dataset, "parent__child")) == [10, 30, 31]
    assert [r["baz"] for r in rows(dataset, "parent__child__grandchild")] == [30]
    for name in TABLES:
        assert {r["_dlt_load_id"] for r in rows(dataset, name)} == {info.load_id}
    assert [r["load_id"] for r in recorded(dataset)] == [info.load_id]


@pytest.mark.parametrize("strategy", ["insert-only", "scd2", "upsert", "delete-insert"])
def test_a_retry_with_a_changed_batch_into_a_loaded_table_leaves_its_child_tables_with_that_batch(
    spark, dataset, monkeypatch, strategy
):
    """The interrupted attempt's child rows go, or take the retry's values, under every merge strategy;
    the rows of earlier loads stay as the strategy keeps them."""
    arguments = {"write_disposition": {"disposition": "merge", "strategy": strategy}}
    arguments.update({} if strategy == "scd2" else {"primary_key": "id"})
    earlier = {"dag_id": "d", "task_id": "t", "run_id": "r0", "try_number": 1}
    seed = [{"id": 9, "child": [{"bar": 90, "grandchild": [{"baz": 90}]}]}]
    run_load(seed, spark=spark, dataset=dataset, table_name="parent", run_context=earlier, **arguments)
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", "committed:parent__child__grandchild")
    with pytest.raises(InjectedFault):
        load(spark, dataset, run_context=run(1), **arguments)
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")

    info = run_load(
        CHANGED, spark=spark, dataset=dataset, table_name="parent", run_context=run(2), **arguments
    )

    assert sorted(r["id"] for r in rows(dataset, "parent")) == [1, 3, 9]
    assert sorted(r["bar"] for r in rows(dataset, "parent__child")) == [10, 30, 31, 90]
    assert sorted(r["baz"] for r in rows(dataset, "parent__child__grandchild")) == [30, 90]
    loaded = {r["load_id"] for r in recorded(dataset)}
    assert len(loaded) == 2 and info.load_id in loaded
    for name in TABLES:
        assert {r["_dlt_load_id"] for r in rows(dataset, name)} <= loaded
