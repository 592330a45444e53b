"""OpenLineage with apache-airflow-providers-openlineage installed: the facets the provider's extractor
gets from the operators for the source read and the Delta table written, and that they serialize."""

from __future__ import annotations

import importlib.util
import json
import os
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge.operators import DeltaMergeOperator
from airflow_provider_deltamerge.operators import lineage as lineage_module
from airflow_provider_deltamerge.operators.lineage import DeltaLineageMixin, lineage_enabled
from airflow_provider_deltamerge.operators.maintenance import DeltaMaintenanceOperator

from .conftest import DAGS_FOLDER

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

SECRET = "s3cr3t-token"
ORDERS = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"], "amount": [1.5, 2.5, 3.5]})


if issubclass(DeltaMergeOperator, DeltaLineageMixin):
    LineageMergeOperator = DeltaMergeOperator
else:  # until the mixin is among DeltaMergeOperator's bases, a subclass adds it as it will be there

    class LineageMergeOperator(DeltaLineageMixin, DeltaMergeOperator):
        """DeltaMergeOperator with the lineage mixin among its bases."""


@pytest.fixture
def enabled(monkeypatch):
    """OpenLineage enabled as a configured transport enables it (see test_lineage_is_enabled_by_...)."""
    monkeypatch.setattr(lineage_module, "lineage_enabled", lambda: True)


def completed(operator, returned):
    """The completion facets after `execute` returned `returned` (recorded as the wrapper records it)."""
    operator.record_lineage(returned)
    return operator.get_openlineage_facets_on_complete(None)


def parquet_files(table: str) -> dict[str, int]:
    return {f: os.path.getsize(os.path.join(table, f)) for f in os.listdir(table) if f.endswith(".parquet")}


def serialized(lineage) -> str:
    from openlineage.client.serde import Serde

    return json.dumps([Serde.to_dict(d) for d in [*lineage.inputs, *lineage.outputs]], sort_keys=True)


def extract(dag_run, task, state):
    """What the provider's extractor gets from the task, as its listener asks for it."""
    from airflow.models import TaskInstance
    from airflow.providers.openlineage.extractors import ExtractorManager
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        ti = session.scalar(
            select(TaskInstance).where(
                TaskInstance.run_id == dag_run.run_id, TaskInstance.task_id == task.task_id
            )
        )
        session.expunge(ti)
    return ExtractorManager().extract_metadata(dag_run, task, state, ti)


DAG_FILE = """
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators import DeltaMergeOperator
from airflow_provider_deltamerge.operators.lineage import DeltaLineageMixin

if issubclass(DeltaMergeOperator, DeltaLineageMixin):
    LineageMergeOperator = DeltaMergeOperator
else:

    class LineageMergeOperator(DeltaLineageMixin, DeltaMergeOperator):
        pass


START = datetime(2024, 1, 1, tzinfo=timezone.utc)

with DAG("deltamerge_test_lineage", schedule=None, start_date=START) as dag:
    LineageMergeOperator(
        task_id="load",
        source={{"format": "parquet", "path": {landing!r}, "options": {{"token": {secret!r}}}}},
        dataset={lake!r},
        table_name="Orders",
        write_disposition="merge",
        primary_key="id",
    )
"""


