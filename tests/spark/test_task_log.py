"""A load's task log: one line per step saying what it did and how long it took, sources named with
their credentials masked. (The spark-submit job's lines reaching the task log: test_hook_spark.py.)"""

from __future__ import annotations

import logging
import re

import pytest

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.load import run_request
from airflow_provider_deltamerge.model.request import LoadRequest

pytestmark = pytest.mark.spark

STEP = re.compile(r"^load of (\w+) \| (\w+) +\| (.*) \(\d+\.\d\d s\)$")


def steps(caplog) -> dict[str, str]:
    lines = [
        STEP.match(r.getMessage()) for r in caplog.records if r.name == "airflow_provider_deltamerge.load"
    ]
    return {m.group(2): m.group(3) for m in lines if m}


def test_every_step_of_a_load_is_one_line_with_what_it_did(spark, dataset, caplog, each_writer):
    run_load([{"id": n} for n in range(5)], spark=spark, dataset=dataset, table_name="Orders")
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge")
    batch = [{"id": 3, "v": 1}, {"id": 3, "v": 2}, {"id": 9, "v": 3}]
    info = run_load(
        batch, spark=spark, dataset=dataset, table_name="Orders", write_disposition="merge", primary_key="id"
    )

    logged = steps(caplog)
    assert list(logged) == ["store", "source", "window", "stage", "plan", "commit", "record"]
    assert logged["store"] == f"1 loads recorded in {dataset}; 0 committed unrecorded"
    assert logged["source"] == "data handed to run_load (list)"
    assert logged["window"] == "none: the load is not incremental"
    assert logged["stage"] == "3 rows read, 2 staged (dedup, hard deletes, checks)"
    assert logged["plan"].startswith("delete-insert: delete target rows matching the staged primary key")
    assert "merge on " in logged["plan"] and "`id`" in logged["plan"]
    assert logged["commit"].startswith(f"version {info.table_version}: 2 inserted, 0 updated, 1 deleted")
    assert logged["record"] == f"load {info.load_id} recorded in _dlt_loads"


def test_a_source_is_named_without_its_credentials(spark, tmp_path, caplog):
    landing = tmp_path / "landing"
    spark.createDataFrame([(1,)], "id int").write.parquet(str(landing))
    options = {"password": "opt-secret-123", "mergeSchema": "true"}
    request = LoadRequest.create(
        source={"format": "parquet", "path": str(landing), "options": options},
        dataset=str(tmp_path / "lake"),
        table_name="t",
    )
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge")
    run_request(request, spark)
    assert steps(caplog)["source"] == f"parquet reader at {landing}"
    assert "opt-secret-123" not in caplog.text
