"""One merge of N changed rows into a table of M rows: run_load beside a hand-written delta-rs merge.

Both sides get the same rows: the change set is built in Spark, and the hand-written side merges the
Arrow form of exactly the rows run_load staged (same columns, same system column values), so the
difference is what run_load adds: staging, checks, the Spark -> Arrow transfer and the load record.
Each repetition runs both sides on fresh copies of one target, alternating which goes first.

    python benchmarks/merge_bench.py --target-rows 1000000 --changed-rows 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyspark.sql import functions as F

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.spark.session import default_session

STRATEGY = {"disposition": "merge", "strategy": "upsert"}


def rows(spark, ids):
    """Deterministic rows for the given id column: every value derives from the id."""
    return ids.select(
        F.col("id"),
        (F.col("id") % 1000).alias("k"),
        F.sha2(F.col("id").cast("string"), 256).substr(1, 20).alias("s"),
        (F.col("id") * 0.001).alias("x"),
        (F.lit("2024-01-01").cast("timestamp") + F.make_interval(secs=F.col("id"))).alias("ts"),
        ((F.col("id") % 3) == 0).alias("flag"),
    )


def build_target(spark, path: str, target_rows: int) -> None:
    """The target as run_load writes it: M rows with even ids, loaded once."""
    target = rows(spark, spark.range(target_rows).select((F.col("id") * 2).alias("id")))
    run_load(
        target,
        spark=spark,
        dataset=str(Path(path).parent),
        table_name=Path(path).name,
        write_disposition=STRATEGY,
        primary_key="id",
        pipeline_name="bench",
    )


def change_set(spark, target_rows: int, changed_rows: int):
    """90% existing ids spread over the whole table (changed values), 10% new odd ids."""
    updates = int(changed_rows * 0.9)
    stride = max(1, target_rows // max(updates, 1))
    existing = spark.range(updates).select(((F.col("id") * stride) % target_rows * 2).alias("id"))
    new = spark.range(changed_rows - updates).select((F.col("id") * 2 * stride + 1).alias("id"))
    changed = rows(spark, existing.unionByName(new))
    return (
        changed.withColumn("x", F.col("x") + 5000).withColumn("s", F.upper("s")).localCheckpoint(eager=True)
    )


def time_run_load(spark, dataset: str, table: str, changes) -> tuple[float, dict]:
    started = time.perf_counter()
    info = run_load(
        changes,
        spark=spark,
        dataset=dataset,
        table_name=table,
        write_disposition=STRATEGY,
        primary_key="id",
        pipeline_name="bench",
    )
    return time.perf_counter() - started, info.metrics


def staged_rows(path: str, load_id: str) -> pa.Table:
    """The rows the load wrote, read back: the exact prepared rows for the hand-written merge."""
    table = DeltaTable(path).to_pyarrow_table()
    table = table.cast(
        pa.schema([f.with_type(pa.string()) if f.type == pa.string_view() else f for f in table.schema])
    )
    return table.filter(pc.equal(table["_dlt_load_id"], load_id))


def time_hand_written(path: str, prepared: pa.Table) -> tuple[float, dict]:
    started = time.perf_counter()
    metrics = (
        DeltaTable(path)
        .merge(prepared, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return time.perf_counter() - started, metrics


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--target-rows", type=int, default=1_000_000)
    parser.add_argument("--changed-rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    spark = default_session("local[2]", {"spark.driver.memory": "4g"})
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="merge-bench-"))
    try:
        base = work / "base" / "target"
        build_target(spark, str(base), args.target_rows)
        changes = change_set(spark, args.target_rows, args.changed_rows)
        prepared = None
        ours, theirs = [], []
        for repetition in range(args.repeat):
            ours_path = work / f"ours{repetition}" / "target"
            theirs_path = work / f"theirs{repetition}" / "target"
            shutil.copytree(base.parent, ours_path.parent)
            shutil.copytree(base, theirs_path)
            if prepared is None:  # first run_load tells us the exact staged rows
                seconds, metrics = time_run_load(spark, str(ours_path.parent), "target", changes)
                prepared = staged_rows(str(ours_path), metrics["load_id"])
                theirs.append(time_hand_written(str(theirs_path), prepared)[0])
                ours.append(seconds)
                continue
            if repetition % 2:
                theirs.append(time_hand_written(str(theirs_path), prepared)[0])
                ours.append(time_run_load(spark, str(ours_path.parent), "target", changes)[0])
            else:
                ours.append(time_run_load(spark, str(ours_path.parent), "target", changes)[0])
                theirs.append(time_hand_written(str(theirs_path), prepared)[0])
        report(args, ours, theirs)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def report(args, ours: list[float], theirs: list[float]) -> None:
    a, b = statistics.median(ours), statistics.median(theirs)
    print(
        f"\nupsert of {args.changed_rows:,} changed rows into {args.target_rows:,} rows, "
        f"{args.repeat} runs (median):"
    )
    print(f"  hand-written delta-rs merge of the prepared Arrow rows: {b:8.2f} s  (runs: {_runs(theirs)})")
    print(f"  run_load (Spark staging + transfer + merge + record):  {a:8.2f} s  (runs: {_runs(ours)})")
    print(f"  ratio run_load / hand-written: {a / b:.2f}")


def _runs(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    main()
