"""Two loads committing to one S3 table at the same moment both land, exactly once each: S3's
conditional put lets only one writer create each commit file, and the other plans again on the new
version. Once while the table is created, once on the existing table; each time both loads have planned
their commit on the same version before either commits, so that one of them must lose."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import load, run_load
from airflow_provider_deltamerge.delta import store

pytestmark = pytest.mark.spark

TABLE = "events"
WAIT_SECONDS = 120  # a bound on waiting for the other thread, so that a broken test fails, not hangs


@pytest.fixture
def commit_together(monkeypatch):
    """Each load's first commit waits until the other load is about to commit too: both planned on the
    same version, so one commit file is put by both (a load whose wait times out fails the test). The
    loser plans again, in delta-rs (an append) or in the load; either way it goes on without waiting."""
    together = threading.Barrier(2, timeout=WAIT_SECONDS)
    waited = threading.local()

    def checkpoint(step):
        if step == "commit" and not getattr(waited, "done", False):
            waited.done = True
            together.wait()

    monkeypatch.setattr(load, "checkpoint", checkpoint)
    return together


def concurrent_appends(spark, dataset: str, options: dict, batches: list[list[dict]]) -> list:
    """One run_load per batch, each in its own thread."""

    def append(rows):
        return run_load(
            rows,
            spark=spark,
            dataset=dataset,
            table_name=TABLE,
            pipeline_name="concurrent",
            backend="delta-rs",
            storage_options=options,
        )

    with ThreadPoolExecutor(len(batches)) as pool:
        return [f.result(timeout=WAIT_SECONDS * 3) for f in [pool.submit(append, b) for b in batches]]


def test_two_loads_at_once_into_one_s3_table_land_exactly_once_each(
    spark, s3_dataset, s3_server, commit_together
):
    options = s3_server.storage_options()
    batches = [[{"id": n, "batch": b} for n in range(b * 10, b * 10 + 3)] for b in range(4)]
    infos = concurrent_appends(spark, s3_dataset, options, batches[:2])  # both create the table
    infos += concurrent_appends(spark, s3_dataset, options, batches[2:])  # both append to it

    load_ids = [info.load_id for info in infos]
    assert len(set(load_ids)) == 4
    table = DeltaTable(f"{s3_dataset}/{TABLE}", storage_options=options)
    rows = table.to_pyarrow_table(columns=["id", "_dlt_load_id"]).to_pylist()
    assert sorted(r["id"] for r in rows) == sorted(row["id"] for batch in batches for row in batch)
    assert Counter(r["_dlt_load_id"] for r in rows) == Counter({load_id: 3 for load_id in load_ids})

    commits = store.read_commits(f"{s3_dataset}/{TABLE}", storage_options=options)
    assert Counter(c.load_id for c in commits) == Counter(load_ids)
    assert table.version() == 3
    records = store.read_loads(s3_dataset, storage_options=options)
    assert Counter(r["load_id"] for r in records) == Counter(load_ids)
    assert {r["load_id"]: r["table_version"] for r in records} == {c.load_id: c.version for c in commits}
