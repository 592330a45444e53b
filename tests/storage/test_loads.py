"""Loads with the delta-rs writer into datasets on S3 (moto) and Azure Blob (Azurite), from local rows:
append, an upsert merge, an incremental load's cursor state, and the state tables read back from the
store; a wrong credential refused before anything is committed, its error naming the dataset and
showing no secret."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import ConfigError, Incremental, StoreError, run_load
from airflow_provider_deltamerge.delta import store
from airflow_provider_deltamerge.delta.child_tables import existing_child_tables

pytestmark = pytest.mark.spark

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
TABLE = "orders"


@pytest.fixture(params=["s3", "azure"])
def lake(request):
    """(dataset, storage options) on one object store; each test gets a fresh bucket or container."""
    if request.param == "s3":
        return request.getfixturevalue("s3_dataset"), request.getfixturevalue("s3_server").storage_options()
    return request.getfixturevalue("azure_dataset"), request.getfixturevalue("azure_server").storage_options()


def orders(ids, status="new"):
    return [{"id": n, "status": status, "at": T0 + timedelta(hours=n)} for n in ids]


def load(spark, lake, rows, **arguments):
    dataset, options = lake
    return run_load(
        rows,
        spark=spark,
        dataset=dataset,
        table_name=TABLE,
        pipeline_name="shop",
        backend="delta-rs",
        storage_options=options,
        **arguments,
    )


def table_rows(lake) -> list[dict]:
    dataset, options = lake
    table = DeltaTable(f"{dataset}/{TABLE}", storage_options=options)
    return sorted(
        ({"id": r["id"], "status": r["status"]} for r in table.to_pyarrow_table().to_pylist()),
        key=lambda r: r["id"],
    )


def test_append_then_upsert_lands_in_the_store_and_is_recorded(spark, lake):
    dataset, options = lake
    first = load(spark, lake, orders(range(3)))
    second = load(
        spark,
        lake,
        orders([1, 2, 3], status="paid"),
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key="id",
    )

    assert table_rows(lake) == [
        {"id": 0, "status": "new"},
        {"id": 1, "status": "paid"},
        {"id": 2, "status": "paid"},
        {"id": 3, "status": "paid"},
    ]
    assert (first.table_version, second.table_version) == (0, 1)
    assert second.metrics["numTargetRowsUpdated"] == 2
    assert second.metrics["numTargetRowsInserted"] == 1
    records = store.read_loads(dataset, storage_options=options)
    assert [(r["load_id"], r["table_version"]) for r in records] == [
        (first.load_id, 0),
        (second.load_id, 1),
    ]
    commits = store.read_commits(f"{dataset}/{TABLE}", storage_options=options)
    assert [c.load_id for c in commits] == [second.load_id, first.load_id]


def test_incremental_state_is_kept_in_the_store(spark, lake):
    dataset, options = lake
    merge = {"write_disposition": "merge", "primary_key": "id", "incremental": Incremental("at")}
    load(spark, lake, orders(range(4)), **merge)
    again = load(spark, lake, orders(range(6)), **merge)  # rows 0..3 are at or before the cursor

    assert again.metrics["rows_staged"] == 2
    assert [r["id"] for r in table_rows(lake)] == list(range(6))
    state = store.latest_state(dataset, "shop", TABLE, storage_options=options)
    assert state["incremental"]["at"]["last_value"].startswith("2024-05-01T05:00:00")


def test_a_merge_processes_the_child_tables_already_in_the_store(spark, lake):
    """WD-7 on an object store: the second batch has no `items` column, and the order it updates still
    loses its items, because the child table is found by listing the store with the dataset's options."""
    dataset, options = lake
    upsert = {"write_disposition": {"disposition": "merge", "strategy": "upsert"}, "primary_key": "id"}
    first = [
        {**orders([1])[0], "items": [{"sku": "a"}, {"sku": "b"}]},
        {**orders([2])[0], "items": [{"sku": "c"}]},
    ]
    load(spark, lake, first, **upsert)
    info = load(spark, lake, orders([1], "paid"), **upsert)

    items = DeltaTable(f"{dataset}/{TABLE}__items", storage_options=options).to_pyarrow_table()
    assert sorted(items["sku"].to_pylist()) == ["c"]
    assert info.metrics["tables"][f"{TABLE}__items"]["numTargetRowsDeleted"] == 2
    assert table_rows(lake) == [{"id": 1, "status": "paid"}, {"id": 2, "status": "new"}]


def test_a_store_that_cannot_be_listed_is_refused_without_the_secret(lake):
    dataset, options = lake
    secret = "AWS_SECRET_ACCESS_KEY" if "AWS_SECRET_ACCESS_KEY" in options else "azure_storage_account_key"
    wrong = "d3JvbmctYnV0LWxvbmctZW5vdWdoLXRvLWxvb2stcmVhbA=="
    with pytest.raises(StoreError) as refused:
        existing_child_tables(dataset, TABLE, {**options, secret: wrong})
    message = str(refused.value)
    assert dataset in message and "could not be read from its object store" in message
    assert wrong not in message and wrong not in repr(refused.value)


