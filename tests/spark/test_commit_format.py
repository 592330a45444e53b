"""Both writers record a load's metadata in one format, and one reader reads it: a table loaded by either
writer, or by both in turn (a local worker without Delta's jars and a cluster with them, backend "auto"
both times), keeps every load exactly once.

The delta-spark writer runs where the session has Delta's jars. Everywhere, `DeltaSparkShaped` stands in
for it: it commits with delta-rs what the delta-spark writer commits (the metadata only as the JSON its
write options carry in `userMetadata`, the txn from its txn options) and reads the history as it does,
through the columns Delta's own history() has. `EarlierDeltaRs` commits as the delta-rs writer of
earlier releases did, with the metadata as top-level commitInfo keys.
"""

from __future__ import annotations

import importlib.metadata
import json
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import TableNotFoundError

from airflow_provider_deltamerge import load, run_load
from airflow_provider_deltamerge.delta import store
from airflow_provider_deltamerge.delta.delta_rs import DeltaRsWriter, spark_to_arrow
from airflow_provider_deltamerge.delta.delta_spark import HISTORY_COLUMNS, DeltaSparkWriter
from airflow_provider_deltamerge.delta.delta_spark_status import delta_spark_status
from airflow_provider_deltamerge.delta.spark_sql import write_options
from airflow_provider_deltamerge.delta.writer import (
    METADATA_PREFIX,
    CommitRequest,
    CommitResult,
    logged_commit,
    write_commit_metrics,
)
from airflow_provider_deltamerge.load import batch_writer
from airflow_provider_deltamerge.model.run import RunContext, app_id, txn_version
from airflow_provider_deltamerge.plan.merge import MergePlan, Operation
from tests.faults import InjectedFault

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

UTC = timezone.utc
TABLE = "events"
START = datetime(2024, 1, 1, tzinfo=UTC)
EVENTS = [{"id": n, "ts": START + timedelta(hours=12 * n)} for n in range(56)]  # 14 a week, four weeks


def append_with(path: str, source, plan: MergePlan, request, metadata: dict) -> CommitResult:
    """Append the source with this commitInfo metadata and the txn the delta-spark writer's options give."""
    options = write_options(plan, request)
    txn = Transaction(options["txnAppId"], int(options["txnVersion"]))
    properties = CommitProperties(custom_metadata=metadata, app_transactions=[txn])
    data = source if isinstance(source, pa.Table) else spark_to_arrow(source)
    write_deltalake(path, data, mode="append", schema_mode="merge", commit_properties=properties)
    (entry,) = DeltaTable(path).history(1)
    return CommitResult(int(entry["version"]), write_commit_metrics(entry))


class DeltaSparkShaped(DeltaRsWriter):
    """The delta-spark writer's commits (appends only) and its reading of the history, made with delta-rs."""

    name = "delta-spark"
    takes_arrow = False  # as the delta-spark writer: it commits the DataFrame

    def commit(self, spark, path, snapshot, plan, source, request) -> CommitResult:
        assert plan.operation is Operation.WRITE, "the stand-in makes appends only"
        user_metadata = write_options(plan, request)["userMetadata"]
        return append_with(path, source, plan, request, {"userMetadata": user_metadata})

    def history(self, path, limit=None):
        try:
            entries = DeltaTable(path).history(limit)
        except TableNotFoundError:
            return []
        return [logged_commit({c: e.get(c) for c in HISTORY_COLUMNS}) for e in entries]


class EarlierDeltaRs(DeltaRsWriter):
    """The delta-rs writer of earlier releases: the metadata as top-level commitInfo keys (appends only)."""

    def commit(self, spark, path, snapshot, plan, source, request) -> CommitResult:
        assert plan.operation is Operation.WRITE, "the stand-in makes appends only"
        if tuple(int(p) for p in importlib.metadata.version("deltalake").split(".")[:2]) < (1, 6):
            pytest.skip(
                "deltalake before 1.6 cannot write nested top-level commit metadata; the releases "
                "that wrote this format pinned deltalake 1.6"
            )
        top_level = {METADATA_PREFIX + k: v for k, v in request.metadata.items()}
        return append_with(path, source, plan, request, top_level)


