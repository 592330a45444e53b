"""The weekly catchup at scale: 52 weekly windows upserted into one table, through DeltaBackfillOperator,
through a mapped DeltaMergeOperator (one task instance per window) and by dlt, each window exactly once.

    python benchmarks/catchup.py --rows 10000000 --writer delta-rs --dlt-venv .venv-dlt --out catchup.json
    python benchmarks/catchup.py --rows 520000 --writer delta-spark \
        --delta-jars "$(ls /path/to/delta/*.jar | paste -sd, -)" --dlt-venv .venv-dlt

The landing (benchmarks/catchup_work.py): one Parquet file of events per week, `--rows` keys in all
(the table's final rows), `--per-window` events per window (by default a fifth of them update keys of
earlier weeks). Each side starts from an empty table in a fresh process of its own:
- backfill: a real Airflow (a fresh AIRFLOW_HOME on SQLite, `dag.test()`) runs catchup_dags.py's
  DeltaBackfillOperator over the 52 weeks; a window's seconds: its chunk's load;
- mapped: the same Airflow runs DeltaMergeOperator mapped over the 52 windows, one at a time, in the
  order Airflow picks (not week order, so the upsert is sequenced by `ts`); a window's seconds: its task
  instance's duration, as Airflow records it;
- dlt: one pipeline run per window (dlt_catchup.py, in dlt's own virtualenv: `--dlt-python`, or
  `--dlt-venv DIR`, created pinned when missing), into its filesystem destination's Delta table.
The first window of each side is its cold one (its Spark session, or dlt's first run, starts there).
After each side its table is checked against the state the landing must leave (rows, distinct ids, rows
per week, a checksum, every row's values; for our sides also `_dlt_loads`: one load per window); a side
that fails the check fails the benchmark. Printed: per side min / median / max seconds per window, the
first window, the total, and ratios to dlt; `--out` writes it all as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import catchup_work as work_model  # noqa: E402

HERE = Path(__file__).resolve().parent
SIDES = ("backfill", "mapped", "dlt")
DAGS = {"backfill": "catchup_backfill", "mapped": "catchup_mapped"}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000, help="keys in all: the table's final rows")
    parser.add_argument("--per-window", type=int, help="events per window (default: rows / 52 / 0.8)")
    parser.add_argument("--writer", choices=("delta-rs", "delta-spark"), default="delta-rs")
    parser.add_argument("--delta-jars", default=os.environ.get("DELTA_SPARK_JARS"), help="local Delta jars")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--dlt-python", help="a Python with dlt[deltalake] installed")
    parser.add_argument("--dlt-venv", help="a virtualenv for dlt, created (pinned) when missing")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--side", help=argparse.SUPPRESS)  # a child process's one side
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rows < work_model.WINDOWS:
        parser.error(f"--rows {args.rows}: at least one key per window ({work_model.WINDOWS})")
    if args.per_window is None:
        args.per_window = work_model.default_per_window(args.rows)
    if args.writer == "delta-spark" and not args.delta_jars:
        parser.error(
            "--writer delta-spark needs Delta's jars: --delta-jars or DELTA_SPARK_JARS (local files)"
        )
    if "dlt" in args.sides and not args.side and not (args.dlt_python or args.dlt_venv):
        parser.error(
            "the dlt side needs --dlt-python or --dlt-venv (or leave it out: --sides backfill mapped)"
        )
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    if args.side:
        result = run_airflow_side(args.side, Path(args.work), args)
        (Path(args.work) / f"{args.side}.json").write_text(json.dumps(result))
        return result
    work = Path(tempfile.mkdtemp(prefix="deltamerge-catchup-"))
    try:
        report = run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(render(report))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    failed = [side for side, result in report["sides"].items() if result["problems"]]
    if failed:
        raise SystemExit(f"the table of {', '.join(failed)} is not the landing's expected state; see above")
    return report


def run(args: argparse.Namespace, work: Path) -> dict:
    started = time.perf_counter()
    events = work_model.write_landing(work / "landing", args.rows, args.per_window)
    want = work_model.expected(args.rows, args.per_window)
    print(
        f"landing: {events:,} events in {work_model.WINDOWS} windows ({time.perf_counter() - started:.1f} s)"
    )
    report = {
        "rows": args.rows,
        "per_window": args.per_window,
        "events": events,
        "writer": args.writer,
        "expected": {k: v for k, v in want.items() if k != "rows_per_week"},
        "sides": {},
    }
    for side in args.sides:
        print(f"{side}: running", flush=True)
        result = run_dlt(args, work) if side == "dlt" else child(args, side, work)
        result["problems"] = checked(side, result, want)
        report["sides"][side] = result
        summed = summary(result["seconds"], result["run_order"][0])
        shown = ", ".join(f"{name} {value:.2f}" for name, value in summed.items())
        print(f"{side}: {shown} s; {'OK' if not result['problems'] else result['problems']}", flush=True)
        if args.out:  # what is done so far, should a later side not finish
            Path(args.out).write_text(json.dumps(report, indent=2))
    return report


def child(args: argparse.Namespace, side: str, work: Path) -> dict:
    """One Airflow side in a fresh process (its own Spark, its own AIRFLOW_HOME)."""
    command = [sys.executable, __file__, "--side", side, "--work", str(work), "--rows", str(args.rows)]
    command += [
        "--per-window",
        str(args.per_window),
        "--writer",
        args.writer,
        "--driver-memory",
        args.driver_memory,
    ]
    if args.delta_jars:
        command += ["--delta-jars", args.delta_jars]
    log = work / f"{side}.log"
    with log.open("w") as output:
        done = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, check=False)
    if done.returncode:
        sys.stderr.write(log.read_text()[-6000:])
        raise SystemExit(f"the {side} side failed (exit {done.returncode}); its log's end is above")
    return json.loads((work / f"{side}.json").read_text())


def run_airflow_side(side: str, work: Path, args: argparse.Namespace) -> dict:
    """In the child: a fresh Airflow, the side's DAG run once over the 52 weeks with dag.test()."""
    home = Path(tempfile.mkdtemp(prefix=f"deltamerge-catchup-{side}-"))
    (home / "dags").mkdir()
    shutil.copy(HERE / "catchup_dags.py", home / "dags" / "catchup_dags.py")
    os.environ.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__LOGGING__LOGGING_LEVEL=os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING"),
        SPARK_LOCAL_IP="127.0.0.1",
        CATCHUP_LAKE=str(work / "lake"),
        CATCHUP_LANDING=str(work / "landing"),
        CATCHUP_WRITER=args.writer,
        CATCHUP_DELTA_JARS=args.delta_jars or "",
        CATCHUP_DRIVER_MEMORY=args.driver_memory,
    )
    os.environ.pop("DELTAMERGE_CONN_ID", None)
    try:
        from airflow.utils import db

        db.resetdb()
        dag = load_dags(home / "dags" / "catchup_dags.py")[DAGS[side]]
        first, _ = work_model.window_bounds(0)
        _, last = work_model.window_bounds(work_model.WINDOWS - 1)
        started = time.perf_counter()
        run = dag.test(logical_date=None, run_conf={"start": first.isoformat(), "end": last.isoformat()})
        wall = time.perf_counter() - started
        if run.state != "success":
            raise SystemExit(f"{dag.dag_id} run {run.run_id} ended {run.state}; see the log above")
        if side == "backfill":
            seconds, order = chunk_seconds(run), list(range(work_model.WINDOWS))
        else:
            seconds, order = mapped_seconds(run)
        path = str(work / "lake" / DAGS[side] / "events")
        return {"seconds": seconds, "run_order": order, "wall_seconds": wall, "path": path}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def load_dags(path: Path) -> dict:
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"catchup_backfill": module.backfill_dag, "catchup_mapped": module.mapped_dag}


