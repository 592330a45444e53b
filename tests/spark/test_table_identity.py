"""A table's Delta id recorded with each load: a table deleted or recreated under its name is noticed,
and the cursor state stored for the old one is not taken for it."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import Incremental, run_load
from airflow_provider_deltamerge.delta import store
from airflow_provider_deltamerge.errors import StoreError
from tests.helpers import table_version

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


def test_a_recreated_table_is_not_loaded_from_the_old_tables_cursor_state(spark, dataset):
    load(spark, dataset, [{"n": 1}, {"n": 5}])
    shutil.rmtree(f"{dataset}/events")  # dropped, and created again under its name
    write_deltalake(f"{dataset}/events", pa.table({"n": pa.array([], pa.int64())}))
    with pytest.raises(StoreError) as refused:
        load(spark, dataset, [{"n": 2}, {"n": 6}])
    message = str(refused.value)
    assert "is not the table its recorded loads wrote" in message and "nothing was loaded" in message
    assert "another pipeline_name" in message
    assert table_version(f"{dataset}/events") == 0
    again = load(spark, dataset, [{"n": 2}, {"n": 6}], pipeline_name="fresh")  # the way on it names
    assert again.metrics["rows_staged"] == 2


def test_a_deleted_table_is_noticed_too(spark, dataset):
    load(spark, dataset, [{"n": 1}])
    shutil.rmtree(f"{dataset}/events")
    with pytest.raises(StoreError, match="no table at all now"):
        load(spark, dataset, [{"n": 2}])
    assert not DeltaTable.is_deltatable(f"{dataset}/events")
