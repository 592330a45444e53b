"""The delta-rs writer's transfer from Spark: whole or streamed by size with the same outcome, progress
in the task log while it runs, a batch too big for the driver refused before anything is written; and
tables laid out by key, so that a merge of a slice of the keys rewrites only the files holding it."""

from __future__ import annotations

import logging

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import BatchTooLargeError, run_load
from airflow_provider_deltamerge.delta import arrow_stream, delta_rs, driver_budget, unique_keys
from airflow_provider_deltamerge.load import staged_arrow

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

UPSERT = {"disposition": "merge", "strategy": "upsert"}


def rows(ids, tag: str) -> list[dict]:
    return [{"id": n, "name": f"{tag}-{n}", "amount": n * 0.5} for n in ids]


def load(spark, dataset, batch, **options):
    return run_load(
        batch,
        spark=spark,
        dataset=dataset,
        table_name="items",
        write_disposition=UPSERT,
        primary_key="id",
        backend="delta-rs",
        **options,
    )


def table_rows(dataset) -> dict[int, tuple]:
    table = DeltaTable(f"{dataset}/items").to_pyarrow_table(columns=["id", "name", "amount"])
    return {r["id"]: (r["name"], r["amount"]) for r in table.to_pylist()}


def transfer_log(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == arrow_stream.log.name]


def batches_arrived(lines: list[str]) -> int:
    """The Arrow batches a transfer counted, from its closing progress line."""
    arrived = next(line for line in lines if "in all" in line)
    return int(arrived.split(": ")[1].split(" batches")[0])


@pytest.mark.parametrize("in_memory_bytes", [0, 2**30], ids=["streamed", "whole"])
def test_a_streamed_merge_and_a_whole_one_load_the_same_rows(spark, dataset, monkeypatch, in_memory_bytes):
    monkeypatch.setattr(arrow_stream, "IN_MEMORY_BYTES", in_memory_bytes)
    load(spark, dataset, spark.createDataFrame(rows(range(0, 400, 2), "old")).repartition(4))
    info = load(spark, dataset, spark.createDataFrame(rows(range(100, 500), "new")).repartition(4))

    assert (info.metrics["numTargetRowsUpdated"], info.metrics["numTargetRowsInserted"]) == (150, 250)
    loaded = table_rows(dataset)
    assert len(loaded) == 450
    assert loaded[0] == ("old-0", 0.0) and loaded[101] == ("new-101", 50.5)
    assert loaded[498] == ("new-498", 249.0)


def test_the_transfer_logs_its_progress_while_it_runs(spark, dataset, monkeypatch, caplog):
    monkeypatch.setattr(arrow_stream, "PROGRESS_SECONDS", 0.0)
    monkeypatch.setattr(arrow_stream, "IN_MEMORY_BYTES", 0)
    load(spark, dataset, rows(range(10), "old"))
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge")
    caplog.clear()
    load(spark, dataset, spark.createDataFrame(rows(range(300), "new")).repartition(3))

    lines = transfer_log(caplog)
    so_far = [line for line in lines if line.endswith("s)") and "so far" in line]
    assert so_far and all(f"transfer to {dataset}/items:" in line for line in so_far)
    assert any("300 rows" in line and "in all" in line for line in lines)
    assert any(f"batch for {dataset}/items:" in line and "streamed" in line for line in lines)


def test_a_batch_too_big_for_the_driver_is_refused_before_anything_is_written(spark, dataset, monkeypatch):
    first = load(spark, dataset, rows(range(10), "old"))
    monkeypatch.setattr(driver_budget, "LOCAL_SHARE", 1e-9)  # the test session is local
    new = spark.range(100).selectExpr(
        "id", "concat('new-', id) AS name", "CAST(id * 0.5 AS DOUBLE) AS amount"
    )
    batch = new.repartition(8)  # of a size Spark knows, so staging collects it; more batches than it reads

    with pytest.raises(BatchTooLargeError, match="spark.driver.memory=.* on a local session"):
        load(spark, dataset, batch)
    assert DeltaTable(f"{dataset}/items").version() == first.table_version
    assert table_rows(dataset)[3] == ("old-3", 1.5)

    monkeypatch.undo()  # the same batch, once the driver may take it, loads in the same session
    again = load(spark, dataset, batch)
    assert again.table_version == first.table_version + 1 and table_rows(dataset)[3] == ("new-3", 1.5)


def test_a_key_check_that_runs_the_driver_out_of_heap_refuses_the_batch(spark, dataset, monkeypatch):
    """A streamed batch's unique keys are checked by a Spark job over the whole batch; on a local session
    it shares the driver's heap with the materialised batch. Its running out (injected here: a real one
    could stop the test session's JVM) refuses the batch as too large, and nothing is written."""
    first = load(spark, dataset, rows(range(10), "old"))
    monkeypatch.setattr(arrow_stream, "IN_MEMORY_BYTES", 0)  # streamed: the key is checked in Spark

    def out_of_heap(source, plan):
        raise RuntimeError(
            "Job aborted due to stage failure\nCaused by: java.lang.OutOfMemoryError: Java heap space"
        )

    monkeypatch.setattr(unique_keys, "check_spark", out_of_heap)
    with pytest.raises(
        BatchTooLargeError, match=r"\(Spark: Caused by: java.lang.OutOfMemoryError: Java heap space\)"
    ):
        load(spark, dataset, spark.createDataFrame(rows(range(5, 15), "new")).repartition(2))
    assert DeltaTable(f"{dataset}/items").version() == first.table_version
    assert table_rows(dataset)[5] == ("old-5", 2.5)