def chunk_seconds(run) -> list[float]:
    """The backfill task's per-chunk seconds, from its XCom return value (the chunks' metrics)."""
    sys.path.insert(0, str(HERE.parent / "dags_examples"))
    from run_demo import return_value

    return [chunk["seconds"] for chunk in return_value(run, "backfill")]


def mapped_seconds(run) -> tuple[list[float], list[int]]:
    """Each mapped task instance's duration, as Airflow recorded it, in window (map index) order; and the
    map indexes in the order Airflow ran them (not theirs)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.map_index, TaskInstance.duration, TaskInstance.start_date)
            .where(TaskInstance.dag_id == run.dag_id, TaskInstance.run_id == run.run_id)
            .where(TaskInstance.task_id == "load_window")
            .order_by(TaskInstance.map_index)
        ).all()
    order = [index for index, _, _ in sorted(rows, key=lambda row: row[2])]
    return [float(duration) for _, duration, _ in rows], order


def run_dlt(args: argparse.Namespace, work: Path) -> dict:
    from bench import dlt_python

    command = [dlt_python(args), str(HERE / "dlt_catchup.py"), str(work / "landing"), str(work / "dlt")]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.stderr.write(done.stderr[-6000:])
        raise SystemExit(f"the dlt side failed (exit {done.returncode}); its stderr's end is above")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        **result,
        "run_order": list(range(work_model.WINDOWS)),
        "wall_seconds": time.perf_counter() - started,
    }


def checked(side: str, result: dict, want: dict) -> list[str]:
    """What is wrong with a side's table (and, for ours, its load records); empty when all is right."""
    from deltalake import DeltaTable

    table = DeltaTable(result["path"]).to_pyarrow_table(columns=["id", "week", "s"])
    got = work_model.observed(table)
    result["table"] = {k: v for k, v in got.items() if k != "rows_per_week"}
    problems = work_model.mismatches(want, got)
    if len(result["seconds"]) != work_model.WINDOWS:
        problems.append(f"{len(result['seconds'])} windows timed, not {work_model.WINDOWS}")
    if side == "dlt":
        if result["loads"] != work_model.WINDOWS:
            problems.append(f"dlt completed {result['loads']} load packages, not {work_model.WINDOWS}")
        return problems
    return problems + load_record_problems(Path(result["path"]).parent)


