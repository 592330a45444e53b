"""What a load asks of Spark, counted where a busy machine cannot change the count: the Spark jobs and
SQL executions of a small first load and a small upsert (what a fresh process pays planning and code
generation for), and the small-batch settings a new local session runs with."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pyspark
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import run_load

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from spark_work import SparkWork  # noqa: E402

UPSERT = {"disposition": "merge", "strategy": "upsert"}


def load(spark, dataset, data, **arguments):
    kwargs = {"table_name": "items", "write_disposition": UPSERT, "primary_key": "id", **arguments}
    with SparkWork(spark) as work:
        info = run_load(data, spark=spark, dataset=dataset, backend="delta-rs", **kwargs)
    return info, work


def test_a_small_first_load_and_upsert_each_run_one_spark_job(spark, dataset, tmp_path):
    """A list of rows (run_load's own small-load input) creates the table; a parquet batch (what the
    operator reads) upserts into it."""
    created, first = load(spark, dataset, [{"id": i, "v": f"v{i}"} for i in range(300)])
    landing = str(tmp_path / "landing")
    spark.range(290, 320).selectExpr("id", "concat('u', id) AS v").write.parquet(landing)
    upserted, second = load(spark, dataset, spark.read.parquet(landing))
    assert created.metrics["rows_staged"] == 300 and upserted.metrics["numTargetRowsInserted"] == 20
    # the floor's one job: the batch computed once and collected as Arrow, counted there
    # PySpark 3.5 gives a frame made from Python rows no size estimate, so staging checkpoints it before
    # the collection there: two jobs (docs/PERFORMANCE.md's job counts are the tested set's)
    rows_path = (1, 1) if int(pyspark.__version__.split(".")[0]) >= 4 else (2, 2)
    assert (first.jobs, first.sql_executions) == rows_path, first.job_names
    assert (second.jobs, second.sql_executions) == (1, 1), second.job_names


def test_a_collected_load_that_keeps_every_row_is_counted_in_arrow_not_observed(spark, dataset, tmp_path):
    """Where preparation keeps every row and the pass collects the batch whole, staging's counts (rows,
    null keys, key bounds, dates) come from the Arrow rows: the pass is a plain collection, with no
    observed node whose aggregates a fresh JVM compiles and runs row by row."""
    landing = str(tmp_path / "landing")
    spark.range(300).selectExpr("id", "concat('v', id) AS v", "IF(id = 7, 1, NULL) AS gone").write.parquet(
        landing
    )
    info, work = load(spark, dataset, spark.read.parquet(landing), columns={"gone": {"hard_delete": True}})
    assert info.metrics["rows_staged"] == 300 and work.sql_executions == 1
    assert "CollectMetrics" not in work.plans[0], work.plans[0]
    assert DeltaTable(f"{dataset}/items").to_pyarrow_table().num_rows == 299


def test_a_materialised_load_that_keeps_every_row_observes_its_pass_once(spark, dataset):
    """Each observation of the staging pass splits its generated code: where the batch is materialised in
    Spark (a source Spark cannot size), the raw batch's counts ride on the staged batch's observation."""
    rows = spark.createDataFrame([(i, f"v{i}") for i in range(300)], "id long, v string")
    info, work = load(spark, dataset, rows)
    assert info.metrics["rows_staged"] == 300
    observed = [plan for plan in work.plans if "CollectMetrics" in plan]
    assert len(observed) == 1 and len(re.findall(r"^\(\d+\) CollectMetrics", observed[0], re.M)) == 1, (
        work.plans
    )


def load_events(spark, dataset, tmp_path):
    """300 change events of 50 keys (a parquet batch) applied by an upsert with deletes: each key's
    newest is staged."""
    landing = str(tmp_path / "events")
    events = ("id % 50 AS id", "id AS lsn", "IF(id % 7 = 0, 'd', 'u') AS op", "concat('v', id) AS v")
    spark.range(300).selectExpr(*events).write.parquet(landing)
    cdc = {"sequence_by": "lsn", "apply_as_deletes": "op = 'd'"}
    info, work = load(spark, dataset, spark.read.parquet(landing), **cdc)
    assert info.metrics["numEventsApplied"] + info.metrics["numEventsSkippedStale"] == 300
    assert info.metrics["rows_staged"] == 50
    return info, work


def test_change_events_collected_whole_are_ranked_on_the_driver_in_the_one_pass(spark, dataset, tmp_path):
    """An upsert of events that the pass collects whole is ranked by pyarrow on the driver, which also
    counts their ties (spark/arrow_events.py): the pass is the plain collection, no shuffle, no window."""
    info, work = load_events(spark, dataset, tmp_path)
    assert (work.jobs, work.sql_executions) == (1, 1), work.job_names
    assert "Exchange" not in work.plans[0] and "Window" not in work.plans[0], work.plans[0]


def test_change_events_ranked_in_spark_count_their_ties_in_the_staging_pass(
    spark, dataset, tmp_path, monkeypatch
):
    """Where staging materialises the events in Spark, the window that ranks them counts their ties in
    the same pass: the shuffle of the ranking and the pass, no job of the tie check's own."""
    from airflow_provider_deltamerge.load import staged_arrow

    monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", -1)
    info, work = load_events(spark, dataset, tmp_path)
    assert any("Window" in plan for plan in work.plans), work.plans


