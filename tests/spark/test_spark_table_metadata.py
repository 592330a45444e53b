"""The delta-spark writer's partition columns, Delta id and properties of a table
(delta/spark_table_metadata.py): from the snapshot Delta's log holds in the session's JVM, which must
agree with DESCRIBE DETAIL, and DESCRIBE DETAIL itself where that snapshot is at another version."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.delta import spark_table_metadata

pytestmark = pytest.mark.spark


@pytest.fixture
def delta_table_cls(spark, writer_backend):
    if writer_backend != "delta-spark":
        pytest.skip("Delta's own API: the delta-spark writer's half")
    from delta.tables import DeltaTable

    return DeltaTable


def test_the_log_in_the_jvm_answers_as_describe_detail(spark, dataset, delta_table_cls):
    columns = {"day": {"partition": True}}
    run_load([{"id": 1, "day": "2024-01-01"}], spark=spark, dataset=dataset, table_name="t", columns=columns)
    path = f"{dataset}/t"
    table = delta_table_cls.forPath(spark, path)
    detail = table.detail().select("partitionColumns", "id").first()
    assert spark_table_metadata._metadata_in_jvm(spark, path, 0) is not None  # answered without a job
    assert spark_table_metadata.partitions_and_id(spark, table, path, 0) == (("day",), detail[1])


def test_a_snapshot_at_another_version_is_answered_by_describe_detail(spark, dataset, delta_table_cls):
    run_load([{"id": 1}], spark=spark, dataset=dataset, table_name="t")
    path = f"{dataset}/t"
    table = delta_table_cls.forPath(spark, path)
    assert spark_table_metadata._metadata_in_jvm(spark, path, 7) is None  # the log holds version 0
    detail_id = table.detail().select("id").first()[0]
    assert spark_table_metadata.partitions_and_id(spark, table, path, 7) == ((), detail_id)


def test_the_properties_are_describe_details(spark, dataset, delta_table_cls):
    properties = {"delta.appendOnly": "false", "delta.logRetentionDuration": "interval 60 days"}
    run_load([{"id": 1}], spark=spark, dataset=dataset, table_name="t", table_properties=properties)
    path = f"{dataset}/t"
    table = delta_table_cls.forPath(spark, path)
    detail = dict(table.detail().select("properties").first()[0])
    assert spark_table_metadata._metadata_in_jvm(spark, path, 0) is not None
    assert spark_table_metadata.properties(spark, table, path, 0) == detail
    assert detail["delta.logRetentionDuration"] == "interval 60 days"
