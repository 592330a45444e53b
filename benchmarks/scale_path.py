"""The scale path (P6): run_load with the delta-spark writer beside Delta's own API on the same session,
cold and warm, and where `backend="auto"` should hand a batch to delta-rs instead.

    python benchmarks/scale_path.py --delta-jars "$(ls /path/to/delta/*.jar | paste -sd, -)" \
        --rows 1000000 --changed 100000 --batches 1000 10000 100000 1000000 --repeat 2 --out scale.json

Each side of a pair runs in a fresh process of its own (Spark started there, the target written there
with a plain `df.write.format("delta")`, untimed): its first timed run is the cold one, what a fresh
task pays; the runs after it, each on a fresh copy of the target, are warm.
- merge: run_load's upsert of `--changed` rows (uniform, benchmarks/workload.py) into the `--rows`-row
  target with the delta-spark writer, beside a hand-written `DeltaTable.merge` of the same rows (with
  the same system columns); the files each rewrote;
- initial: run_load's first load of `--rows` rows with the delta-spark writer (key-ordered files),
  beside a plain `df.write.format("delta")` of them and beside the same write in run_load's layout (the
  rows range-partitioned by the key into as many files as run_load wrote, each sorted), which parts the
  layout's cost from the rest of the load's;
- batches (one process, warm, each side once untimed first): for each batch size, run_load's upsert of
  that many rows with each writer, Spark's estimate of the batch (what "auto" compares with
  DELTAMERGE_AUTO_DELTA_RS_MAX_MB), and the driver's growth during the delta-spark load: the Python
  process's peak RSS (where delta-rs would hold the batch) and the JVM heap's peak use (in local mode the
  executors share that JVM, so the heap counts their work too).
Printed: a table of seconds with ratios; `--out` writes it as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1]))  # tests.airflow.spark_servers, for --cluster

PAIRS = {
    "merge": ("run_load delta-spark", "DeltaTable.merge"),
    "initial": ("run_load delta-spark initial", "df.write delta", "df.write delta key-ordered"),
}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--delta-jars", default=os.environ.get("DELTA_SPARK_JARS"), help="local Delta jars")
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="the target's rows, and the initial load's"
    )
    parser.add_argument("--changed", type=int, default=100_000, help="the merge's changed rows")
    parser.add_argument("--kind", choices=("uniform", "clustered"), default="uniform", help="the change")
    parser.add_argument(
        "--cases", nargs="+", choices=(*PAIRS, "batches"), default=[*PAIRS, "batches"], help="what to run"
    )
    parser.add_argument(
        "--batch-writers",
        nargs="+",
        choices=("delta-rs", "delta-spark"),
        default=["delta-rs", "delta-spark"],
        help="the writers each batch size runs on (delta-spark alone for the driver's heap at 10M+ rows)",
    )
    parser.add_argument("--batches", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=2, help="warm runs after the cold one")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run each side on a standalone master and worker started on loopback (and stopped), so the "
        "driver's JVM heap is the driver's alone; the executor gets --executor-memory",
    )
    parser.add_argument("--executor-memory", default="4g")
    parser.add_argument("--master", help=argparse.SUPPRESS)  # a child's standalone master
    parser.add_argument("--out")
    parser.add_argument("--side", help=argparse.SUPPRESS)  # a child process's one side
    parser.add_argument("--files", type=int, help=argparse.SUPPRESS)  # the key-ordered write's files
    args = parser.parse_args(argv)
    if not args.delta_jars:
        parser.error(
            "needs Delta's jars: --delta-jars or DELTA_SPARK_JARS (local files; nothing is downloaded)"
        )
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.side:
        print(json.dumps(run_side(args)))
        return
    report = {"rows": args.rows, "changed": args.changed, "kind": args.kind, "cluster": args.cluster}
    report |= {"pairs": {}, "batches": None}
    for case, sides in PAIRS.items():
        if case in args.cases:
            report["pairs"][case] = {}
            for side in sides:  # the key-ordered write makes as many files as run_load's first load made
                files = report["pairs"][case].get(sides[0], {}).get("cold", {}).get("files_added")
                report["pairs"][case][side] = child(
                    argparse.Namespace(**{**vars(args), "files": files}), side
                )
    if "batches" in args.cases:
        report["batches"] = child(args, "batches")
    print(render(report))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))


def child(args: argparse.Namespace, side: str) -> dict:
    if args.cluster and not args.master:
        from tests.airflow.spark_servers import standalone_cluster

        with (
            tempfile.TemporaryDirectory() as work,
            standalone_cluster(
                Path(work), worker_cores=os.cpu_count() or 2, worker_memory=args.executor_memory
            ) as master,
        ):
            return child(argparse.Namespace(**{**vars(args), "master": master}), side)
    command = [sys.executable, __file__, "--side", side, "--delta-jars", args.delta_jars]
    if args.master:
        command += ["--master", args.master, "--executor-memory", args.executor_memory]
    command += ["--rows", str(args.rows), "--changed", str(args.changed), "--repeat", str(args.repeat)]
    command += ["--kind", args.kind, "--driver-memory", args.driver_memory]
    command += ["--files", str(args.files)] if getattr(args, "files", None) else []
    command += ["--batches", *map(str, args.batches), "--batch-writers", *args.batch_writers]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_side(args: argparse.Namespace) -> dict:
    from bench_sides import spark_session

    extra = {"spark.executor.memory": args.executor_memory} if args.master else None
    spark = spark_session(args.driver_memory, args.delta_jars, args.master or "local[2]", extra)
    with tempfile.TemporaryDirectory() as work:
        if args.side == "batches":
            return batches(spark, Path(work), args)
        return timed_runs(spark, Path(work), args)


def timed_runs(spark, work: Path, args: argparse.Namespace) -> dict:
    from bench_sides import files_touched, spark_target
    from workload import Size

    size = Size(args.rows, args.changed, args.kind)
    base = work / "base" / "items"
    minimal = None
    if args.side in PAIRS["merge"]:
        spark_target(spark, size).write.format("delta").save(str(base))
        minimal = files_touched(str(base), size)
    runs = []
    for n in range(args.repeat + 1):
        path = work / f"run{n}" / "items"
        if base.exists():
            shutil.copytree(base, path)
        started = time.perf_counter()
        files = one_run(spark, args.side, size, path, args.files or 1)
        runs.append({"seconds": time.perf_counter() - started, **files})
    return {"cold": runs[0], "warm": runs[1:], "minimal_files": minimal}


def one_run(spark, side: str, size, path: Path, files: int = 1) -> dict:
    from bench_sides import UPSERT, spark_changes, spark_target, verify, with_system_columns
    from delta.tables import DeltaTable

    from airflow_provider_deltamerge import run_load

    common = {"spark": spark, "dataset": str(path.parent), "table_name": "items", "pipeline_name": "bench"}
    if side == "run_load delta-spark":
        info = run_load(
            spark_changes(spark, size),
            write_disposition=UPSERT,
            primary_key="id",
            **common,
            backend="delta-spark",
        )
        assert verify(str(path), size)
        return {"files_removed": info.metrics.get("numTargetFilesRemoved")}
    if side == "DeltaTable.merge":
        source = with_system_columns(spark_changes(spark, size)).alias("s")
        DeltaTable.forPath(spark, str(path)).alias("t").merge(
            source, "t.id = s.id"
        ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        assert verify(str(path), size)
        metrics = DeltaTable.forPath(spark, str(path)).history(1).first()["operationMetrics"]
        return {"files_removed": int(metrics["numTargetFilesRemoved"])}
    if side == "run_load delta-spark initial":
        run_load(spark_target(spark, size), primary_key="id", **common, backend="delta-spark")
    elif side == "df.write delta key-ordered":
        rows = with_system_columns(spark_target(spark, size))
        rows.repartitionByRange(files, "id").sortWithinPartitions("id").write.format("delta").save(str(path))
    else:
        with_system_columns(spark_target(spark, size)).write.format("delta").save(str(path))
    return {"files_added": int(DeltaTable.forPath(spark, str(path)).detail().first()["numFiles"])}


def batches(spark, work: Path, args: argparse.Namespace) -> dict:
    """Per batch size: each writer's upsert into a fresh copy of a small target, timed after an untimed
    run of each; Spark's estimate of the batch; the delta-spark load's driver growth."""
    from bench_sides import PeakRss, spark_changes, spark_target
    from workload import Size

    from airflow_provider_deltamerge.spark.profile import estimated_bytes

    results = []
    for rows in args.batches:
        size = Size(max(rows, 10_000), rows, "uniform")
        base = work / f"base{rows}" / "items"
        spark_target(spark, size).write.format("delta").save(str(base))
        entry = {"rows": rows, "spark_estimate_bytes": estimated_bytes(spark_changes(spark, size))}
        for writer in args.batch_writers:
            seconds = []
            for n in range(args.repeat + 1):
                path = work / f"{writer}-{rows}-{n}" / "items"
                shutil.copytree(base, path)
                reset_heap_peaks(spark)
                with PeakRss() as rss:
                    before = rss.me.memory_info().rss
                    started = time.perf_counter()
                    upsert(spark, spark_changes(spark, size), path, writer)
                    seconds.append(time.perf_counter() - started)
                shutil.rmtree(path.parent)
            entry[writer] = {
                "seconds": seconds[1:] or seconds,  # --repeat 0: the one (cold) run
                "python_growth": rss.peak_self - before,
                "jvm_heap_peak": heap_peak(spark),
            }
        shutil.rmtree(base.parent)
        results.append(entry)
    return {"batches": results}


def upsert(spark, data, path: Path, writer: str):
    from bench_sides import UPSERT

    from airflow_provider_deltamerge import run_load

    return run_load(
        data,
        spark=spark,
        dataset=str(path.parent),
        table_name="items",
        write_disposition=UPSERT,
        primary_key="id",
        pipeline_name="bench",
        backend=writer,
    )


def reset_heap_peaks(spark) -> None:
    for pool in spark._jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
        pool.resetPeakUsage()


def heap_peak(spark) -> int:
    heap = spark._jvm.java.lang.management.MemoryType.HEAP
    pools = spark._jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
    return sum(p.getPeakUsage().getUsed() for p in pools if p.getType() == heap)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if len(ordered) % 2 else sum(ordered[len(ordered) // 2 - 1 :][:2]) / 2


def _pair_line(case: str, baseline: str, a: dict, b: dict) -> str:
    """One case against one baseline: seconds cold / median warm of each, and the ratios."""
    warm_a, warm_b = median([r["seconds"] for r in a["warm"]]), median([r["seconds"] for r in b["warm"]])
    cold = a["cold"]["seconds"] / b["cold"]["seconds"]
    shown = lambda x, w: f"{x['cold']['seconds']:.2f} / {w:.2f}"  # noqa: E731
    label = case if baseline == PAIRS[case][1] else f"{case}, vs {baseline.removeprefix('df.write delta ')}"
    return f"{label:<24} {shown(a, warm_a):>22} {shown(b, warm_b):>22} {cold:>11.2f} {warm_a / warm_b:>11.2f}"


def render(report: dict) -> str:
    kind = report.get("kind", "uniform")
    lines = [f"target {report['rows']:,} rows, merge of {report['changed']:,} changed rows ({kind})", ""]
    lines.append(f"{'case':<24} {'run_load':>22} {'Delta API':>22} {'ratio cold':>11} {'ratio warm':>11}")
    for case, (ours, *theirs) in PAIRS.items():
        if case not in report["pairs"]:
            continue
        for baseline in theirs:
            if baseline in report["pairs"][case]:
                lines.append(
                    _pair_line(case, baseline, report["pairs"][case][ours], report["pairs"][case][baseline])
                )
        if case == "merge":
            a, b = report["pairs"][case][ours], report["pairs"][case][theirs[0]]
            lines.append(
                f"{'':<24} files removed: run_load {a['cold'].get('files_removed')}, "
                f"Delta API {b['cold'].get('files_removed')}, minimal {a.get('minimal_files')}"
            )
        else:
            written = ", ".join(
                f"{side} {r['cold'].get('files_added')}" for side, r in report["pairs"][case].items()
            )
            lines.append(f"{'':<24} files written: {written}")
    lines += ["", "(seconds: cold / median warm; ratio: run_load / Delta's own API)", ""]
    heads = ("batch rows", "Spark est. MiB", "delta-rs s", "delta-spark s", "py growth MiB", "JVM heap MiB")
    lines.append(" ".join(f"{h:>14}" for h in heads))
    for b in (report["batches"] or {}).get("batches", []):
        rs, ds = b.get("delta-rs"), b.get("delta-spark")
        est = b["spark_estimate_bytes"]
        cells = (
            f"{b['rows']:,}",
            "?" if est is None else f"{est / 2**20:.1f}",
            f"{median(rs['seconds']):.2f}" if rs else "-",
            f"{median(ds['seconds']):.2f}" if ds else "-",
            f"{ds['python_growth'] / 2**20:.0f}" if ds else "-",
            f"{ds['jvm_heap_peak'] / 2**20:.0f}" if ds else "-",
        )
        lines.append(" ".join(f"{c:>14}" for c in cells))
    where = "the driver's own JVM" if report.get("cluster") else "local mode's JVM, executors' work too"
    lines.append(f"(growth and heap: during the delta-spark load; heap: {where}; delta-rs's: bench.py's P4)")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