def test_a_wrong_credential_is_refused_naming_the_dataset_without_the_secret(spark, lake):
    dataset, options = lake
    secret = "AWS_SECRET_ACCESS_KEY" if "AWS_SECRET_ACCESS_KEY" in options else "azure_storage_account_key"
    wrong = "d3Jvbmcta2V5LWZvci10aGUtdGVzdA=="  # base64 of "wrong-key-for-the-test"
    with pytest.raises(StoreError) as refused:
        run_load(
            orders(range(2)),
            spark=spark,
            dataset=dataset,
            table_name=TABLE,
            backend="delta-rs",
            storage_options={**options, secret: wrong},
        )
    message = str(refused.value)
    assert dataset in message
    assert "could not be read from its object store" in message and "credentials" in message
    assert wrong not in message and wrong not in repr(refused.value)
    assert not DeltaTable.is_deltatable(f"{dataset}/{TABLE}", storage_options=options)


def test_without_storage_options_the_environment_credentials_apply(spark, s3_dataset, s3_server, monkeypatch):
    for name, value in s3_server.storage_options().items():
        monkeypatch.setenv(name, value)
    info = run_load(orders(range(2)), spark=spark, dataset=s3_dataset, table_name=TABLE, backend="delta-rs")

    assert info.table_version == 0
    assert [r["load_id"] for r in store.read_loads(s3_dataset)] == [info.load_id]


def test_the_session_gets_the_same_credentials_as_hadoop_settings(spark, azure_dataset, azure_server, caplog):
    """For Spark's own reads of the store (sources, the delta-spark writer) on a cluster with
    hadoop-azure; the value is set, never logged."""
    options = azure_server.storage_options()
    caplog.set_level("DEBUG")
    run_load(orders(range(1)), spark=spark, dataset=azure_dataset, table_name=TABLE, storage_options=options)

    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    key = "fs.azure.account.key.devstoreaccount1.dfs.core.windows.net"
    assert hadoop.get(key) == options["azure_storage_account_key"]
    assert key in caplog.text and options["azure_storage_account_key"] not in caplog.text


def test_a_table_in_the_store_is_checkpointed_every_ten_commits(lake, caplog):
    """delta/checkpoints.py on an object store: the checkpoint is written there, and the table reads."""
    import logging

    import pyarrow as pa
    from deltalake import write_deltalake

    from airflow_provider_deltamerge.delta import checkpoints

    dataset, options = lake
    path = f"{dataset}/counted"
    for n in range(11):
        write_deltalake(path, pa.table({"id": [n]}), mode="append", storage_options=options)
    table = DeltaTable(path, storage_options=options)
    with caplog.at_level(logging.INFO, logger=checkpoints.__name__):
        checkpoints.after_commits(table, 9)
    assert "at version 10" in caplog.text and "no checkpoint" not in caplog.text
    read = DeltaTable(path, storage_options=options).to_pyarrow_table()
    assert sorted(read.column("id").to_pylist()) == list(range(11))


@pytest.fixture
def delta_classes(spark):
    from airflow_provider_deltamerge.delta.delta_spark_status import delta_spark_status

    available, why = delta_spark_status(spark)
    if not available:
        pytest.skip(f"needs Delta's jars in the session (DELTA_SPARK_JARS); now {why}")


def test_auto_loads_with_delta_rs_where_spark_has_no_file_system_for_the_store(
    spark, lake, delta_classes, monkeypatch
):
    """Delta's classes load, but pyspark alone has no hadoop-aws or hadoop-azure: "auto" must not hand
    the table to delta-spark, even with the size threshold at 0 (delta-spark wherever it is available)."""
    monkeypatch.setenv("DELTAMERGE_AUTO_DELTA_RS_MAX_MB", "0")
    dataset, options = lake
    info = run_load(orders(range(2)), spark=spark, dataset=dataset, table_name=TABLE, storage_options=options)

    assert info.metrics["writer"] == "delta-rs"
    assert table_rows(lake) == [{"id": 0, "status": "new"}, {"id": 1, "status": "new"}]


def test_delta_spark_where_spark_has_no_file_system_for_the_store_is_refused_before_anything(
    spark, lake, delta_classes
):
    dataset, options = lake
    with pytest.raises(ConfigError) as refused:
        run_load(
            orders(range(2)),
            spark=spark,
            dataset=dataset,
            table_name=TABLE,
            backend="delta-spark",
            storage_options=options,
        )
    message = str(refused.value)
    assert refused.value.argument == "backend" and "no file system for" in message
    assert "backend='delta-rs'" in message
    assert not any(secret in message for secret in options.values() if len(secret) > 12)
    assert not DeltaTable.is_deltatable(f"{dataset}/{TABLE}", storage_options=options)
    assert store.read_loads(dataset, storage_options=options) == []
