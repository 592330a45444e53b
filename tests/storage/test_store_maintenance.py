"""maintain_table on moto's S3: a store that refuses it is a StoreError without secrets, as for run_load,
and two maintenance runs of one table at once keep every row once there too."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import StoreError
from airflow_provider_deltamerge.delta.maintenance import maintain_table

from .servers import free_port

pytestmark = pytest.mark.spark

SECRET = "bm90LXRoZS1yZWFsLXNlY3JldC1hdC1hbGw="


@pytest.fixture
def table(s3_dataset, s3_server):
    """`events` in a fresh bucket: ten appends of two rows; (dataset, storage options, table path)."""
    options = s3_server.storage_options()
    path = f"{s3_dataset}/events"
    for n in range(10):
        write_deltalake(path, pa.table({"id": [2 * n, 2 * n + 1]}), mode="append", storage_options=options)
    return s3_dataset, options, path


def refused(dataset, options) -> str:
    with pytest.raises(StoreError) as error:
        maintain_table(dataset, "events", vacuum=True, checkpoint=True, storage_options=options)
    message = str(error.value)
    assert "could not be read from its object store" in message and "maintenance stopped" in message
    return message + repr(error.value)


def test_a_wrong_secret_is_a_store_error_without_it(table):
    dataset, options, _ = table
    message = refused(dataset, {**options, "AWS_SECRET_ACCESS_KEY": SECRET})
    assert SECRET not in message and dataset in message


def test_a_missing_bucket_is_a_store_error(table):
    _, options, _ = table
    refused("s3://no-such-bucket/shop", options)


@pytest.mark.parametrize("live", [True, False], ids=["live-endpoint", "dead-endpoint"])
def test_an_endpoint_url_holding_a_password_is_masked(table, live):
    dataset, options, _ = table
    endpoint = options["AWS_ENDPOINT_URL"] if live else f"http://127.0.0.1:{free_port()}"
    with_password = endpoint.replace("http://", f"http://admin:{SECRET}@")
    message = refused(
        dataset,
        {
            **options,
            "AWS_SECRET_ACCESS_KEY": "wrong-key-of-the-test" if live else options["AWS_SECRET_ACCESS_KEY"],
            "AWS_ENDPOINT_URL": with_password,
            "max_retries": "0",
        },
    )
    assert SECRET not in message


def test_two_optimizes_at_once_keep_every_row_once_on_s3(table):
    dataset, options, path = table
    start = threading.Barrier(2)

    def run():
        start.wait()
        return maintain_table(dataset, "events", storage_options=options)

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [f.result() for f in [pool.submit(run) for _ in range(2)]]
    ids = DeltaTable(path, storage_options=options).to_pyarrow_table().column("id").to_pylist()
    assert sorted(ids) == list(range(20))
    assert sum(r["numRemovedFiles"] for r in runs) == 10
