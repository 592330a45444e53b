"""A local table both writers commit to stays readable by Spark.

Spark writes a local table through Hadoop's checksummed file system (a hidden `.<file>.crc` beside each
file, checked on every read); delta-rs rewrites `_delta_log/_last_checkpoint` at each checkpoint it
makes. Spark must still read every file of the log, and the table, afterwards.
"""

from __future__ import annotations

import json
import os

import pytest
from deltalake import DeltaTable
from py4j.protocol import Py4JJavaError

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.delta.maintenance import maintain_table

pytestmark = [pytest.mark.spark]

INTERVAL = {"delta.checkpointInterval": 2}  # every writer checkpoints the table every other commit


@pytest.fixture(autouse=True)
def both_writers(writer_backend):
    if writer_backend != "delta-spark":
        pytest.skip("both writers commit to one table here: it runs once, with the delta-spark writer's")


def load(spark, dataset: str, n: int, backend: str) -> None:
    run_load(
        [{"id": 10 * n + i, "v": f"v{n}.{i}"} for i in range(3)],
        spark=spark,
        dataset=dataset,
        table_name="items",
        write_disposition="merge",
        primary_key="id",
        table_properties=INTERVAL,
        pipeline_name="shop",
        backend=backend,
    )


def last_checkpoint(path: str) -> int:
    with open(os.path.join(path, "_delta_log", "_last_checkpoint")) as text:
        return json.load(text)["version"]


def spark_checkpointed(spark, dataset: str, loads: int) -> str:
    """The table after `loads` loads with Delta's writer, which checkpointed it at version 2."""
    for n in range(loads):
        load(spark, dataset, n, "delta-spark")
    path = f"{dataset}/items"
    assert last_checkpoint(path) == 2
    assert os.path.exists(os.path.join(path, "_delta_log", "._last_checkpoint.crc"))  # Spark's checksum
    return path


def refused_by_spark(spark, path: str) -> list[str]:
    """The files of the table's log that Hadoop's local file system, as Spark reads them, refuses."""
    jvm = spark._jvm
    system = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    refused = []
    folder = os.path.join(path, "_delta_log")
    for name in sorted(os.listdir(folder)):
        if name.startswith(".") or os.path.isdir(os.path.join(folder, name)):
            continue
        stream = system.open(jvm.org.apache.hadoop.fs.Path(f"file://{folder}/{name}"))
        try:
            stream.readAllBytes()
        except Py4JJavaError as exc:
            refused.append(f"{name}: {exc.java_exception.getClass().getSimpleName()}")
        finally:
            stream.close()
    return refused


def rows_read_by_a_new_reader(spark, path: str) -> int:
    """The table's rows as a Spark application that has not read the table yet reads them."""
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    return spark.read.format("delta").load(path).count()


@pytest.mark.parametrize("maintenance_backend", ["delta-rs", "delta-spark"])
def test_a_maintenance_checkpoint_after_sparks_leaves_the_log_readable_by_spark(
    spark, dataset, maintenance_backend
):
    path = spark_checkpointed(spark, dataset, loads=4)  # version 3: no checkpoint of Spark's at it
    metrics = maintain_table(
        dataset, "items", optimize=False, checkpoint=True, backend=maintenance_backend, spark=spark
    )
    assert metrics["checkpointVersion"] == last_checkpoint(path) == 3  # written by delta-rs
    assert refused_by_spark(spark, path) == []
    assert rows_read_by_a_new_reader(spark, path) == 12


def test_a_delta_rs_load_checkpointing_after_spark_leaves_the_log_readable_by_spark(spark, dataset):
    path = spark_checkpointed(spark, dataset, loads=3)
    for n in (3, 4):
        load(spark, dataset, n, "delta-rs")  # delta-rs checkpoints as the table's interval says
    assert DeltaTable(path).version() == 4 and last_checkpoint(path) > 2
    assert refused_by_spark(spark, path) == []
    assert rows_read_by_a_new_reader(spark, path) == 15
    load(spark, dataset, 5, "delta-spark")  # and Delta's writer goes on from delta-rs's checkpoint
    assert rows_read_by_a_new_reader(spark, path) == 18