def load_record_problems(dataset: Path) -> list[str]:
    """Our sides' `_dlt_loads`: exactly one completed load of the table per window."""
    from datetime import datetime

    from deltalake import DeltaTable

    loads = DeltaTable(str(dataset / "_dlt_loads")).to_pyarrow_table().to_pylist()
    windows = sorted(
        (datetime.fromisoformat(r["window_start"]), datetime.fromisoformat(r["window_end"]))
        for r in loads
        if r["table_name"] == "events"
    )
    wanted = [work_model.window_bounds(week) for week in range(work_model.WINDOWS)]
    if windows == wanted:
        return []
    return [f"_dlt_loads holds {len(windows)} loads of events, not one per window of the {len(wanted)}"]


def summary(seconds: list[float], first: int = 0) -> dict:
    """Min, median, max and total of a side's windows, and its first window's (the cold one)."""
    return {
        "first": seconds[first],
        "min": min(seconds),
        "median": statistics.median(seconds),
        "max": max(seconds),
        "total": sum(seconds),
    }


def render(report: dict) -> str:
    lines = [
        f"weekly catchup: {work_model.WINDOWS} windows, {report['rows']:,} rows in the table, "
        f"{report['per_window']:,} events per window ({report['events']:,} in all), "
        f"writer {report['writer']}",
        "",
        f"{'side':<10} {'first':>8} {'min':>8} {'median':>8} {'max':>8} {'total':>9} {'wall':>9} "
        f"{'x dlt':>7} {'x dlt med':>9}  table",
    ]
    dlt = report["sides"].get("dlt")
    base = summary(dlt["seconds"]) if dlt else None
    for side, result in report["sides"].items():
        s = summary(result["seconds"], result["run_order"][0])
        result["summary"] = s
        ratio = f"{s['total'] / base['total']:.2f}" if base else "-"
        ratio_median = f"{s['median'] / base['median']:.2f}" if base else "-"
        verdict = "OK" if not result["problems"] else "WRONG: " + "; ".join(result["problems"])
        cells = (s["first"], s["min"], s["median"], s["max"])
        lines.append(
            f"{side:<10} "
            + " ".join(f"{c:>8.2f}" for c in cells)
            + f" {s['total']:>9.1f} {result['wall_seconds']:>9.1f} {ratio:>7} {ratio_median:>9}  {verdict}"
        )
    for side, result in report["sides"].items():
        order = result.get("run_order", [])
        if order != sorted(order):
            moved = sum(1 for place, index in enumerate(order) if place != index)
            lines.append(
                f"{side}: Airflow ran {moved} of its windows out of week order (first: week {order[0]})"
            )
    lines += [
        "",
        "(seconds per window; first = the cold window, the first to run; total = the windows' sum;",
        " wall = the whole side, Airflow's or dlt's start included;",
        " x dlt = total / dlt's total, x dlt med = median / dlt's median)",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
