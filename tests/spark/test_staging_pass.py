"""Staging computes the batch from the source once, whatever the disposition and writer: every check
and count comes out of that pass or out of the rows it produced. (On Spark Connect, where aggregates
do not ride on the pass, a batch with key columns has its raw null keys counted in a job of its own.)
A load planned again after another writer changed the table's schema takes its batch from that pass
too, never from the source again."""

from __future__ import annotations

import inspect
import logging
from datetime import date, datetime, timezone

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_provider_deltamerge import DuplicateKeyError, load, run_load
from airflow_provider_deltamerge.load import staged_arrow
from airflow_provider_deltamerge.model.options import TableHints, WriteDisposition
from airflow_provider_deltamerge.plan.pruning import KeyRange
from airflow_provider_deltamerge.spark import frames, partition_values
from airflow_provider_deltamerge.spark.profile import observes_in_pass
from airflow_provider_deltamerge.spark.stage import stage_batch
from tests.helpers import read_rows

ROWS = 40


def counted_source(spark, ids: range, tag: str):
    """A DataFrame whose every computed row adds one to an accumulator: how often the source ran. Built
    from spark.range, so that Spark knows its size."""
    computed = spark.sparkContext.accumulator(0)

    def seen(value):
        computed.add(1)
        return value

    count_row = F.udf(seen, T.LongType())
    rows = spark.range(ids.start, ids.stop).select(
        count_row(F.col("id")).alias("id"),
        F.concat(F.lit(f"{tag}-"), F.col("id").cast("string")).alias("name"),
    )
    return rows, computed


def load_into(spark, dataset, data, disposition, **options):
    return run_load(
        data,
        spark=spark,
        dataset=dataset,
        table_name="items",
        pipeline_name="pass",
        write_disposition=disposition,
        **options,
    )


CASES = {
    "append": ({"disposition": "append"}, {}),
    "replace": ({"disposition": "replace"}, {}),
    "upsert": ({"disposition": "merge", "strategy": "upsert"}, {"primary_key": "id"}),
    "upsert with hard deletes": (
        {"disposition": "merge", "strategy": "upsert"},
        {"primary_key": "id", "columns": {"gone": {"hard_delete": True}}},
    ),
    "insert-only": ({"disposition": "merge", "strategy": "insert-only"}, {"primary_key": "id"}),
    "delete-insert": ({"disposition": "merge", "strategy": "delete-insert"}, {"primary_key": "id"}),
}


@pytest.fixture(params=["collected", "materialised", "materialised on disk"])
def staging_route(request, monkeypatch, spark):
    """The ways staging's pass may go (load/staged_arrow.py): the batch collected to the driver where the
    writer takes Arrow, or materialised in Spark (what a batch Spark estimates as large takes), in memory
    or, for a batch estimated larger still, on local disk (spark/frames.py)."""
    if request.param.startswith("materialised"):
        monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", -1)
    elif not observes_in_pass(spark.range(1)):
        pytest.skip("this session stages by materialising only: no aggregates ride on a collection")
    if request.param == "materialised on disk":
        if not disk_checkpoints(spark):
            pytest.skip("PySpark 3.5 checkpoints in memory only")
        monkeypatch.setattr(frames, "DISK_CHECKPOINT_BYTES", -1)
    return request.param


def disk_checkpoints(spark) -> bool:
    return "storageLevel" in inspect.signature(spark.range(1).localCheckpoint).parameters


def test_a_batch_estimated_large_is_checkpointed_to_disk_and_read_back_whole(spark, monkeypatch, caplog):
    if not disk_checkpoints(spark):
        pytest.skip("PySpark 3.5 checkpoints in memory only")
    source, computed = counted_source(spark, range(ROWS), "big")
    monkeypatch.setattr(frames, "DISK_CHECKPOINT_BYTES", 100)  # Spark sizes these 40 rows above 100 bytes
    with caplog.at_level(logging.INFO, logger="airflow_provider_deltamerge"):
        held = frames.materialize(source)
    assert sorted(r["id"] for r in held.collect()) == list(range(ROWS))
    assert sorted(r["name"] for r in held.collect()) == sorted(f"big-{n}" for n in range(ROWS))
    assert computed.value == ROWS  # read back from the checkpoint, not computed again
    assert "checkpointed to local disk" in caplog.text
    monkeypatch.setattr(frames, "DISK_CHECKPOINT_BYTES", 10**12)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="airflow_provider_deltamerge"):
        frames.materialize(source)
    assert "checkpointed to local disk" not in caplog.text


def passes_over_the_source(spark, keyed: bool) -> int:
    """One; two for a batch with key columns where aggregates cannot ride on staging's pass (Spark
    Connect): the raw batch's null keys are then counted in a job of their own."""
    return 1 if observes_in_pass(spark.range(1)) or not keyed else 2


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("table_exists", [False, True], ids=["new table", "existing table"])
def test_the_source_is_computed_once(spark, dataset, case, table_exists, staging_route):
    disposition, options = CASES[case]
    if table_exists:
        old = [{"id": n, "name": f"old-{n}", "gone": False} for n in range(10)]
        load_into(spark, dataset, old, disposition, **options)
    source, computed = counted_source(spark, range(5, 5 + ROWS), "new")
    if "columns" in options:
        source = source.withColumn("gone", F.col("id") == 7)

    info = load_into(spark, dataset, source, disposition, **options)

    assert computed.value == ROWS * passes_over_the_source(spark, keyed="primary_key" in options)
    assert info.metrics["rows_extracted"] == ROWS
    loaded = {r["id"]: r["name"] for r in read_rows(f"{dataset}/items") if r["name"].startswith("new")}
    assert loaded[5 + ROWS - 1] == f"new-{5 + ROWS - 1}"
    kept_old = case == "insert-only" and table_exists  # insert-only leaves existing keys as they were
    assert (7 in loaded) == ("columns" not in options and not kept_old)


