"""A lost cursor state never makes an incremental load start again from initial_value.

Every data commit carries its load's new cursor state, so where `_dlt_pipeline_state` was deleted,
emptied or lost its newest rows, the next load takes the state from the table's recent commits and
stores it again with its own state row. Where no recent commit carries it either, but `_dlt_loads` shows
that the table was loaded incrementally before, the load is refused instead of loading those rows again.
"""

from __future__ import annotations

import logging
import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import Incremental, StoreError, run_load
from airflow_provider_deltamerge.delta import store
from tests.helpers import read_rows

pytestmark = pytest.mark.spark

TABLE = "events"
PIPELINE = "cursor"
INCREMENTAL = Incremental("id", initial_value=0)


def load_up_to(spark, dataset: str, last_id: int):
    """The source holds ids 1..last_id; the cursor decides which of them are new."""
    return run_load(
        [{"id": n, "name": f"row {n}"} for n in range(1, last_id + 1)],
        spark=spark,
        dataset=dataset,
        table_name=TABLE,
        pipeline_name=PIPELINE,
        incremental=INCREMENTAL,
    )


def loaded_ids(dataset: str) -> list[int]:
    return [r["id"] for r in read_rows(f"{dataset}/{TABLE}", order_by=["id"])]


def state_path(dataset: str) -> str:
    return f"{dataset}/{store.STATE_TABLE}"


def last_value(dataset: str):
    return store.latest_state(dataset, PIPELINE, TABLE)["incremental"]["id"]["last_value"]


def state_row_load_ids(dataset: str) -> list[str]:
    return [r["_dlt_load_id"] for r in DeltaTable(state_path(dataset)).to_pyarrow_table().to_pylist()]


def delete_table(path: str) -> None:
    shutil.rmtree(path)


def empty_table(path: str) -> None:
    DeltaTable(path).delete()


@pytest.mark.parametrize("lose_state", [delete_table, empty_table], ids=["deleted", "emptied"])
def test_a_lost_state_table_is_rebuilt_from_the_commits(spark, dataset, caplog, lose_state):
    load_up_to(spark, dataset, 5)
    lose_state(state_path(dataset))
    assert store.latest_state(dataset, PIPELINE, TABLE) is None

    with caplog.at_level(logging.WARNING, logger=store.__name__):
        info = load_up_to(spark, dataset, 8)

    assert loaded_ids(dataset) == list(range(1, 9))  # 1..5 once: only 6..8 were new
    assert info.metrics["numTargetRowsInserted"] == 3
    assert "rebuilt it from commit 0" in caplog.text
    assert last_value(dataset) == 8
    assert state_row_load_ids(dataset) == [info.load_id]  # the load stored the state again


def test_a_state_table_missing_its_newest_rows_is_brought_up_to_date(spark, dataset, caplog):
    load_up_to(spark, dataset, 5)
    load_up_to(spark, dataset, 8)
    DeltaTable(state_path(dataset)).restore(0)  # back to the first load's state: last value 5
    assert last_value(dataset) == 5

    with caplog.at_level(logging.WARNING, logger=store.__name__):
        info = load_up_to(spark, dataset, 10)

    assert loaded_ids(dataset) == list(range(1, 11))  # 6..8 once: only 9 and 10 were new
    assert info.metrics["numTargetRowsInserted"] == 2
    assert "rebuilt it from commit 1" in caplog.text
    assert last_value(dataset) == 10


def test_a_lost_state_no_recent_commit_carries_is_refused(spark, dataset):
    load_up_to(spark, dataset, 5)
    table = DeltaTable(f"{dataset}/{TABLE}")
    empty = pa.schema(table.schema().to_arrow()).empty_table()
    for _ in range(store.HISTORY_DEPTH):  # another tool's commits push the load's out of reach
        write_deltalake(table, empty, mode="append")
    version = DeltaTable(f"{dataset}/{TABLE}").version()
    delete_table(state_path(dataset))

    with pytest.raises(StoreError) as refused:
        load_up_to(spark, dataset, 8)

    message = str(refused.value)
    assert refused.value.path == state_path(dataset)
    assert f"table {TABLE!r} of pipeline {PIPELINE!r}" in message
    assert "initial_value" in message and "_dlt_loads" in message
    assert loaded_ids(dataset) == list(range(1, 6))
    assert DeltaTable(f"{dataset}/{TABLE}").version() == version  # nothing committed


def test_the_first_incremental_load_of_a_table_loaded_without_a_cursor_starts_from_initial_value(
    spark, dataset
):
    plain = run_load(
        [{"id": 0, "name": "row 0"}], spark=spark, dataset=dataset, table_name=TABLE, pipeline_name=PIPELINE
    )
    assert plain.loaded and plain.window is None

    info = load_up_to(spark, dataset, 3)

    assert info.metrics["numTargetRowsInserted"] == 3
    assert loaded_ids(dataset) == [0, 1, 2, 3]
    assert last_value(dataset) == 3