def test_change_events_too_many_to_hold_whole_are_ranked_in_spark_and_only_the_newest_collected(
    spark, dataset, tmp_path, monkeypatch, caplog
):
    """A driver that cannot hold every event, but can hold each key's newest, still loads the batch."""
    from airflow_provider_deltamerge.delta import arrow_stream
    from airflow_provider_deltamerge.delta.driver_budget import DriverBudget

    budget = DriverBudget(12 * 2**10, "1g", True)  # 300 events are about 30 KiB as Arrow, 50 about 5
    monkeypatch.setattr(arrow_stream.DriverBudget, "of", classmethod(lambda cls, spark: budget))
    with caplog.at_level("INFO", logger="airflow_provider_deltamerge"):
        info, work = load_events(spark, dataset, tmp_path)
    assert "take more than the 0 MiB the driver may hold whole: ranked in Spark instead" in caplog.text
    assert any("Window" in plan for plan in work.plans), work.plans
    assert DeltaTable(f"{dataset}/items").to_pyarrow_table().num_rows == info.metrics["numTargetRowsInserted"]


def test_the_local_session_runs_with_the_small_batch_settings_nobody_else_set(spark):
    conf = spark.conf
    assert conf.get("spark.sql.adaptive.coalescePartitions.parallelismFirst") == "false"
    assert conf.get("spark.sql.adaptive.enabled") == "true"
    # the session's own setting stands (the test fixture's 2, or 4 where an earlier test started the
    # session without one); never Spark's default of 200 tasks for a few rows
    assert conf.get("spark.sql.shuffle.partitions") in ("2", "4")


def test_the_local_sessions_jvm_defers_c2(spark):
    """The suite's session is a local session like a task's: its driver JVM runs with C2 deferred
    (spark/jit_options.py)."""
    from airflow_provider_deltamerge.spark import jit_options

    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert set(jit_options.LATE_C2) <= set(runtime.getInputArguments())