def assert_a_slice_of_the_keys_rewrites_few_files(spark, dataset) -> None:
    """A merge of 1% of a 20,000-row table's keys, one slice, rewrites at most the two files holding it."""
    info = load(spark, dataset, rows(range(10_000, 10_200), "new"))
    assert info.metrics["numTargetRowsUpdated"] == 200
    assert info.metrics["numTargetFilesRemoved"] <= 2
    loaded = table_rows(dataset)
    assert len(loaded) == 20_000 and loaded[10_100][0] == "new-10100" and loaded[9_999][0] == "old-9999"


@pytest.mark.parametrize("in_memory_bytes", [0, 2**30], ids=["streamed", "whole"])
def test_a_merge_of_a_slice_of_the_keys_rewrites_only_the_files_holding_it(
    spark, dataset, monkeypatch, in_memory_bytes
):
    monkeypatch.setattr(arrow_stream, "IN_MEMORY_BYTES", in_memory_bytes)  # the table created either way
    monkeypatch.setattr(delta_rs, "TARGET_FILE_BYTES", 8 * 2**10)  # many small files
    shuffled = spark.createDataFrame(rows(range(20_000), "old")).repartition(8)  # keys spread over partitions
    load(spark, dataset, shuffled)
    files = len(DeltaTable(f"{dataset}/items").file_uris())
    assert files >= 20

    assert_a_slice_of_the_keys_rewrites_few_files(spark, dataset)


def test_a_batch_sorted_in_spark_comes_in_partitions_of_bounded_size(spark, dataset, monkeypatch, caplog):
    """A new table's streamed batch is sorted in Spark. Spark's Arrow collection takes each partition whole
    into the driver's JVM, so the sort cuts the batch into pieces of about PIECE_BYTES, however
    few the session's shuffle partitions are, and the table is still laid out by key."""
    monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", -1)  # staging materialises it in Spark
    monkeypatch.setattr(arrow_stream, "IN_MEMORY_BYTES", 0)  # and the writer streams it from there
    monkeypatch.setattr(arrow_stream, "PIECE_BYTES", 64 * 2**10)
    monkeypatch.setattr(delta_rs, "TARGET_FILE_BYTES", 8 * 2**10)  # many small files
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge")
    shuffled = spark.createDataFrame(rows(range(20_000), "old")).repartition(8).coalesce(1)
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")  # a plain sort would bring it in one piece
    try:
        load(spark, dataset, shuffled)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)

    lines = transfer_log(caplog)
    batches = batches_arrived(lines)
    sorted_in = [line for line in lines if "sorted by id in Spark" in line]
    assert len(sorted_in) == 1, lines
    partitions = int(sorted_in[0].split(" in ")[-1].split()[0])
    assert batches >= partitions >= 10  # one Arrow batch or more per piece (a piece is 2,000 rows or fewer)
    assert len(DeltaTable(f"{dataset}/items").file_uris()) >= 20

    assert_a_slice_of_the_keys_rewrites_few_files(spark, dataset)


def test_a_streamed_batch_in_large_partitions_comes_in_smaller_pieces(spark, dataset, monkeypatch, caplog):
    """Spark hands the driver each partition of a streamed batch whole, so a batch whose partitions are
    larger than PIECE_LIMIT_BYTES is repartitioned on its way; the merge's outcome is the same."""
    monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", -1)  # staging materialises it in Spark
    monkeypatch.setattr(arrow_stream, "IN_MEMORY_BYTES", 0)  # and the writer streams it from there
    load(spark, dataset, rows(range(0, 4000, 2), "old"))
    monkeypatch.setattr(arrow_stream, "PIECE_LIMIT_BYTES", 64 * 2**10)
    monkeypatch.setattr(arrow_stream, "PIECE_BYTES", 16 * 2**10)
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge")
    caplog.clear()
    info = load(spark, dataset, spark.createDataFrame(rows(range(1000, 5000), "new")).coalesce(1))

    lines = transfer_log(caplog)
    batches = batches_arrived(lines)
    cut = [line for line in lines if "would reach the driver whole: repartitioned into" in line]
    assert len(cut) == 1, lines
    pieces = int(cut[0].rsplit(" ", 1)[1])
    assert batches >= pieces >= 10  # one Arrow batch or more per piece (a piece is 4,000 rows or fewer)
    assert (info.metrics["numTargetRowsUpdated"], info.metrics["numTargetRowsInserted"]) == (1500, 2500)
    loaded = table_rows(dataset)
    assert len(loaded) == 4500 and loaded[0] == ("old-0", 0.0) and loaded[4999] == ("new-4999", 2499.5)


def test_a_streamed_batch_in_small_partitions_is_left_as_it_is(spark, dataset, monkeypatch, caplog):
    monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", -1)
    monkeypatch.setattr(arrow_stream, "IN_MEMORY_BYTES", 0)
    load(spark, dataset, rows(range(0, 400, 2), "old"))
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge")
    caplog.clear()
    load(spark, dataset, spark.createDataFrame(rows(range(100, 500), "new")).repartition(4))

    assert not [line for line in transfer_log(caplog) if "repartitioned" in line]
    assert len(table_rows(dataset)) == 450
