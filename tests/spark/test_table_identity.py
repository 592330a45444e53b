"""A table's Delta id recorded with each load: a table deleted or recreated under its name is said in
the task log, with the way to load it from its initial value."""

from __future__ import annotations

import logging
import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import Incremental, run_load
from airflow_provider_deltamerge.delta import store

pytestmark = pytest.mark.spark


def load(spark, dataset, rows, **arguments):
    cursor = Incremental("n", initial_value=0)
    return run_load(rows, spark=spark, dataset=dataset, table_name="events", incremental=cursor, **arguments)


def test_each_load_records_the_delta_id_of_the_table_it_wrote(spark, dataset):
    first = load(spark, dataset, [{"n": 1}])
    second = load(spark, dataset, [{"n": 2}])
    table_id = DeltaTable(f"{dataset}/events").metadata().id
    assert first.metrics["table_id"] == second.metrics["table_id"] == table_id
    recorded = store.read_loads(dataset, "deltamerge", "events")
    assert [r["metrics"]["table_id"] for r in recorded] == [table_id, table_id]


def test_a_recreated_table_is_said_in_the_log_before_the_old_tables_cursor_state_is_used(
    spark, dataset, caplog
):
    load(spark, dataset, [{"n": 1}, {"n": 5}])
    shutil.rmtree(f"{dataset}/events")  # dropped, and created again under its name
    write_deltalake(f"{dataset}/events", pa.table({"n": pa.array([], pa.int64())}))
    with caplog.at_level(logging.WARNING, logger="airflow_provider_deltamerge.load.table_identity"):
        info = load(spark, dataset, [{"n": 2}, {"n": 6}])
    (warning,) = [r.getMessage() for r in caplog.records if "recorded loads wrote" in r.getMessage()]
    assert "is not the table its recorded loads wrote" in warning and "another pipeline_name" in warning
    assert info.metrics["rows_staged"] == 1  # from the old table's cursor (5): only n=6, as the log says
    again = load(spark, dataset, [{"n": 2}, {"n": 6}], pipeline_name="fresh")  # the way on it names
    assert again.metrics["rows_staged"] == 2


def test_a_deleted_table_is_noticed_too(spark, dataset, caplog):
    load(spark, dataset, [{"n": 1}])
    shutil.rmtree(f"{dataset}/events")
    with caplog.at_level(logging.WARNING, logger="airflow_provider_deltamerge.load.table_identity"):
        load(spark, dataset, [{"n": 2}])
    assert any("no table at all now" in r.getMessage() for r in caplog.records)