def delta_spark_writer(spark) -> DeltaSparkWriter:
    available, why = delta_spark_status(spark)
    if not available:
        pytest.skip(f"the delta-spark writer itself: {why}; its stand-in runs here instead")
    return DeltaSparkWriter(spark)


@pytest.fixture(params=["delta-spark", "delta-spark-shaped"])
def spark_writer(request, spark):
    """The delta-spark writer where Delta's jars are in the session; its stand-in everywhere."""
    return delta_spark_writer(spark) if request.param == "delta-spark" else DeltaSparkShaped()


@pytest.fixture(params=["delta-spark", "delta-spark-shaped", "earlier-delta-rs"])
def committed_by(request, spark):
    """A writer whose commits the delta-rs writer must recognise: the delta-spark writer (or its stand-in),
    or the delta-rs writer of earlier releases."""
    if request.param == "earlier-delta-rs":
        return EarlierDeltaRs()
    return delta_spark_writer(spark) if request.param == "delta-spark" else DeltaSparkShaped()


@pytest.fixture
def use_writer(monkeypatch):
    """use_writer(w): the loads that follow commit with writer w, whatever backend they ask for."""

    def use(writer):
        for module in (load, batch_writer):  # the writer a load starts with, and auto's choice by the batch
            monkeypatch.setattr(
                module,
                "select_writer",
                lambda backend, spark, options=None, batch_bytes=None, table_path=None: writer,
            )

    return use


def weekly_load(spark, dataset, week: int, try_number: int = 1, **arguments):
    """An append of one week's events (applied twice, its rows would be there twice) by its own task run."""
    return run_load(
        EVENTS[14 * week : 14 * (week + 1)],
        spark=spark,
        dataset=dataset,
        table_name=TABLE,
        write_disposition="append",
        run_context={
            "dag_id": "events",
            "task_id": "load",
            "run_id": f"scheduled__{START + timedelta(weeks=week):%Y-%m-%d}",
            "try_number": try_number,
        },
        **arguments,
    )


def stopped_after_commit(spark, dataset, week: int, monkeypatch) -> None:
    """A load of `week` whose process stops right after its commit, before anything records it."""
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", "after_commit")
    with pytest.raises(InjectedFault):
        weekly_load(spark, dataset, week)
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")


def assert_each_load_once(dataset: str, weeks: int) -> list[dict]:
    """Every commit is one recorded load at its recorded version, and every week's rows are there once."""
    path = f"{dataset}/{TABLE}"
    loads = store.read_loads(dataset)
    commits = sorted(store.read_commits(path), key=lambda c: c.version)
    assert [(c.load_id, c.version) for c in commits] == [(r["load_id"], r["table_version"]) for r in loads]
    ids = sorted(r["id"] for r in DeltaTable(path).to_pyarrow_table(columns=["id"]).to_pylist())
    assert ids == list(range(14 * weeks))
    return loads


def commit_request(load_id: str) -> CommitRequest:
    """A commit of the pipeline's table outside Airflow, with the txn version of the load id."""
    metadata = {"load_id": load_id, "pipeline": "deltamerge", "table": TABLE}
    return CommitRequest(load_id, app_id("deltamerge", TABLE, RunContext()), txn_version(load_id), metadata)


def test_the_delta_rs_writer_commits_its_metadata_as_the_delta_spark_writer_does(spark, dataset):
    info = weekly_load(spark, dataset, 0, backend="delta-rs")

    (entry,) = DeltaTable(info.table_path).history(1)
    assert not [key for key in entry if key.startswith(METADATA_PREFIX)]  # nothing at the top level
    recorded = json.loads(entry["userMetadata"])
    assert recorded[METADATA_PREFIX + "load_id"] == info.load_id
    assert recorded[METADATA_PREFIX + "writer"] == "delta-rs"
    (commit,) = store.read_commits(info.table_path)
    assert (commit.load_id, commit.metadata["run"]["run_id"]) == (info.load_id, "scheduled__2024-01-01")


