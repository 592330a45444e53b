"""What expectations cost a load: the same merge of ROWS rows (a parquet batch, keys half new, half in the
target) into a target of ROWS rows (delete-insert, a merge's default strategy; `--strategy upsert` for
the other), with three expectations (warn, drop, quarantine; 1% of the rows fail one of them) and
without, as the ratio of their times (docs/EXPECTATIONS.md). `--set-aside drop` makes
the third expectation a `drop`: the same rows left out, none kept for a quarantine table.

- COLD, what an Airflow task pays: each timed load in a fresh process (its Spark session started first,
  untimed), the two sides alternating;
- WARM: both sides in this process's one session, after one untimed run of each, interleaved.
Each result is verified: the table's rows, and the rows dropped and quarantined.

    python benchmarks/bench_expectations.py --out expectations.json
    python benchmarks/bench_expectations.py --set-aside drop                  # no quarantine table
    python benchmarks/bench_expectations.py --strategy upsert                 # no deduplication
    python benchmarks/bench_expectations.py --rows 2000 --repeat 1 --warm     # a tiny run
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NOTE, AMOUNT, COUNTRY = "note IS NOT NULL", "amount > 0", "country IN ('DE', 'FR', 'NL')"
EXPECTATIONS = {  # by what the third one does with the rows it sets aside
    "quarantine": {
        "warn": {"has_note": NOTE},
        "drop": {"positive_amount": AMOUNT},
        "quarantine": {"known_country": COUNTRY},
    },
    "drop": {"warn": {"has_note": NOTE}, "drop": {"positive_amount": AMOUNT, "known_country": COUNTRY}},
}
FAILING_EVERY = 100  # 1% of the rows fail one expectation, a third of them each


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000, help="rows in the batch and in the target")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each side per regime")
    regime = parser.add_mutually_exclusive_group()
    regime.add_argument("--cold", action="store_true", help="only the cold regime")
    regime.add_argument("--warm", action="store_true", help="only the warm regime")
    parser.add_argument(
        "--set-aside",
        choices=sorted(EXPECTATIONS),
        default="quarantine",
        help="what the third expectation does with its rows (default quarantine)",
    )
    parser.add_argument(
        "--strategy",
        choices=("delete-insert", "upsert"),
        default="delete-insert",
        help="the merge's strategy (default delete-insert, a merge's own default)",
    )
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--one", nargs=3, metavar=("WORK", "SIDE", "RUN"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def rows(first: int, count: int, failing: bool) -> list[dict]:
    """Rows with ids first..first+count-1; with `failing`, every FAILING_EVERY-th fails one expectation."""
    made = []
    for n in range(first, first + count):
        row = {"id": n, "amount": 1 + n % 97, "country": ("DE", "FR", "NL")[n % 3], "note": f"order {n}"}
        if failing and n % FAILING_EVERY == 0:
            kind = (n // FAILING_EVERY) % 3
            row.update([("note", None), ("amount", -row["amount"]), ("country", "XX")][kind : kind + 1])
        made.append(row)
    return made


def prepare(spark, work: Path, count: int) -> None:
    """The batch as parquet, and the seed rows of the target."""
    spark.createDataFrame(rows(count // 2, count, failing=True)).write.mode("overwrite").parquet(
        str(work / "batch")
    )
    spark.createDataFrame(rows(0, count, failing=False)).write.mode("overwrite").parquet(str(work / "seed"))


def one_load(
    spark,
    work: Path,
    side: str,
    run: str,
    count: int,
    aside: str = "quarantine",
    strategy: str = "delete-insert",
) -> dict:
    """One timed merge of the batch into a fresh copy of the target; its seconds and metrics."""
    from airflow_provider_deltamerge import run_load

    dataset = work / f"lake-{side}-{run}"
    shutil.rmtree(dataset, ignore_errors=True)
    arguments = {
        "dataset": str(dataset),
        "table_name": "orders",
        "write_disposition": {"disposition": "merge", "strategy": strategy},
        "primary_key": "id",
    }
    run_load(spark.read.parquet(str(work / "seed")), spark=spark, **arguments)
    expectations = EXPECTATIONS[aside] if side == "with" else None
    started = time.perf_counter()
    info = run_load(
        spark.read.parquet(str(work / "batch")), spark=spark, expectations=expectations, **arguments
    )
    seconds = time.perf_counter() - started
    verified = _verified(dataset, info.metrics, side, count, aside)
    shutil.rmtree(dataset, ignore_errors=True)
    return {"seconds": seconds, "verified": verified, "metrics": info.metrics}


def _verified(dataset: Path, metrics: dict, side: str, count: int, aside: str) -> bool:
    """The table holds the seed and the batch's new rows (with expectations: less those set aside), and
    the quarantine table the rows quarantined."""
    from deltalake import DeltaTable

    batch = rows(count // 2, count, failing=True)
    left_out = [r for r in batch if r["amount"] <= 0 or r["country"] not in ("DE", "FR", "NL")]
    new = [r for r in batch if r["id"] >= count and (side == "without" or r not in left_out)]
    stored = DeltaTable(str(dataset / "orders")).to_pyarrow_table(columns=["id"]).num_rows
    if side == "without":
        return stored == count + len(new)
    set_aside = metrics["rows_dropped"] + metrics.get("rows_quarantined", 0)
    if aside == "drop":
        quarantined = metrics.get("rows_quarantined", 0) == 0
    else:
        table = DeltaTable(str(dataset / "_dlt_quarantine_orders")).to_pyarrow_table(columns=["id"])
        quarantined = table.num_rows == metrics["rows_quarantined"] > 0
    return stored == count + len(new) and set_aside == len(left_out) and quarantined


def warm(spark, work: Path, repeat: int, count: int, aside: str, strategy: str) -> dict:
    for side in ("without", "with"):  # untimed first runs
        one_load(spark, work, side, "warmup", count, aside, strategy)
    times: dict[str, list[float]] = {"without": [], "with": []}
    verified = True
    for n in range(repeat):
        for side in ("without", "with") if n % 2 == 0 else ("with", "without"):
            result = one_load(spark, work, side, str(n), count, aside, strategy)
            times[side].append(result["seconds"])
            verified &= result["verified"]
    return _summary(times, verified)


def cold(work: Path, repeat: int, count: int, aside: str, strategy: str) -> dict:
    times: dict[str, list[float]] = {"without": [], "with": []}
    verified = True
    for n in range(repeat):
        for side in ("without", "with") if n % 2 == 0 else ("with", "without"):
            command = [
                sys.executable,
                __file__,
                "--rows",
                str(count),
                "--set-aside",
                aside,
                "--strategy",
                strategy,
            ]
            command += ["--one", str(work), side, f"cold{n}"]
            result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
            times[side].append(result["seconds"])
            verified &= result["verified"]
    return _summary(times, verified)


def _summary(times: dict[str, list[float]], verified: bool) -> dict:
    medians = {side: statistics.median(values) for side, values in times.items()}
    fastest = {side: min(values) for side, values in times.items()}
    return {
        "seconds": times,
        "median": medians,
        "ratio": medians["with"] / medians["without"],
        "min": fastest,
        "ratio_of_min": fastest["with"] / fastest["without"],
        "verified": verified,
    }


def spark_session():
    from airflow_provider_deltamerge import default_session

    return default_session()


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    if args.one:  # a cold run's child process: one load, its result as JSON on stdout
        work, side, run = args.one
        result = one_load(spark_session(), Path(work), side, run, args.rows, args.set_aside, args.strategy)
        print(json.dumps({"seconds": result["seconds"], "verified": result["verified"]}))
        return result
    work = Path(tempfile.mkdtemp(prefix="bench-expectations-"))
    from pyspark.sql import SparkSession

    own_session = SparkSession.getActiveSession() is None  # a caller's session (a test's) is left running
    try:
        spark = spark_session()
        prepare(spark, work, args.rows)
        report: dict = {
            "rows": args.rows,
            "repeat": args.repeat,
            "set_aside": args.set_aside,
            "strategy": args.strategy,
        }
        if not args.cold:
            report["warm"] = warm(spark, work, args.repeat, args.rows, args.set_aside, args.strategy)
        if own_session:  # an idle session's JVM still takes CPU time from the cold runs' processes
            spark.stop()
        if not args.warm:
            report["cold"] = cold(work, args.repeat, args.rows, args.set_aside, args.strategy)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"expectations (warn, drop, {args.set_aside}) on a merge ({args.strategy}) of {args.rows:,} rows "
        f"into {args.rows:,} (1% failing), median seconds"
    )
    for regime in ("cold", "warm"):
        if regime in report:
            found = report[regime]
            print(
                f"  {regime}: without {found['median']['without']:.2f}, with {found['median']['with']:.2f}, "
                f"ratio {found['ratio']:.2f}; fastest {found['min']['without']:.2f} and "
                f"{found['min']['with']:.2f}, ratio {found['ratio_of_min']:.2f} "
                f"({'verified' if found['verified'] else 'NOT VERIFIED'})"
            )
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
