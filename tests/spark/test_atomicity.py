"""A load that fails at any step leaves the table and the state tables as they were; a load that stopped
after its commit is recorded by the next load from the commit's metadata, never applied twice."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import run_load
from tests.faults import STEPS, InjectedFault
from tests.helpers import ordered, read_rows, table_version

BEFORE_COMMIT = ("extract", "stage", "plan", "commit")
AFTER_COMMIT = ("after_commit", "after_state_row")
HINTS = {"primary_key": "id", "columns": {"gone": {"hard_delete": True}}, "write_disposition": "merge"}
SEED = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}]
CHANGE = [{"id": 1, "v": "a2"}, {"id": 2, "gone": True}, {"id": 4, "v": "d"}]
CHANGED = [
    {"id": 1, "v": "a2", "gone": None},
    {"id": 3, "v": "c", "gone": None},
    {"id": 4, "v": "d", "gone": None},
]


def load(spark, dataset, data, **arguments):
    arguments.setdefault("table_name", "accounts")
    arguments.setdefault("pipeline_name", "bank")
    return run_load(data, spark=spark, dataset=dataset, **arguments)


def recorded(dataset):
    rows = DeltaTable(f"{dataset}/_dlt_loads").to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: float(r["load_id"]))


def state_rows(dataset):
    path = f"{dataset}/_dlt_pipeline_state"
    return DeltaTable(path).to_pyarrow_table().num_rows if DeltaTable.is_deltatable(path) else 0


def test_every_step_is_covered():
    assert set(BEFORE_COMMIT + AFTER_COMMIT) == set(STEPS)


@pytest.mark.parametrize("step", BEFORE_COMMIT)
def test_a_failure_before_the_commit_changes_nothing(spark, dataset, monkeypatch, step):
    path = f"{dataset}/accounts"
    first = load(spark, dataset, SEED, **HINTS)
    states = state_rows(dataset)
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", step)
    with pytest.raises(InjectedFault, match=step):
        load(spark, dataset, CHANGE, **HINTS)
    assert read_rows(path) == ordered(SEED)
    assert table_version(path) == 0
    assert [r["load_id"] for r in recorded(dataset)] == [first.load_id]
    assert state_rows(dataset) == states

    monkeypatch.delenv("DELTAMERGE_FAIL_AT")
    retry = load(spark, dataset, CHANGE, **HINTS)
    assert read_rows(path) == ordered(CHANGED)
    assert table_version(path) == 1
    assert [r["load_id"] for r in recorded(dataset)] == [first.load_id, retry.load_id]


def test_a_failed_first_load_leaves_no_table(spark, dataset, monkeypatch):
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", "commit")
    with pytest.raises(InjectedFault):
        load(spark, dataset, SEED, **HINTS)
    assert not DeltaTable.is_deltatable(f"{dataset}/accounts")
    assert not DeltaTable.is_deltatable(f"{dataset}/_dlt_loads")


@pytest.mark.parametrize("step", AFTER_COMMIT)
def test_a_load_stopped_after_its_commit_is_recorded_by_the_next_load(
    spark, dataset, monkeypatch, step, each_writer
):
    path = f"{dataset}/accounts"
    first = load(spark, dataset, SEED, **HINTS)
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", step)
    with pytest.raises(InjectedFault, match=step):
        load(spark, dataset, CHANGE, **HINTS)
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")
    # the commit landed, the load is not recorded yet
    assert read_rows(path) == ordered(CHANGED)
    assert table_version(path) == 1
    assert [r["load_id"] for r in recorded(dataset)] == [first.load_id]
    (interrupted,) = {
        r["_dlt_load_id"] for r in DeltaTable(path).to_pyarrow_table().to_pylist() if r["id"] == 4
    }

    if step == "after_commit":
        following = load(spark, dataset, [{"id": 5, "v": "e"}], **HINTS)
        assert read_rows(path) == ordered(CHANGED + [{"id": 5, "v": "e", "gone": None}])
        assert table_version(path) == 2  # the interrupted load was not committed again
        expected_ids = [first.load_id, interrupted, following.load_id]
    else:  # even a load with nothing to load completes the record
        following = load(spark, dataset, [], **HINTS)
        assert following.load_id is None
        assert read_rows(path) == ordered(CHANGED)
        assert table_version(path) == 1
        expected_ids = [first.load_id, interrupted]
    rows = recorded(dataset)
    assert [r["load_id"] for r in rows] == expected_ids
    record = rows[1]
    assert (record["schema_name"], record["table_name"], record["status"], record["table_version"]) == (
        "bank",
        "accounts",
        0,
        1,
    )
    metrics = json.loads(record["metrics"])
    assert metrics["load_id"] == interrupted
    assert metrics["table_version"] == 1
    assert (metrics["numTargetRowsInserted"], metrics["numTargetRowsDeleted"]) == (2, 2)
    assert (metrics["rows_extracted"], metrics["rows_staged"], metrics["writer"]) == (3, 3, each_writer)
    assert float(following.load_id or "inf") > float(interrupted)


def test_retrying_an_interrupted_load_with_its_id_does_not_apply_it_twice(spark, dataset, monkeypatch):
    path = f"{dataset}/accounts"
    load(spark, dataset, SEED, write_disposition="append")
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", "after_commit")
    with pytest.raises(InjectedFault):
        load(spark, dataset, [{"id": 7, "v": "g"}], write_disposition="append")
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")
    (interrupted,) = {
        r["_dlt_load_id"] for r in DeltaTable(path).to_pyarrow_table().to_pylist() if r["id"] == 7
    }
    retry = load(spark, dataset, [{"id": 7, "v": "g"}], write_disposition="append", load_id=interrupted)
    assert retry.load_id == interrupted
    assert (retry.table_version, retry.metrics["numTargetRowsInserted"]) == (1, 1)
    assert read_rows(path) == ordered(SEED + [{"id": 7, "v": "g"}])  # appended once
    assert table_version(path) == 1
    rows = recorded(dataset)
    assert [r["load_id"] for r in rows].count(interrupted) == 1
    assert json.loads(rows[-1]["metrics"])["numTargetRowsInserted"] == 1


def test_an_airflow_retry_of_a_load_stopped_after_its_commit_finishes_it(spark, dataset, monkeypatch):
    path = f"{dataset}/accounts"
    attempt = {
        "dag_id": "bank",
        "task_id": "load_accounts",
        "run_id": "scheduled__2024-01-01",
        "try_number": 1,
    }
    load(spark, dataset, SEED, **HINTS)
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", "after_commit")
    with pytest.raises(InjectedFault):
        load(spark, dataset, CHANGE, run_context=attempt, **HINTS)
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")
    retry = load(spark, dataset, CHANGE, run_context={**attempt, "try_number": 2}, **HINTS)
    assert read_rows(path) == ordered(CHANGED)
    assert table_version(path) == 1  # the retry committed nothing
    rows = recorded(dataset)
    assert len(rows) == 2 and rows[-1]["load_id"] == retry.load_id
    assert (rows[-1]["dag_id"], rows[-1]["task_id"], rows[-1]["run_id"], rows[-1]["try_number"]) == (
        "bank",
        "load_accounts",
        "scheduled__2024-01-01",
        1,
    )
    assert retry.table_version == 1
    assert (retry.metrics["numTargetRowsInserted"], retry.metrics["numTargetRowsDeleted"]) == (2, 2)
