"""scd2 of change events with AUTO CDC's sequence of several columns and partial updates: what the
request accepts and refuses, and how versions are found (pure)."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge import ConfigError
from airflow_provider_deltamerge.delta.datafusion import DataFusionDialect
from airflow_provider_deltamerge.delta.spark_sql import SparkSqlDialect
from airflow_provider_deltamerge.model import track_history
from airflow_provider_deltamerge.model.null_updates import subject_columns
from airflow_provider_deltamerge.model.request import LoadRequest
from airflow_provider_deltamerge.plan.expressions import render
from airflow_provider_deltamerge.plan.scd2 import Scd2Settings
from airflow_provider_deltamerge.plan.scd2_feed import plan_scd2_events
from airflow_provider_deltamerge.plan.scd2_history import plan_scd2_history

SCD2 = {"disposition": "merge", "strategy": "scd2"}


def request(**arguments):
    return LoadRequest.create(
        dataset="/tmp/d", table_name="t", write_disposition=SCD2, merge_key="id", **arguments
    )


def test_several_sequence_columns_and_partial_updates_are_taken_for_scd2():
    taken = request(sequence_by=["commit_ts", "lsn"], ignore_null_updates=True)
    assert taken.hints.sequence_by == ("commit_ts", "lsn")
    assert track_history.rebuilds_history(taken.disposition, taken.hints)
    assert subject_columns(taken.hints, ["id", "commit_ts", "lsn", "name", "_dlt_load_id"]) == ("name",)
    plain = request(sequence_by=["commit_ts", "lsn"])
    assert not track_history.rebuilds_history(plain.disposition, plain.hints)  # every event a version


@pytest.mark.parametrize(
    ("arguments", "argument", "says"),
    [
        ({"ignore_null_updates_column_list": ["id"]}, "ignore_null_updates_column_list", "merge key"),
        (
            {"ignore_null_updates_except_column_list": ["id"]},
            "ignore_null_updates_except_column_list",
            "merge",
        ),
        ({"ignore_null_updates_column_list": ["lsn"]}, "ignore_null_updates_column_list", "sequence_by"),
        ({"ignore_null_updates": True, "sequence_by": None}, "ignore_null_updates", "give sequence_by"),
    ],
)
def test_partial_updates_of_a_history_are_refused_where_they_make_no_sense(arguments, argument, says):
    with pytest.raises(ConfigError) as refused:
        request(**{"sequence_by": "lsn", **arguments})
    assert refused.value.argument == argument
    assert says in str(refused.value)


@pytest.mark.parametrize("plan", ["events", "history"])
def test_a_version_is_found_by_its_sequence_field_by_field_in_both_dialects(plan):
    settings = Scd2Settings()
    fields = ("commit_ts", "lsn")
    if plan == "events":
        made = plan_scd2_events(
            settings, ("id",), table_exists=True, batch_empty=False, sequence_fields=fields
        )
    else:
        made = plan_scd2_history(
            settings, ("id",), None, table_exists=True, batch_empty=False, sequence_fields=fields
        )
    assert render(made.on, DataFusionDialect()) == (
        '(t."id" = s."id") AND (t."_dlt_valid_from"."commit_ts" = s."_dlt_valid_from"."commit_ts") '
        'AND (t."_dlt_valid_from"."lsn" = s."_dlt_valid_from"."lsn")'
    )
    assert "t.`_dlt_valid_from`.`lsn` = s.`_dlt_valid_from`.`lsn`" in render(made.on, SparkSqlDialect())
    one = plan_scd2_events(settings, ("id",), table_exists=True, batch_empty=False)
    assert (
        render(one.on, DataFusionDialect())
        == '(t."id" = s."id") AND (t."_dlt_valid_from" = s."_dlt_valid_from")'
    )