@pytest.fixture
def lineage_dag(tmp_path, airflow_db):
    """A DAG file in the dags folder (dag.test runs only DAGs it can find there) loading landed orders."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    pq.write_table(ORDERS, landing / "orders.parquet")
    path = DAGS_FOLDER / "deltamerge_test_lineage.py"
    path.write_text(DAG_FILE.format(landing=str(landing), lake=str(lake), secret=SECRET))
    spec = importlib.util.spec_from_file_location("deltamerge_test_lineage", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module.dag, str(landing), str(lake)
    path.unlink()


def test_a_merge_task_reports_source_table_schema_statistics_and_column_lineage(
    lineage_dag, enabled, monkeypatch
):
    from airflow.utils.state import TaskInstanceState

    executed = []  # the task runner executes a copy of the task: the one the listener is given
    record = DeltaLineageMixin.record_lineage
    monkeypatch.setattr(
        DeltaLineageMixin,
        "record_lineage",
        lambda task, result: (executed.append(task), record(task, result)),
    )
    dag, landing, lake = lineage_dag
    run = dag.test(logical_date=datetime(2024, 1, 2, tzinfo=timezone.utc))
    assert run.state == "success"
    [task] = executed

    started = extract(run, task, TaskInstanceState.RUNNING)
    assert [(d.namespace, d.name) for d in started.inputs] == [("file", landing)]
    [planned] = started.outputs
    assert (planned.namespace, planned.name) == ("file", f"{lake}/orders")
    assert set(planned.facets) == {"storage"} and planned.outputFacets == {}

    lineage = extract(run, task, TaskInstanceState.SUCCESS)
    [output] = lineage.outputs
    table = f"{lake}/orders"
    assert (output.namespace, output.name) == ("file", table)
    assert (output.facets["storage"].storageLayer, output.facets["storage"].fileFormat) == (
        "delta",
        "parquet",
    )
    assert [(f.name, f.type) for f in output.facets["schema"].fields] == [
        ("id", "long"),
        ("name", "string"),
        ("amount", "double"),
        ("_dlt_load_id", "string"),
        ("_dlt_id", "string"),
    ]
    assert output.facets["version"].datasetVersion == str(DeltaTable(table).version())
    statistics = output.outputFacets["outputStatistics"]
    files = parquet_files(table)
    assert (statistics.rowCount, statistics.fileCount, statistics.size) == (
        3,
        len(files),
        sum(files.values()),
    )
    columns = output.facets["columnLineage"].fields
    assert set(columns) == {"id", "name", "amount"}
    for column, lineage_of_column in columns.items():
        [source] = lineage_of_column.inputFields
        assert (source.namespace, source.name, source.field) == ("file", landing, column)
        assert [(t.type, t.subtype) for t in source.transformations] == [("DIRECT", "IDENTITY")]
    text = serialized(lineage)
    assert '"_schemaURL"' in text and SECRET not in text


def test_statistics_count_only_what_the_task_committed(tmp_path, enabled):
    """A load's bytes are those of the files its commit added; a backfill's, of all its commits."""
    table = str(tmp_path / "lake" / "events")
    operator = LineageMergeOperator(
        task_id="load", source="shop.events", dataset=str(tmp_path / "lake"), table_name="events"
    )
    metrics, written = [], []
    for version in range(3):
        before = parquet_files(table) if version else {}
        write_deltalake(table, pa.table({"id": list(range(version + 1))}), mode="append")
        added = {f: size for f, size in parquet_files(table).items() if f not in before}
        written.append(sum(added.values()))
        metrics.append(
            {"load_id": f"17000000{version}.0", "table_version": version, "numOutputRows": version + 1}
            | {"numTargetFilesAdded": len(added)}
        )
    last, chunks = completed(operator, metrics[-1]), completed(operator, metrics[1:])
    for lineage, loads, size in ((last, metrics[-1:], written[-1]), (chunks, metrics[1:], sum(written[1:]))):
        [output] = lineage.outputs
        statistics = output.outputFacets["outputStatistics"]
        assert statistics.rowCount == sum(m["numOutputRows"] for m in loads)
        assert statistics.fileCount == sum(m["numTargetFilesAdded"] for m in loads)
        assert statistics.size == size
        assert output.facets["version"].datasetVersion == "2"
        assert [(d.namespace, d.name) for d in lineage.inputs] == [("spark_catalog", "shop.events")]


def test_a_query_source_names_the_tables_it_reads_and_the_columns_it_renames(tmp_path, enabled):
    query = "SELECT o.id, o.amount AS Total, c.name FROM shop.orders o JOIN shop.customers c ON o.cid = c.id"
    operator = LineageMergeOperator(
        task_id="load", source={"sql": query}, dataset=str(tmp_path / "lake"), table_name="orders"
    )
    started = operator.get_openlineage_facets_on_start()
    assert sorted((d.namespace, d.name) for d in started.inputs) == [
        ("spark_catalog", "shop.customers"),
        ("spark_catalog", "shop.orders"),
    ]
    assert started.job_facets["sql"].query == query

    rows = {"id": [1], "total": [2.0], "name": ["x"], "_dlt_load_id": ["1.0"], "_dlt_id": ["a"]}
    write_deltalake(str(tmp_path / "lake" / "orders"), pa.table(rows))
    done = completed(operator, {"load_id": "1.0", "table_version": 0})
    columns = done.outputs[0].facets["columnLineage"].fields
    origins = {
        column: [(f.name, f.field, f.transformations[0].subtype) for f in item.inputFields]
        for column, item in columns.items()
    }
    assert origins == {
        "id": [("shop.orders", "id", "IDENTITY")],
        "total": [("shop.orders", "amount", None)],
        "name": [("shop.customers", "name", "IDENTITY")],
    }


def test_the_columns_an_scd2_load_makes_are_not_copied_from_the_source(tmp_path, enabled):
    disposition = {
        "disposition": "merge",
        "strategy": "scd2",
        "validity_column_names": ["Valid From", "valid_to"],
        "active_column_name": "is_current",
    }
    operator = LineageMergeOperator(
        task_id="load",
        source={"format": "parquet", "path": "/landing/planes"},
        dataset=str(tmp_path / "lake"),
        table_name="planes",
        write_disposition=disposition,
    )
    stored = ["tailnum", "seats", "valid_from", "valid_to", "is_current", "_dlt_load_id", "_dlt_id"]
    write_deltalake(str(tmp_path / "lake" / "planes"), pa.table({c: ["x"] for c in stored}))
    [output] = completed(operator, {"load_id": "1.0", "table_version": 0}).outputs
    assert set(output.facets["columnLineage"].fields) == {"tailnum", "seats"}


def test_an_object_store_table_is_named_by_bucket_and_key_and_a_callable_names_no_input():
    operator = LineageMergeOperator(
        task_id="load", source="my_package.sources:orders", dataset="s3://shop-lake/raw", table_name="Orders"
    )
    lineage = operator.get_openlineage_facets_on_start()
    assert lineage.inputs == []
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("s3://shop-lake", "raw/orders")]
    assert lineage.job_facets == {}


def test_a_table_the_worker_cannot_read_gives_names_without_failing(tmp_path, enabled):
    operator = LineageMergeOperator(
        task_id="load", source="shop.orders", dataset=str(tmp_path / "nowhere"), table_name="orders"
    )
    [output] = completed(operator, {"load_id": "1.0", "table_version": 4, "numOutputRows": 2}).outputs
    assert set(output.facets) == {"storage"}
    statistics = output.outputFacets["outputStatistics"]
    assert (statistics.rowCount, statistics.size) == (2, None)


def test_a_task_that_loaded_nothing_reports_the_table_as_it_is(tmp_path, enabled):
    write_deltalake(str(tmp_path / "lake" / "orders"), ORDERS, mode="overwrite")
    operator = LineageMergeOperator(
        task_id="load", source="shop.orders", dataset=str(tmp_path / "lake"), table_name="orders"
    )
    [output] = completed(operator, {"load_id": None, "table_version": 0}).outputs
    assert output.facets["version"].datasetVersion == "0" and "outputStatistics" not in output.outputFacets


def maintained_table(tmp_path):
    table = str(tmp_path / "lake" / "events")
    for day in range(3):
        write_deltalake(table, pa.table({"day": [day]}), mode="append")
    operator = DeltaMaintenanceOperator(
        task_id="maintain", dataset=str(tmp_path / "lake"), table_name="events"
    )
    return table, operator


def test_a_maintenance_task_reports_the_files_it_wrote(tmp_path, enabled):
    table, operator = maintained_table(tmp_path)
    metrics = operator.execute({})  # records what it returned, as every execute of these operators does
    lineage = operator.get_openlineage_facets_on_complete(None)
    assert lineage.inputs == []
    [output] = lineage.outputs
    statistics = output.outputFacets["outputStatistics"]
    assert (statistics.rowCount, statistics.fileCount) == (None, 1)
    assert statistics.size == sum(os.path.getsize(f) for f in DeltaTable(table).file_uris())
    # the version after the OPTIMIZE (a delta-rs OPTIMIZE claims the table in a commit of its own first)
    assert output.facets["version"].datasetVersion == str(metrics["table_version"])
    assert metrics["table_version"] == DeltaTable(table).version() >= 3
    assert DeltaTable(table).history(1)[0]["operation"] == "OPTIMIZE"
    assert "columnLineage" not in output.facets


def test_nothing_is_recorded_while_openlineage_is_disabled(tmp_path):
    assert not lineage_enabled()  # the provider is installed but no transport is configured
    _, operator = maintained_table(tmp_path)
    operator.execute({})
    [output] = operator.get_openlineage_facets_on_complete(None).outputs
    assert set(output.facets) == {"storage"} and output.outputFacets == {}


def test_lineage_is_enabled_by_a_configured_transport(monkeypatch):
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps({"type": "console"}))
    assert lineage_enabled() is True
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__DISABLED", "true")
    assert lineage_enabled() is False


FORKED_LINEAGE = """
import json, os, sys
import pyarrow as pa
from deltalake import write_deltalake
from airflow_provider_deltamerge.operators.maintenance import DeltaMaintenanceOperator