def test_duplicate_keys_among_hard_deletes_are_refused_in_a_new_table(spark, dataset):
    rows = [
        {"id": 1, "name": "a", "gone": True},
        {"id": 1, "name": "b", "gone": True},
        {"id": 2, "name": "c"},
    ]
    upsert = {"disposition": "merge", "strategy": "upsert"}
    with pytest.raises(DuplicateKeyError, match="1"):
        load_into(spark, dataset, rows, upsert, primary_key="id", columns={"gone": {"hard_delete": True}})


def test_a_load_planned_again_on_a_changed_schema_takes_its_batch_from_the_one_pass(
    spark, dataset, monkeypatch, caplog
):
    """Another load adds a column while this one is about to commit: this load's commit loses, it is
    planned again on the new schema, and its rows land with the new column empty; the source ran once.
    (With delta-spark the upsert runs on the table as Delta finds it, new column and all, and lands at
    its first attempt.)"""
    upsert = {"disposition": "merge", "strategy": "upsert"}
    load_into(spark, dataset, [{"id": n, "name": f"old-{n}"} for n in range(10)], upsert, primary_key="id")
    source, computed = counted_source(spark, range(5, 5 + ROWS), "new")
    interrupted = []

    def another_load_first(step):
        if step == "commit" and not interrupted:
            interrupted.append(step)
            widened = [{"id": 100, "name": "other", "score": 1.5}]
            load_into(spark, dataset, widened, upsert, primary_key="id")

    monkeypatch.setattr(load, "checkpoint", another_load_first)
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge")
    info = load_into(spark, dataset, source, upsert, primary_key="id")

    assert interrupted and computed.value == ROWS * passes_over_the_source(spark, keyed=True)
    planned_again = [r.getMessage() for r in caplog.records if "planning again" in r.getMessage()]
    assert len(planned_again) == (0 if info.metrics["writer"] == "delta-spark" else 1)
    rows = {r["id"]: r for r in read_rows(f"{dataset}/items")}
    assert len(rows) == 5 + ROWS + 1
    assert rows[6] == {"id": 6, "name": "new-6", "score": None}
    assert rows[100] == {"id": 100, "name": "other", "score": 1.5}
    assert info.metrics["numTargetRowsUpdated"] == 5 and info.metrics["numTargetRowsInserted"] == ROWS - 5


def test_the_pass_bounds_every_kind_of_key_with_python_values(spark):
    """The key ranges staging's pass observes (for pruning merges) are Python values of the key's kind:
    integers, text, dates, timestamps (as UTC instants) and timestamp_ntz, in every supported PySpark."""
    batch = spark.sql(
        "SELECT * FROM VALUES "
        "(9, 'b', DATE'2024-01-31', TIMESTAMP'2024-03-04 10:30:00.5+00:00',"
        " TIMESTAMP_NTZ'2024-03-04 10:30:00'),"
        "(3, 'a', DATE'0999-01-02', TIMESTAMP'2024-03-04 12:00:00+00:00',"
        " TIMESTAMP_NTZ'2024-03-04 10:30:00.25')"
        " AS batch(n, s, d, ts, ntz)"
    )
    keys = ("n", "s", "d", "ts", "ntz")
    upsert = WriteDisposition("merge", "upsert")
    staged = stage_batch(batch, upsert, TableHints(primary_key=keys), "load-1")

    assert staged.key_ranges == (
        KeyRange("n", 3, 9),
        KeyRange("s", "a", "b"),
        KeyRange("d", date(999, 1, 2), date(2024, 1, 31)),
        KeyRange(
            "ts",
            datetime(2024, 3, 4, 10, 30, 0, 500000, tzinfo=timezone.utc),
            datetime(2024, 3, 4, 12, tzinfo=timezone.utc),
        ),
        KeyRange("ntz", datetime(2024, 3, 4, 10, 30), datetime(2024, 3, 4, 10, 30, 0, 250000)),
    )
    assert (staged.rows_extracted, staged.rows_staged) == (2, 2)


def test_key_columns_partitioning_the_table_list_their_values_in_the_batch_where_few(spark, monkeypatch):
    """Their values name the partitions a merge reads (plan/pruning.py); from a Spark job over the staged
    batch here, sorted, each once. Over partition_values.MAX_NAMED values, the range alone bounds it."""
    batch = spark.sql(
        "SELECT * FROM VALUES (5, 'eu', DATE'2024-01-05', 1), (1, 'us', DATE'2024-01-01', 2),"
        " (5, 'eu', DATE'2024-01-05', 3) AS batch(n, r, d, id)"
    )
    upsert, hints = WriteDisposition("merge", "upsert"), TableHints(primary_key=("n", "r", "d", "id"))
    staged = stage_batch(batch, upsert, hints, "load-1", partition_by=("n", "r", "d"))

    assert [r.values for r in staged.key_ranges] == [
        (1, 5),
        ("eu", "us"),
        (date(2024, 1, 1), date(2024, 1, 5)),
        (),  # id does not partition the table
    ]
    monkeypatch.setattr(partition_values, "MAX_NAMED", 1)
    staged = stage_batch(batch, upsert, hints, "load-1", partition_by=("n",))
    assert staged.key_ranges[0] == KeyRange("n", 1, 5)
