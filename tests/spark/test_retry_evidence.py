"""A retry whose earlier attempt committed and stopped before its record, when the table's log no longer
holds that commit where the retry looks: log cleanup after a checkpoint (a table whose log retention was
shortened outside the loads, which loads refuse to set), or more newer commits than recovery reads. The
commit's Delta txn identifier, kept in the checkpoint, tells the retry; nothing is loaded twice."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import StoreError, run_load
from airflow_provider_deltamerge.delta import store
from airflow_provider_deltamerge.delta.maintenance import maintain_table
from airflow_provider_deltamerge.delta.store import HISTORY_DEPTH
from tests.faults import InjectedFault

TABLE = "events"


def run_context(run_id: str, try_number: int) -> dict:
    return {"dag_id": "events", "task_id": "load", "run_id": run_id, "try_number": try_number}


def load(spark, dataset, ids, run_id="scheduled__1", try_number=1):
    return run_load(
        [{"id": n} for n in ids],
        spark=spark,
        dataset=dataset,
        table_name=TABLE,
        run_context=run_context(run_id, try_number),
    )


def ids(dataset) -> list[int]:
    return sorted(DeltaTable(f"{dataset}/{TABLE}").to_pyarrow_table(columns=["id"]).column("id").to_pylist())


def first_attempt_dies_after_its_commit(spark, dataset, monkeypatch):
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", "after_commit")
    with pytest.raises(InjectedFault):
        load(spark, dataset, [1, 2, 3])
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")


def test_a_retry_after_log_cleanup_loads_nothing_twice(spark, dataset, monkeypatch):
    load(spark, dataset, [0], run_id="scheduled__0")
    DeltaTable(f"{dataset}/{TABLE}").alter.set_table_properties(  # outside the loads, which refuse it
        {"delta.logRetentionDuration": "interval 0 seconds", "delta.checkpointInterval": "1"}
    )
    first_attempt_dies_after_its_commit(spark, dataset, monkeypatch)
    maintain_table(dataset, TABLE, optimize=True, checkpoint=True)  # checkpoints, and cleans the log up
    DeltaTable(f"{dataset}/{TABLE}").cleanup_metadata()

    with pytest.raises(StoreError, match="log cleanup deleted it") as refused:
        load(spark, dataset, [1, 2, 3], try_number=2)
    assert "scheduled__1" in str(refused.value)
    assert ids(dataset) == [0, 1, 2, 3]


def test_a_retry_finds_its_earlier_commit_behind_many_newer_ones(spark, dataset, monkeypatch):
    load(spark, dataset, [0], run_id="scheduled__0")
    first_attempt_dies_after_its_commit(spark, dataset, monkeypatch)
    table = DeltaTable(f"{dataset}/{TABLE}")
    for n in range(HISTORY_DEPTH + 1):  # commits of other writers, newer than the attempt's
        table.alter.set_table_properties({"delta.checkpointInterval": str(10 + n)})

    retry = load(spark, dataset, [1, 2, 3], try_number=2)

    assert ids(dataset) == [0, 1, 2, 3]
    recorded = [r for r in store.read_loads(dataset) if r["run_id"] == "scheduled__1"]
    assert [(r["load_id"], r["try_number"]) for r in recorded] == [(retry.load_id, 1)]