@pytest.mark.parametrize("stopped_by", ["delta-spark", "delta-rs"])
def test_a_load_stopped_after_its_commit_is_finished_by_a_retry_under_the_other_writer(
    spark, dataset, monkeypatch, use_writer, spark_writer, stopped_by
):
    writers = {"delta-rs": DeltaRsWriter(), "delta-spark": spark_writer}
    retried_by = "delta-rs" if stopped_by == "delta-spark" else "delta-spark"
    use_writer(writers[retried_by])
    weekly_load(spark, dataset, 0)
    use_writer(writers[stopped_by])
    stopped_after_commit(spark, dataset, 1, monkeypatch)
    (committed,) = store.read_commits(f"{dataset}/{TABLE}", 1)
    assert committed.version == 1 and len(store.read_loads(dataset)) == 1

    use_writer(writers[retried_by])
    retry = weekly_load(spark, dataset, 1, try_number=2)

    assert (retry.load_id, retry.table_version) == (committed.load_id, 1)  # finished, not applied again
    loads = assert_each_load_once(dataset, weeks=2)
    assert [(r["try_number"], r["metrics"]["writer"]) for r in loads] == [(1, retried_by), (1, stopped_by)]
    assert loads[1]["metrics"]["numTargetRowsInserted"] == 14


def test_a_load_id_committed_by_the_delta_spark_writer_and_submitted_again_is_not_applied_twice(
    spark, dataset, monkeypatch, use_writer, spark_writer
):
    use_writer(spark_writer)
    stopped_after_commit(spark, dataset, 0, monkeypatch)
    (committed,) = store.read_commits(f"{dataset}/{TABLE}")

    # the same load id again, under the delta-rs writer: recorded from its commit, and returned
    use_writer(DeltaRsWriter())
    again = weekly_load(spark, dataset, 0, load_id=committed.load_id)

    assert (again.load_id, again.table_version) == (committed.load_id, 0)
    assert_each_load_once(dataset, weeks=1)


def test_the_delta_rs_writers_already_applied_check_finds_the_loads_commit_by_another_writer(
    spark, dataset, committed_by
):
    path = f"{dataset}/{TABLE}"
    rows = spark.createDataFrame(EVENTS[:14])
    plan = MergePlan(Operation.WRITE)
    request = commit_request("1704067200.000001")
    assert committed_by.commit(spark, path, None, plan, rows, request).version == 0

    snapshot = DeltaRsWriter().snapshot(spark, path)
    again = DeltaRsWriter().commit(spark, path, snapshot, plan, rows, request)

    assert (again.already_applied, again.version) == (True, 0)
    assert (DeltaTable(path).version(), DeltaTable(path).to_pyarrow_table().num_rows) == (0, 14)


def test_loads_alternating_writers_keep_every_load_once_at_its_recorded_version(
    spark, dataset, monkeypatch, use_writer, spark_writer
):
    writers = [DeltaRsWriter(), spark_writer, DeltaRsWriter(), spark_writer]
    for week in (0, 1):
        use_writer(writers[week])
        weekly_load(spark, dataset, week)
    use_writer(writers[2])
    stopped_after_commit(spark, dataset, 2, monkeypatch)  # recorded by the next load, under the other writer
    use_writer(writers[3])
    last = weekly_load(spark, dataset, 3)

    assert last.table_version == 3
    loads = assert_each_load_once(dataset, weeks=4)
    assert [r["table_version"] for r in loads] == [0, 1, 2, 3]
    assert [r["metrics"]["writer"] for r in loads] == [w.name for w in writers]
    assert [r["metrics"]["numTargetRowsInserted"] for r in loads] == [14, 14, 14, 14]


def test_commits_of_earlier_delta_rs_releases_with_top_level_metadata_are_still_read(
    spark, dataset, monkeypatch, use_writer
):
    use_writer(EarlierDeltaRs())
    weekly_load(spark, dataset, 0)
    stopped_after_commit(spark, dataset, 1, monkeypatch)
    committed = store.read_commits(f"{dataset}/{TABLE}")
    assert [c.version for c in committed if c.load_id] == [1, 0]

    use_writer(DeltaRsWriter())
    retry = weekly_load(spark, dataset, 1, try_number=2)

    assert (retry.load_id, retry.table_version) == (committed[0].load_id, 1)
    loads = assert_each_load_once(dataset, weeks=2)
    assert [r["try_number"] for r in loads] == [1, 1]
