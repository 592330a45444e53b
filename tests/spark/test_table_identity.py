"""A table dropped and recreated under its name (or deleted) is told from the one its recorded loads
wrote by its own log: the commit at the version the newest recorded load wrote is that load's. An
incremental load is then refused before anything is written, saying how to start again; a MERGE that
evolves the schema (delta-rs 1.6 writes a new Delta id for it) is the same table."""

from __future__ import annotations

import logging
import pickle
import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import Incremental, run_load
from airflow_provider_deltamerge.delta import store
from airflow_provider_deltamerge.errors import TableRecreatedError

pytestmark = pytest.mark.spark

IDENTITY_LOG = "airflow_provider_deltamerge.load.table_identity"


def load(spark, dataset, rows, **arguments):
    cursor = Incremental("n", initial_value=0)
    return run_load(rows, spark=spark, dataset=dataset, table_name="events", incremental=cursor, **arguments)


def recreate(dataset: str, commits: int) -> None:
    """The table dropped, and another created under its name with `commits` commits no load made."""
    shutil.rmtree(f"{dataset}/events")
    for n in range(commits):
        write_deltalake(f"{dataset}/events", pa.table({"n": pa.array([100 + n], pa.int64())}), mode="append")


def identity_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == IDENTITY_LOG]


def test_each_load_records_the_delta_id_of_the_table_it_wrote(spark, dataset):
    first = load(spark, dataset, [{"n": 1}])
    second = load(spark, dataset, [{"n": 2}])
    table_id = DeltaTable(f"{dataset}/events").metadata().id
    assert first.metrics["table_id"] == second.metrics["table_id"] == table_id
    recorded = store.read_loads(dataset, "deltamerge", "events")
    assert [r["metrics"]["table_id"] for r in recorded] == [table_id, table_id]


@pytest.mark.parametrize("commits", [1, 4], ids=["fewer-versions", "more-versions"])
def test_a_recreated_table_refuses_the_old_tables_cursor_state_until_its_records_are_deleted(
    spark, dataset, commits
):
    load(spark, dataset, [{"n": 1}, {"n": 5}])
    load(spark, dataset, [{"n": 7}])  # the newest recorded load wrote version 1
    recreate(dataset, commits)  # its newest version is older than 1, or its version 1 is another's
    version = DeltaTable(f"{dataset}/events").version()
    with pytest.raises(TableRecreatedError) as refused:
        load(spark, dataset, [{"n": 2}, {"n": 6}])
    message = str(refused.value)
    assert "table 'events' is not the table the recorded loads of pipeline 'deltamerge' wrote" in message
    reason = "older than version 1" if commits == 1 else "its version 1 is not the commit of load"
    assert reason in message and "nothing was written" in message
    assert "DELETE FROM _dlt_pipeline_state WHERE pipeline_name = 'deltamerge' AND table_name = 'events'" in (
        message
    )
    assert "another pipeline_name" in message
    assert DeltaTable(f"{dataset}/events").version() == version  # nothing committed
    assert pickle.loads(pickle.dumps(refused.value)).reason == refused.value.reason

    for table, column in ((store.STATE_TABLE, "pipeline_name"), (store.LOADS_TABLE, "schema_name")):
        DeltaTable(f"{dataset}/{table}").delete(f"{column} = 'deltamerge' AND table_name = 'events'")
    again = load(spark, dataset, [{"n": 2}, {"n": 6}])  # as the message says: from initial_value
    assert again.metrics["rows_staged"] == 2
    fresh = load(spark, dataset, [{"n": 3}], pipeline_name="fresh")  # the other way it names
    assert fresh.metrics["rows_staged"] == 1


def test_a_deleted_table_refuses_an_incremental_load_and_says_so_for_any_other(spark, dataset, caplog):
    load(spark, dataset, [{"n": 1}])
    shutil.rmtree(f"{dataset}/events")
    with pytest.raises(TableRecreatedError, match="there is no table there now"):
        load(spark, dataset, [{"n": 2}])
    assert not DeltaTable.is_deltatable(f"{dataset}/events")
    with caplog.at_level(logging.WARNING, logger=IDENTITY_LOG):
        replaced = load(spark, dataset, [{"n": 2}], write_disposition="replace")  # no stored cursor used
    assert replaced.metrics["rows_staged"] == 1
    (warning,) = identity_warnings(caplog)
    assert "is not the table its recorded loads wrote (there is no table there now)" in warning


def test_a_merge_that_evolves_the_schema_is_the_same_table(spark, dataset, each_writer, caplog):
    merged = {"write_disposition": "merge", "primary_key": "id"}
    load(spark, dataset, [{"id": 1, "n": 1}], **merged)
    adding = [{"id": 1, "n": 2, "extra": "x"}, {"id": 2, "n": 3, "extra": "y"}]
    evolved = load(spark, dataset, adding, **merged)  # delta-rs 1.6 writes a new Delta id here
    with caplog.at_level(logging.WARNING, logger=IDENTITY_LOG):
        after = load(spark, dataset, [{"id": 3, "n": 4, "extra": "z"}], **merged)
    assert identity_warnings(caplog) == []
    assert after.metrics["rows_staged"] == 1
    assert evolved.metrics["rows_staged"] == 2
    rows = DeltaTable(f"{dataset}/events").to_pyarrow_table(columns=["id", "n", "extra"]).to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [
        {"id": 1, "n": 2, "extra": "x"},
        {"id": 2, "n": 3, "extra": "y"},
        {"id": 3, "n": 4, "extra": "z"},
    ]