def compiled_classes(spark) -> int:
    """How many classes Spark's code generation has compiled in this JVM so far."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return metrics.METRIC_COMPILATION_TIME().getCount()


def shape_never_compiled(spark, landing: str, modulus: int):
    """A batch whose filter's constant appears in no query run before, so its generated code is in no
    cache: a compilation for it shows in `compiled_classes`."""
    return spark.read.parquet(landing).where(f"id % {modulus} > 0")


def test_a_collected_batch_is_planned_without_whole_stage_codegen_unless_the_session_sets_it(
    spark, dataset, tmp_path, caplog
):
    """Staging's collection of a small batch runs interpreted, whole-stage and expressions alike
    (spark/codegen.py): nothing is compiled for it, and the settings are removed after it; a setting
    the session made stands, either way."""
    from airflow_provider_deltamerge.spark.codegen import FACTORY_MODE, WHOLE_STAGE

    modulus = 7919 + int(tmp_path.stat().st_ino) % 10_000  # a constant no other test's query holds
    landing = str(tmp_path / "landing")
    spark.range(300).selectExpr("id", "concat('v', id) AS v").write.parquet(landing)
    compiled = compiled_classes(spark)
    with caplog.at_level("INFO", logger="airflow_provider_deltamerge.spark.codegen"):
        info, interpreted = load(spark, dataset, shape_never_compiled(spark, landing, modulus))
    assert info.metrics["rows_staged"] == 299 and interpreted.sql_executions == 1
    assert "codegen id" not in interpreted.plans[0], interpreted.plans[0]
    assert compiled_classes(spark) == compiled
    assert spark.conf.get(WHOLE_STAGE, None) is None and spark.conf.get(FACTORY_MODE, None) is None
    assert "planned without whole-stage code generation, its expressions interpreted" in caplog.text
    for key, value in ((WHOLE_STAGE, "true"), (FACTORY_MODE, "FALLBACK")):
        spark.conf.set(key, value)
        try:
            before = compiled_classes(spark)
            info, kept = load(spark, dataset, shape_never_compiled(spark, landing, modulus + 1 + len(key)))
            assert spark.conf.get(key) == value
            assert spark.conf.get({WHOLE_STAGE: FACTORY_MODE, FACTORY_MODE: WHOLE_STAGE}[key], None) is None
        finally:
            spark.conf.unset(key)
        assert info.metrics["numTargetRowsInserted"] == 0 and compiled_classes(spark) > before
        assert "codegen id" in kept.plans[0]  # Spark's default where the session set only the other


def test_a_collected_batch_above_the_interpreted_size_compiles_its_expressions(
    spark, dataset, tmp_path, caplog, monkeypatch
):
    """A batch Spark estimates above INTERPRET_ESTIMATE_BYTES runs without whole-stage code generation
    only: its expressions are compiled, as interpreting them costs more per row than compiling them."""
    from airflow_provider_deltamerge.spark import codegen

    monkeypatch.setattr(codegen, "INTERPRET_ESTIMATE_BYTES", 0)
    landing = str(tmp_path / "landing")
    spark.range(300).selectExpr("id", "concat('v', id) AS v").write.parquet(landing)
    compiled = compiled_classes(spark)
    with caplog.at_level("INFO", logger="airflow_provider_deltamerge.spark.codegen"):
        batch = shape_never_compiled(spark, landing, 19_001 + tmp_path.stat().st_ino % 997)
        info, work = load(spark, dataset, batch)
    assert info.metrics["rows_staged"] == 299 and "codegen id" not in work.plans[0]
    assert compiled_classes(spark) > compiled
    assert "planned without whole-stage code generation (a small batch" in caplog.text


@pytest.mark.parametrize("small", [True, False], ids=["small", "above the size"])
def test_a_checkpointed_small_batch_is_planned_without_whole_stage_codegen(
    spark, dataset, tmp_path, caplog, monkeypatch, small
):
    """A delete-insert's batch is checkpointed in Spark (its plan reads it back): a small one without
    whole-stage code generation, its expressions compiled, the settings removed after it; one Spark
    estimates above SMALL_BATCH_BYTES as the session has it (spark/codegen.py)."""
    from airflow_provider_deltamerge.spark import codegen

    if not small:
        monkeypatch.setattr(codegen, "SMALL_BATCH_BYTES", 0)
    landing = str(tmp_path / "landing")
    spark.range(300).selectExpr("id", "concat('v', id) AS v").write.parquet(landing)
    delete_insert = {"disposition": "merge", "strategy": "delete-insert"}
    load(spark, dataset, spark.read.parquet(landing), write_disposition=delete_insert)
    with caplog.at_level("INFO", logger="airflow_provider_deltamerge.spark.codegen"):
        info, work = load(spark, dataset, spark.read.parquet(landing), write_disposition=delete_insert)
    checkpoints = [plan for plan in work.plans if "Window" in plan]  # the deduplicating pass
    assert info.metrics["rows_staged"] == 300 and len(checkpoints) == 1
    assert ("codegen id" in checkpoints[0]) is not small, checkpoints[0]
    said = "the batch's checkpoint: planned without whole-stage code generation (a small batch"
    assert (said in caplog.text) is small
    assert spark.conf.get(codegen.WHOLE_STAGE, None) is None
