"""The example DAG dags_examples/nycflights13_flights_catalog.py run with dag.test(), in a process of its
own: its tasks start a Spark session with Hive support (the DAG's spark_conf: a Derby metastore under
DELTAMERGE_DEMO_DIR), which must not be the test session's, and Derby takes one JVM per folder.

    python tests/catalog_dag_job.py ROOT

ROOT becomes AIRFLOW_HOME (a fresh SQLite metadata database) and DELTAMERGE_DEMO_DIR (the landing data,
the warehouse, the metastore); DELTA_SPARK_JARS gives Delta's jars. Runs two weeks and a re-run of the
first, and prints one JSON object of what it observed; tests/catalog/test_catalog_example_dag.py
asserts on it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

# The repository, not this folder, on the path: tests/airflow would shadow Airflow's own package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

ROOT = Path(sys.argv[1]).resolve()
DAGS = ROOT / "dags"
os.environ.update(
    {
        "AIRFLOW_HOME": str(ROOT / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "DELTAMERGE_DEMO_DIR": str(ROOT / "demo"),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
)
SUNDAY = datetime(2013, 1, 13, tzinfo=timezone.utc)
EXAMPLES = Path(_HERE).parent / "dags_examples"


def main() -> dict:
    from airflow.utils import db

    DAGS.mkdir(parents=True)
    for name in ("nycflights13_flights_catalog.py", "nycflights13_landing.py", "run_demo.py"):
        shutil.copy(EXAMPLES / name, DAGS / name)  # as a user copies them
    db.resetdb()
    sys.path.insert(0, str(DAGS))
    import nycflights13_landing
    import run_demo

    nycflights13_landing.land(os.environ["DELTAMERGE_DEMO_DIR"])
    dag = run_demo.load_dag(DAGS, "nycflights13_flights_catalog.py")
    seen: dict = {"runs": []}
    for sunday in (SUNDAY, SUNDAY + timedelta(weeks=1), SUNDAY):  # two weeks, then the first again
        run = dag.test(logical_date=sunday, run_conf=run_demo.week_conf(sunday))
        seen["runs"].append({"state": str(run.state), "metrics": run_demo.return_value(run, "merge_flights")})
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()  # the tasks' session: the DAG's metastore
    seen["tables"] = sorted(r.tableName for r in spark.sql("SHOW TABLES IN nycflights13").collect())
    seen["rows"] = spark.table("nycflights13.flights").count()
    entry = spark.sql("DESCRIBE TABLE EXTENDED nycflights13.flights").collect()
    seen["location"] = next(row[1] for row in entry if row[0] == "Location")
    seen["recorded"] = spark.table("nycflights13._dlt_loads").count()
    return seen


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(), default=str), flush=True)
    os._exit(0)
