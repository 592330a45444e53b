"""The upsert benchmark in two regimes: run_load beside the embedded floor, Delta's own MERGE on Spark
and dlt. By default both regimes run and each table says which it is; `--cold` runs only the cold one,
`--warm` only the warm one.

COLD (bench_cold.py), what an Airflow task pays: each timed load in a fresh process, its Spark session
start timed and reported apart, its Spark jobs and SQL executions counted: P1 (`--p1`), the initial
load of P1's target (P7, with the key-ordered layout's cost), the operator's whole execute (task wall
time), P2 (`--p2`) fresh and through a warm Spark Connect server, and P8 (`--small-loads`); run_load in
P1, P7 and P2 also in a JVM compiling with C1 alone, reported beside the default.

WARM, per size, interleaved (the order rotates each repetition, each run on a fresh copy of one target), after
one untimed run of each side that shares this process's Spark session (`--warmup`):
- run_load with each writer available (delta-rs always; delta-spark when Delta's jars are given);
- the embedded floor: Spark builds the same change set (with the system columns), `toArrow()`, and a
  hand-written delta-rs upsert merge;
- a hand-written `DeltaTable.merge` on Spark, when Delta's jars are given (`--delta-jars`);
- dlt's Delta upsert of the same rows into its own table, when dlt is available (`--dlt-python`, or
  `--dlt-venv DIR`, created with pinned dlt when missing).
Every result table is verified (row count, sampled updated, inserted and untouched rows). Printed: a
table of median/min/max seconds, peak RSS of the process tree, files added/removed, run_load's driver
growth per size (measured once in a fresh process, memory_probe.py), and the P1-P6 ratios with
PASS/FAIL; `--out` writes it all as JSON.

    python benchmarks/bench.py --dlt-venv .venv-dlt --out bench.json        # both regimes, full sizes
    python benchmarks/bench.py --cold --dlt-venv .venv-dlt                  # the cold regime only
    python benchmarks/bench.py --quick
    python benchmarks/bench.py --sizes 1000000:100000:uniform --repeat 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_cold  # noqa: E402
import bench_cold_report  # noqa: E402
from bench_report import ratios, render  # noqa: E402
from bench_sides import Sides, spark_session  # noqa: E402
from workload import Size  # noqa: E402

FULL = (
    "1000000:100000:uniform",
    "10000000:1000000:uniform",
    "10000000:100000:clustered",
    "5000000:100000:clustered",  # with 10M/100k clustered: the same change into a table twice as large
)
QUICK = ("200000:20000:uniform", "200000:20000:clustered", "400000:20000:clustered")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", nargs="+", help="target:changed[:uniform|clustered] ...")
    parser.add_argument("--quick", action="store_true", help=f"small sizes: {' '.join(QUICK)}")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--warmup", type=int, default=1, help="untimed runs of each in-process side per size, first"
    )
    parser.add_argument("--dlt-python", help="a Python with dlt[deltalake] installed")
    parser.add_argument("--dlt-venv", help="a virtualenv for dlt, created (pinned) when missing")
    parser.add_argument("--delta-jars", help="local Delta jars (comma-separated): adds the Spark sides")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument(
        "--memory-probe",
        choices=("every", "largest"),
        default="every",
        help="measure driver growth for every size, or only the one with the largest change set",
    )
    regime = parser.add_mutually_exclusive_group()
    regime.add_argument("--cold", action="store_true", help="only the cold regime (fresh processes)")
    regime.add_argument("--warm", action="store_true", help="only the warm regime (one process)")
    parser.add_argument("--p1", default=bench_cold.P1, help="cold P1 upsert (and P7, task wall time)")
    parser.add_argument("--p2", default=bench_cold.P2, help="cold P2 upsert, fresh and through Connect")
    parser.add_argument("--small-loads", type=int, default=bench_cold.SMALL_LOADS, help="P8's loads")
    parser.add_argument(
        "--no-connect", dest="connect", action="store_false", help="skip the Spark Connect side"
    )
    parser.add_argument(
        "--connect-warmups",
        type=int,
        default=bench_cold.CONNECT_WARMUPS,
        help="untimed client loads that warm the Connect server before the timed ones",
    )
    parser.add_argument(
        "--no-jvm-archive",
        dest="jvm_archive",
        action="store_false",
        help="cold: start every session without the JVM class archive (by default it is made first)",
    )
    parser.add_argument(
        "--session-conf",
        nargs="*",
        type=lambda text: tuple(text.split("=", 1)),
        metavar="KEY=VALUE",
        help="extra Spark settings for the cold runs' local sessions (to weigh a setting's trade-off)",
    )
    parser.add_argument("--out", help="write the results as JSON here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    work = Path(tempfile.mkdtemp(prefix="deltamerge-bench-"))
    report = {}
    try:
        if not args.warm:  # first, while no Spark of this process takes memory beside the fresh ones
            cold = bench_cold.run(work, args, dlt_python(args))
            report["cold"] = {**cold, "ratios": bench_cold_report.ratios(cold)}
        if not args.cold:
            report.update(warm(args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if "sizes" in report:
        print(render(report))
    if "cold" in report:
        print(bench_cold_report.render(report["cold"]))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    return report


def warm(args: argparse.Namespace, work: Path) -> dict:
    """The warm regime: every side in this process's one Spark session."""
    sizes = [Size.parse(s) for s in (args.sizes or (QUICK if args.quick else FULL))]
    spark = spark_session(args.driver_memory, args.delta_jars)
    sides = Sides(spark, work, dlt_python(args), args.driver_memory, probed(args.memory_probe, sizes))
    results = [sides.run_size(size, args.repeat, args.warmup) for size in sizes]
    return {"sizes": results, "ratios": ratios(results), "sides": sides.available()}


def probed(choice: str, sizes: list[Size]):
    """Which sizes get their driver growth measured."""
    largest = max(sizes, key=lambda s: (s.changed_rows, s.target_rows))
    return (lambda size: True) if choice == "every" else (lambda size: size == largest)


def dlt_python(args: argparse.Namespace) -> str | None:
    if args.dlt_python:
        return args.dlt_python
    if not args.dlt_venv:
        return None
    from bench_sides import dlt_virtualenv

    return dlt_virtualenv(Path(args.dlt_venv))


if __name__ == "__main__":
    main()
