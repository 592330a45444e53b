"""Tables a load writes with delta-rs are checkpointed every 10 commits (delta/checkpoints.py), as Delta
on Spark does, so that opening them stays as fast after many loads as after a few."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError

from airflow_provider_deltamerge import Incremental, run_load
from airflow_provider_deltamerge.delta import checkpoints, store

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]


def checkpointed_versions(table_path) -> list[int]:
    log = Path(table_path) / "_delta_log"
    return sorted(int(p.name.split(".")[0]) for p in log.glob("*.checkpoint.parquet"))


def appended(path: str, n: int, **kwargs) -> None:
    write_deltalake(path, pa.table({"id": [n]}), mode="append", **kwargs)


def test_commits_passing_a_multiple_of_ten_leave_a_checkpoint_of_the_table(tmp_path):
    path = str(tmp_path / "t")
    appended(path, 0)
    for n in range(1, 11):  # one commit at a time; the table as the commit left it
        appended(path, n)
        checkpoints.after_commits(DeltaTable(path), n - 1)
        assert checkpointed_versions(path) == ([10] if n == 10 else [])
    for n in range(11, 23):  # several commits, then one call (a load that wrote its table twice)
        appended(path, n)
    checkpoints.after_commits(DeltaTable(path), 19)
    assert checkpointed_versions(path) == [10, 22]
    checkpoints.after_commits(DeltaTable(path), 22)  # nothing new passed
    assert checkpointed_versions(path) == [10, 22]
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == list(range(23))


def test_a_table_that_sets_its_own_interval_is_left_to_delta_rs(tmp_path):
    path = str(tmp_path / "t")
    appended(path, 0, configuration={"delta.checkpointInterval": "100"})
    for n in range(1, 12):
        appended(path, n)
        checkpoints.after_commits(DeltaTable(path), n - 1)
    assert checkpointed_versions(path) == []


UPSERT = {"disposition": "merge", "strategy": "upsert"}


def load(spark, dataset, n: int):
    columns = (f"IF(id = 0, 0, {n}) AS id", f"{n} AS at", f"concat('v', id, '-{n}') AS v")
    rows = spark.range(2).selectExpr(*columns)
    return run_load(
        rows,
        spark=spark,
        dataset=dataset,
        table_name="items",
        write_disposition=UPSERT,
        primary_key="id",
        incremental=Incremental("at"),
        backend="delta-rs",
    )


def test_loads_keep_their_tables_checkpointed_and_one_that_fails_leaves_the_load_committed(
    spark, dataset, monkeypatch, caplog
):
    """Items, _dlt_loads and _dlt_pipeline_state each get one every 10 commits; where making one fails,
    the load is committed and recorded all the same, says so, and the load passing the next multiple of
    10 makes one."""
    for n in range(1, 11):  # items at version 9
        load(spark, dataset, n)

    def refused(self):
        raise DeltaError("the store refused the write")

    monkeypatch.setattr(DeltaTable, "create_checkpoint", refused)
    with caplog.at_level(logging.INFO, logger=checkpoints.__name__):
        info = load(spark, dataset, 11)  # items at version 10
    assert info.metrics["numTargetRowsInserted"] == 1
    assert "no checkpoint of" in caplog.text and "left for a later load" in caplog.text
    assert checkpointed_versions(f"{dataset}/items") == []
    monkeypatch.undo()
    for n in range(12, 22):
        load(spark, dataset, n)
    assert checkpointed_versions(f"{dataset}/items") == [20]
    for table in ("_dlt_loads", "_dlt_pipeline_state"):
        assert checkpointed_versions(f"{dataset}/{table}"), table
    items = DeltaTable(f"{dataset}/items").to_pyarrow_table()
    assert sorted(items.column("id").to_pylist()) == list(range(22))
    assert len(store.read_loads(dataset)) == 21
    assert store.latest_state(dataset, "deltamerge", "items")["incremental"]["at"]["last_value"] == 21