lake = sys.argv[1]
for day in range(3):
    write_deltalake(lake + "/events", pa.table({"day": [day]}), mode="append")
operator = DeltaMaintenanceOperator(task_id="maintain", dataset=lake, table_name="events")
operator.execute({})  # delta-rs (with Delta's jars: Spark) ran in this process, not in its fork
read, write = os.pipe()
if os.fork() == 0:  # as the provider's listener calls the completion method
    [output] = operator.get_openlineage_facets_on_complete(None).outputs
    os.write(write, json.dumps(sorted(output.facets) + sorted(output.outputFacets)).encode())
    os._exit(0)
os.close(write)
print("FACETS", os.read(read, 10000).decode(), flush=True)
"""


def test_the_completion_facets_come_from_a_fork_of_the_task_process(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "console"})}
    done = subprocess.run(
        [sys.executable, "-c", FORKED_LINEAGE, str(tmp_path / "lake")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # the child's loggers write to stdout too (with Delta's jars, py4j's as the JVM shuts down at exit)
    [facets] = [line for line in done.stdout.splitlines() if line.startswith("FACETS ")]
    assert json.loads(facets.removeprefix("FACETS ")) == ["schema", "storage", "version", "outputStatistics"]


def quality_facets(tmp_path, returned: dict):
    """The output table's facets once the operator returned `returned` (the data quality facet's own)."""
    write_deltalake(str(tmp_path / "lake" / "orders"), ORDERS, mode="overwrite")
    operator = LineageMergeOperator(
        task_id="load", source="shop.orders", dataset=str(tmp_path / "lake"), table_name="orders"
    )
    [output] = completed(operator, {"load_id": "1700000000.0", "table_version": 0, **returned}).outputs
    return output.facets


def test_expectations_become_the_output_tables_data_quality_assertions(tmp_path, enabled):
    checked = {
        "positive_amount": {"action": "drop", "passed": 2, "failed": 1},
        "has_id": {"action": "warn", "passed": 3, "failed": 0},
    }
    facets = quality_facets(tmp_path, {"expectations": checked, "rows_dropped": 1})
    assertions = facets["dataQualityAssertions"].assertions
    assert [(a.assertion, a.success) for a in assertions] == [("positive_amount", False), ("has_id", True)]
    assert "dataQualityAssertions" not in quality_facets(tmp_path, {})


def test_a_child_tables_expectations_become_assertions_under_its_name(tmp_path, enabled):
    child = {
        "expectations": {
            "positive_qty": {"action": "drop", "passed": 3, "failed": 1},
            "has_sku": {"action": "warn", "passed": 4, "failed": 0},
        },
        "rows_dropped": 1,
        "rows_quarantined": 0,
    }
    facets = quality_facets(tmp_path, {"child_expectations": {"orders__items": child}})
    assertions = facets["dataQualityAssertions"].assertions
    assert [(a.assertion, a.success) for a in assertions] == [
        ("orders__items.positive_qty", False),
        ("orders__items.has_sku", True),
    ]
