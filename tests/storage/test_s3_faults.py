"""S3 failing a load's writes, injected on the loopback path to moto by a proxy (fault_proxy.py): the
connection reset, or `503 SlowDown`, on a data file's PUT and on the commit's PUT of the load's table,
and on the commit of its load record. The store client retries (here once) and gives up; the load then
fails with a StoreError naming the table, no secret in the message or the log, and nothing committed
(or, for the record, the batch committed and its record left to the retry). The retry of the same run,
the fault gone, completes the load exactly once."""

from __future__ import annotations

import itertools
import logging

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import LoadNotRecordedError, StoreError
from airflow_provider_deltamerge.delta import store

from .fault_proxy import RESET, SLOWDOWN, start_fault_proxy
from .servers import free_port, stop, wait_for_port
from .test_loads import TABLE
from .test_loads import load as load_into_store

pytestmark = pytest.mark.spark

_buckets = itertools.count()
DATA_FILE = rf"/shop/{TABLE}/part-[^/]*\.parquet$"
COMMIT = rf"/shop/{TABLE}/_delta_log/0*1\.json$"  # the second commit: the load after the first
RECORD = r"/shop/_dlt_loads/_delta_log/0*1\.json$"  # the second load's record


@pytest.fixture(scope="module")
def proxy(s3_server):
    port = free_port()
    process, control = start_fault_proxy(s3_server.endpoint, port)
    try:
        wait_for_port(port, process)
        yield control
    finally:
        stop(process)


@pytest.fixture
def lake(s3_server, proxy):
    """(dataset, storage options) reaching moto through the proxy, its rules cleared; the store client
    retries a failed request once, after a short pause, so a fault that holds fails the write quickly."""
    proxy.clear()
    dataset = s3_server.create_bucket(f"faults-{next(_buckets)}") + "/shop"
    options = {
        **s3_server.storage_options(),
        "AWS_ENDPOINT_URL": proxy.endpoint,
        "max_retries": "1",
        "retry_timeout": "5s",
        "backoff_config.init_backoff": "50ms",
    }
    yield dataset, options
    proxy.clear()


def orders(ids, status):
    return [{"id": n, "status": status} for n in ids]


def load(spark, lake, rows, run_id="manual__2", try_number=1):
    """An upsert of `rows` as an attempt of an Airflow task run."""
    return load_into_store(
        spark,
        lake,
        rows,
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key="id",
        run_context={"dag_id": "shop", "task_id": "orders", "run_id": run_id, "try_number": try_number},
    )


def table_state(lake) -> tuple[int, list[tuple]]:
    dataset, options = lake
    table = DeltaTable(f"{dataset}/{TABLE}", storage_options=options)
    rows = sorted((r["id"], r["status"]) for r in table.to_pyarrow_table().to_pylist())
    return table.version(), rows


def records(lake) -> list[str]:
    dataset, options = lake
    return sorted(r["load_id"] for r in store.read_loads(dataset, storage_options=options))


@pytest.mark.parametrize("kind", [RESET, SLOWDOWN])
@pytest.mark.parametrize("where", ["data file", "commit"])
def test_a_failed_put_of_the_table_is_a_store_error_and_the_retry_loads_once(
    spark, lake, proxy, caplog, kind, where
):
    dataset, options = lake
    first = load(spark, lake, orders([1, 2], "new"), run_id="manual__1")
    before = table_state(lake)

    proxy.fail("PUT", DATA_FILE if where == "data file" else COMMIT, kind)
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreError) as failed:
        load(spark, lake, orders([2, 3], "paid"))
    assert proxy.failed(), "the fault never met a request"
    message = str(failed.value)
    assert failed.value.path == f"{dataset}/{TABLE}"
    assert "could not be written to its object store" in message and "Retry the load" in message
    secret = options["AWS_SECRET_ACCESS_KEY"]
    assert secret not in message and secret not in repr(failed.value) and secret not in caplog.text
    assert type(failed.value) is StoreError  # nothing committed: not a load waiting for its record
    assert table_state(lake) == before and records(lake) == [first.load_id]

    proxy.clear()
    retried = load(spark, lake, orders([2, 3], "paid"), try_number=2)
    assert table_state(lake) == (1, [(1, "new"), (2, "paid"), (3, "paid")])
    assert retried.metrics["numTargetRowsUpdated"] == 1 and retried.metrics["numTargetRowsInserted"] == 1
    assert records(lake) == sorted([first.load_id, retried.load_id])


@pytest.mark.parametrize("kind", [RESET, SLOWDOWN])
def test_a_failed_put_of_the_load_record_leaves_the_batch_to_the_retry(spark, lake, proxy, caplog, kind):
    """The table's commit landed; its record's commit did not: LoadNotRecordedError (a StoreError) says
    so, and the retry records it from the commit instead of loading it again."""
    dataset, options = lake
    first = load(spark, lake, orders([1, 2], "new"), run_id="manual__1")

    proxy.fail("PUT", RECORD, kind)
    with caplog.at_level(logging.DEBUG), pytest.raises(LoadNotRecordedError) as failed:
        load(spark, lake, orders([2, 3], "paid"))
    message = str(failed.value)
    secret = options["AWS_SECRET_ACCESS_KEY"]
    assert "_dlt_loads" in message and f"{dataset}/{TABLE}" in message
    assert "could not be written to its object store" in message
    assert secret not in message and secret not in caplog.text
    assert table_state(lake) == (1, [(1, "new"), (2, "paid"), (3, "paid")])

    proxy.clear()
    retried = load(spark, lake, orders([2, 3], "paid"), try_number=2)
    assert retried.load_id == failed.value.load_id and retried.table_version == 1
    assert table_state(lake) == (1, [(1, "new"), (2, "paid"), (3, "paid")])
    assert records(lake) == sorted([first.load_id, failed.value.load_id])
