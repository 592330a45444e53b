"""A table named through a real Hive metastore (`sales.orders`), loaded by DeltaMergeHook with spark-submit
to local[2]: the submitted driver has Hive support on the test's own metastore and Delta's jars, asks the
metastore where the table is, creates and registers it; the task reads the load's record from `dataset`.

Each load is read back in a process of its own with Hive support on the same Derby folder
(tests/catalog_job.py): Derby takes one JVM at a time, and the job's driver has exited by then. Registering
a Delta table needs Delta's jars: those tests run where DELTA_SPARK_JARS names them, with each writer; the
refusal of a catalog table without a dataset needs no jars and runs always.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge.delta.store import read_load
from airflow_provider_deltamerge.errors import ConfigError, JobFailedError
from airflow_provider_deltamerge.hooks import DeltaMergeHook
from airflow_provider_deltamerge.model.request import LoadRequest
from tests.catalog.test_hive_catalog import WRITERS, needs_jars, run_job
from tests.hive_metastore import hive_conf, with_hive

from .submitting import CREDENTIALS, set_connection

pytestmark = pytest.mark.spark

FIRST = [{"id": 1, "v": "a", "n": 1}, {"id": 2, "v": "b", "n": 1}]
SECOND = [{"id": 2, "v": "B", "n": 2}, {"id": 3, "v": "c", "n": 2}]  # an update and an insert


def orders_request(tmp_path: Path, batch: str, rows: list[dict], writer: str, **overrides) -> LoadRequest:
    """An upsert of `rows` (landed as parquet) into sales.orders, incremental on `n`."""
    folder = tmp_path / "landing" / batch
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "part.parquet")
    arguments = {
        "source": {"format": "parquet", "path": str(folder)},
        "table_name": "sales.orders",
        "dataset": str(tmp_path / "lake" / "sales"),  # where the new table is created, and its record read
        "create_schema": True,
        "write_disposition": {"disposition": "merge", "strategy": "upsert"},
        "primary_key": "id",
        "incremental": {"cursor_path": "n"},
        "backend": writer,
        **overrides,
    }
    return LoadRequest.create(**arguments)


def table_rows(location: str) -> list[dict]:
    """The table's rows as delta-rs reads its folder, without the system columns."""
    rows = DeltaTable(location).to_pyarrow_table().to_pylist()
    return sorted(
        ({k: v for k, v in r.items() if not k.startswith("_dlt")} for r in rows), key=lambda r: r["id"]
    )


@needs_jars
@pytest.mark.parametrize("writer", WRITERS)
def test_spark_submit_creates_registers_and_merges_into_a_metastore_table(
    tmp_path, monkeypatch, submit_env, submit_conf, capfd, writer
):
    metastore = tmp_path / "hive"
    set_connection(monkeypatch, "spark_local", conn_type="spark", host="local[2]")
    hook = DeltaMergeHook("spark_local", spark_conf=with_hive(submit_conf, str(metastore)))
    location = str(tmp_path / "lake" / "sales" / "orders")
    where = {"catalog_table": "sales.orders", "table_location": location}  # as a load in process reports

    first = orders_request(tmp_path, "first", FIRST, writer)
    metrics = hook.run(first)
    assert metrics == {**read_load(first.dataset, metrics["load_id"])["metrics"], **where}
    assert metrics["writer"] == writer and metrics["numTargetRowsInserted"] == 2
    seen = run_job("read_back", metastore, writer)
    assert seen["tables"] == ["_dlt_loads", "_dlt_pipeline_state", "orders"]
    assert seen["entry"]["Provider"] == "delta" and seen["entry"]["Location"] == f"file:{location}"
    assert seen["rows"] == FIRST == table_rows(location)
    assert seen["loads"] == 1

    second = orders_request(tmp_path, "second", SECOND, writer)
    then = hook.run(second)
    assert then["load_id"] != metrics["load_id"]
    assert then == {**read_load(second.dataset, then["load_id"])["metrics"], **where}
    assert (then["numTargetRowsUpdated"], then["numTargetRowsInserted"]) == (1, 1)
    seen = run_job("read_back", metastore, writer)
    assert seen["tables"] == ["_dlt_loads", "_dlt_pipeline_state", "orders"]
    assert seen["rows"] == [FIRST[0], *SECOND] == table_rows(location)
    assert seen["loads"] == 2

    elsewhere = orders_request(tmp_path, "third", SECOND, writer, dataset=str(tmp_path / "other"))
    with pytest.raises(JobFailedError) as refused:  # the task would read its record where it is not
        hook.run(elsewhere)
    assert "CatalogError: table 'sales.orders': lives at" in refused.value.log_tail
    assert "not under the dataset" in refused.value.log_tail
    assert DeltaTable(location).version() == 1 and not (tmp_path / "other").exists()  # nothing written

    output = "".join(capfd.readouterr())
    assert "Spark-Submit cmd" in output and "load of orders | record  | load " in output
    assert not [secret for secret in CREDENTIALS.values() if secret in output]


def test_a_catalog_table_without_a_dataset_is_refused_before_submitting(tmp_path, monkeypatch, capfd):
    set_connection(monkeypatch, "spark_local", conn_type="spark", host="local[2]")
    hook = DeltaMergeHook("spark_local", spark_conf=hive_conf(str(tmp_path / "hive")))
    request = orders_request(tmp_path, "first", FIRST, "delta-rs", dataset=None)
    with pytest.raises(ConfigError) as refused:
        hook.run(request)
    assert refused.value.argument == "dataset"
    assert "is required to load catalog table 'sales.orders' with spark-submit" in str(refused.value)
    assert "load it in process or over Spark Connect" in str(refused.value)
    assert hook._submit_hook is None  # nothing submitted
    assert "Spark-Submit cmd" not in "".join(capfd.readouterr())
    assert [p.name for p in tmp_path.iterdir()] == ["landing"]  # no metastore, warehouse or table
