"""The delta-spark writer creates a table with its declared layout: partition columns on the first write,
and NOT NULL columns through a table definition (Delta stores a DataFrame write's columns nullable).
Delta's classes are stood in for (no jars here); every call is checked against their signatures."""

from __future__ import annotations

import dataclasses

import pytest
from delta.tables import DeltaTable, DeltaTableBuilder
from pyspark.sql import types as T

from airflow_provider_deltamerge.delta.delta_spark import DeltaSparkSnapshot, DeltaSparkWriter, TableRef
from airflow_provider_deltamerge.delta.writer import TableLayout
from airflow_provider_deltamerge.model.options import TableHints, WriteDisposition
from airflow_provider_deltamerge.plan.merge import plan_load
from tests.unit.test_delta_spark_translation import (
    DATA,
    REQUEST,
    DeltaStandIn,
    Session,
    ShapedSource,
    WriteStandIn,
    checked,
)

SCHEMA = T.StructType([T.StructField(c, T.StringType()) for c in DATA])


@pytest.fixture
def stand_in(monkeypatch):
    """Delta's DeltaTable over an empty history; an existing table's versions are added by the test."""
    import delta.tables

    table = DeltaStandIn(Session(), [])
    monkeypatch.setattr(delta.tables, "DeltaTable", table)
    return table


class PartitionedWrite(WriteStandIn):
    def partitionBy(self, *columns):
        self.table.calls.append(("partitionBy", *columns))
        return self


class Rows(ShapedSource):
    schema = SCHEMA

    def __init__(self, table):
        super().__init__(DATA, table)
        self.write = PartitionedWrite(table)


class BuilderStandIn:
    """DeltaTableBuilder: calls checked against Delta's and recorded; execute() commits CREATE TABLE."""

    def __init__(self, table):
        self.table = table

    def __getattr__(self, name):
        def call(*args, **kwargs):
            checked(DeltaTableBuilder, name, args, kwargs)
            self.table.calls.append((f"builder.{name}", *args))
            return self

        return call

    def execute(self):
        self.table.commit("CREATE TABLE", {}, {})


def create(stand_in, layout):

    def create_if_not_exists(spark):
        checked(DeltaTable, "createIfNotExists", (spark,), {})
        return BuilderStandIn(stand_in)

    stand_in.createIfNotExists = create_if_not_exists
    request = dataclasses.replace(REQUEST, layout=layout)
    spark = stand_in.session
    return DeltaSparkWriter(spark).commit(spark, "/lake/items", None, append_plan(), Rows(stand_in), request)


def append_plan():
    return plan_load(
        WriteDisposition.parse("append"),
        TableHints(),
        table_exists=False,
        batch_empty=False,
        hard_delete=False,
    )


def test_a_new_table_is_written_partitioned_by_its_partition_columns(stand_in):
    result = create(stand_in, TableLayout(partition_by=("day",)))
    assert ("partitionBy", "day") in stand_in.calls
    assert not [c for c in stand_in.calls if c[0].startswith("builder.")]
    assert [r["operation"] for r in stand_in.history_rows] == ["WRITE"] and result.version == 0


def test_a_new_table_with_not_null_columns_is_defined_first_then_written(stand_in):
    result = create(stand_in, TableLayout(partition_by=("day",), not_null=("id",)))
    (columns,) = [c[1] for c in stand_in.calls if c[0] == "builder.addColumns"]
    assert [(f.name, f.nullable) for f in columns.fields] == [(c, c != "id") for c in DATA]
    assert ("builder.location", "/lake/items") in stand_in.calls
    assert ("builder.partitionedBy", "day") in stand_in.calls
    assert ("partitionBy", "day") not in stand_in.calls  # the definition partitions the table
    assert [r["operation"] for r in stand_in.history_rows] == ["WRITE", "CREATE TABLE"]
    assert result.version == 1 and stand_in.history_rows[0]["userMetadata"] == REQUEST.user_metadata()


def test_an_existing_table_keeps_its_own_layout(stand_in):
    written = {"operation": "WRITE", "operationParameters": {}, "operationMetrics": {}, "userMetadata": None}
    stand_in.history_rows.extend({"version": v, **written} for v in range(4, -1, -1))
    snapshot = DeltaSparkSnapshot(TableRef.parse("/lake/items"), 4, SCHEMA, None, ("day",))
    request = dataclasses.replace(REQUEST, layout=TableLayout(partition_by=("day",), not_null=("id",)))
    spark = stand_in.session
    DeltaSparkWriter(spark).commit(spark, "/lake/items", snapshot, append_plan(), Rows(stand_in), request)
    assert not [c for c in stand_in.calls if c[0].startswith("builder.") or c[0] == "partitionBy"]
    assert stand_in.history_rows[0]["version"] == 5
