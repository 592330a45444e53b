"""scd2 of change events with tracked columns: the arguments checked (before anything is read), the
tracked columns chosen, and the plan of its one MERGE as delta-spark's builder receives it (the
recording stand-in) and as delta-rs renders it."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge import ConfigError, LoadRequest
from airflow_provider_deltamerge.delta.datafusion import DataFusionDialect
from airflow_provider_deltamerge.model.options import TableHints
from airflow_provider_deltamerge.model.track_history import events_table, tracked_columns
from airflow_provider_deltamerge.plan.expressions import render
from airflow_provider_deltamerge.plan.merge import Operation, SourceShape
from airflow_provider_deltamerge.plan.scd2 import Scd2Settings
from airflow_provider_deltamerge.plan.scd2_history import HELPERS, plan_scd2_history
from tests.unit.test_delta_spark_translation import builder_calls, copies

SCD2 = {"disposition": "merge", "strategy": "scd2"}
BASE = {
    "dataset": "/lake",
    "table_name": "customers",
    "write_disposition": SCD2,
    "merge_key": "id",
    "sequence_by": "seq",
}


def request(**arguments):
    return LoadRequest.create(**{**BASE, **arguments})


def test_the_lists_travel_in_the_request_and_its_json():
    made = request(track_history_column_list=["Name"], except_column_list=["op"])
    assert made.hints.track_history_column_list == ("name",)  # in the naming convention
    assert LoadRequest.from_json(made.to_json()).hints == made.hints


def test_the_tracked_columns_are_the_listed_ones_or_every_other_stored_column():
    columns = ("id", "seq", "name", "note", "_dlt_load_id", "__hd")
    listed = TableHints(merge_key=("id",), sequence_by=("seq",), track_history_column_list=("name",))
    assert tracked_columns(listed, columns) == ("name",)
    excepted = TableHints(merge_key=("id",), sequence_by=("seq",), track_history_except_column_list=("note",))
    assert tracked_columns(excepted, columns) == ("name",)
    assert events_table("customers") == "_dlt_events_customers"


@pytest.mark.parametrize(
    ("arguments", "argument", "why"),
    [
        (
            {"sequence_by": None, "track_history_column_list": ["name"]},
            "track_history_column_list",
            "without sequence_by",
        ),
        (
            {
                "write_disposition": {"disposition": "merge", "strategy": "upsert"},
                "primary_key": "id",
                "track_history_except_column_list": ["note"],
            },
            "track_history_except_column_list",
            "merge/upsert",
        ),
        (
            {"track_history_column_list": ["name"], "track_history_except_column_list": ["note"]},
            "track_history_except_column_list",
            "not both",
        ),
        ({"track_history_column_list": ["id"]}, "track_history_column_list", "merge key column"),
        ({"track_history_except_column_list": ["seq"]}, "track_history_except_column_list", "sequence_by"),
        ({"track_history_column_list": ["_dlt_id"]}, "track_history_column_list", "system column"),
        (
            {
                "track_history_column_list": ["valid"],
                "write_disposition": {**SCD2, "active_column_name": "valid"},
            },
            "track_history_column_list",
            "system column",
        ),
        (
            {"track_history_column_list": ["note"], "column_list": ["id", "name"]},
            "track_history_column_list",
            "leave out of the table",
        ),
        (
            {"track_history_column_list": ["op"], "except_column_list": ["op"]},
            "track_history_column_list",
            "leave out of the table",
        ),
    ],
)
def test_lists_that_make_no_sense_are_refused_naming_the_argument(arguments, argument, why):
    with pytest.raises(ConfigError, match=why) as refused:
        request(**arguments)
    assert refused.value.argument == argument


def test_the_merge_deletes_updates_and_inserts_versions_found_by_key_and_valid_from():
    plan = plan_scd2_history(Scd2Settings(), ("id",), ("name",), table_exists=True, batch_empty=False)
    assert (plan.operation, plan.source, plan.on_snapshot) == (
        Operation.MERGE,
        SourceShape.SCD2_HISTORY,
        True,
    )
    assert plan.needs_target_read and plan.retire.tracked == ("name",)
    data = ["id", "name", "_dlt_load_id", "_dlt_id", "_dlt_valid_from", "_dlt_valid_to"]
    calls = builder_calls(plan, data + list(HELPERS))
    assert calls[1][2] == "(t.`id` = s.`id`) AND (t.`_dlt_valid_from` = s.`_dlt_valid_from`)"
    assert calls[3:] == [
        ("whenMatchedDelete", "condition=\"s.`__action` = 'delete'\""),
        ("whenMatchedUpdate", "condition=\"s.`__action` = 'update'\"", f"set={copies(data)!r}"),
        ("whenNotMatchedInsert", "condition=\"s.`__action` = 'insert'\"", f"values={copies(data)!r}"),
    ]
    assert (
        render(plan.on, DataFusionDialect())
        == '(t."id" = s."id") AND (t."_dlt_valid_from" = s."_dlt_valid_from")'
    )


def test_a_new_table_is_written_and_an_empty_batch_commits_nothing():
    written = plan_scd2_history(Scd2Settings(), ("id",), ("name",), table_exists=False, batch_empty=False)
    assert (written.operation, written.needs_target_read) == (Operation.WRITE, False)
    empty = plan_scd2_history(Scd2Settings(), ("id",), ("name",), table_exists=True, batch_empty=True)
    assert empty.operation is Operation.NOTHING
