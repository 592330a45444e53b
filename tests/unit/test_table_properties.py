"""The table_properties argument: canonical text, refusals that name the property and what to do."""

from __future__ import annotations

import pickle

import pytest

from airflow_provider_deltamerge import ConfigError
from airflow_provider_deltamerge.delta.spark_sql import set_properties_sql, write_options
from airflow_provider_deltamerge.delta.writer import CommitRequest
from airflow_provider_deltamerge.model.request import LoadRequest
from airflow_provider_deltamerge.model.table_properties import check_table_properties, differing
from airflow_provider_deltamerge.plan.merge import MergePlan, Operation


def test_values_become_delta_text():
    assert check_table_properties(
        {"delta.appendOnly": True, "delta.checkpointInterval": 10, "delta.dataSkippingStatsColumns": " a,b "}
    ) == {
        "delta.appendOnly": "true",
        "delta.checkpointInterval": "10",
        "delta.dataSkippingStatsColumns": "a,b",
    }
    assert check_table_properties(None) is None
    assert check_table_properties({}) is None


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"delta.appendOnly": "yes"}, r"delta.appendOnly = 'yes' is not a boolean"),
        ({"delta.checkpointInterval": 0}, "is not a positive integer"),
        ({"delta.checkpointInterval": 2**31}, "is not a positive integer of at most 2147483647"),
        ({"delta.dataSkippingNumIndexedCols": "99999999999"}, "is not a integer of at most 2147483647"),
        ({"delta.deletedFileRetentionDuration": "interval 999999999999 days"}, "longer than the 100 years"),
        ({"delta.logRetentionDuration": "interval 5300 weeks"}, "longer than the 100 years"),
        (
            {"delta.deletedFileRetentionDuration": "7 days"},
            r"is not a duration \(for example 'interval 7 days'\)",
        ),
        ({"delta.enableDeletionVectors": True}, "changes the table's protocol"),
        ({"delta.columnMapping.mode": "name"}, "changes the table's protocol"),
        ({"delta.feature.timestampNtz": "supported"}, "changes the table's protocol"),
        ({"delta.noSuchThing": "1"}, "is not a Delta table property loads set; supported: delta.appendOnly"),
        ({"": "x"}, "must be a non-empty string"),
        ({"owner": "data team"}, "'owner' is not a Delta table property loads set"),
        ({"delta.dataSkippingStatsColumns": [1]}, "must be text, a number or a boolean"),
        (["delta.appendOnly"], "must be a dict"),
    ],
)
def test_bad_properties_are_refused_naming_them(properties, message):
    with pytest.raises(ConfigError, match=message) as refused:
        check_table_properties(properties)
    assert refused.value.argument == "table_properties"
    assert str(pickle.loads(pickle.dumps(refused.value))) == str(refused.value)


def test_a_request_refuses_append_only_with_a_merge():
    with pytest.raises(ConfigError, match="Load it with write_disposition='append'"):
        LoadRequest.create(
            dataset="/data",
            table_name="t",
            write_disposition="merge",
            primary_key="id",
            table_properties={"delta.appendOnly": "TRUE"},
        )
    request = LoadRequest.create(
        dataset="/data", table_name="t", table_properties={"delta.appendOnly": 1 == 1}
    )
    assert LoadRequest.from_json(request.to_json()).table_properties == {"delta.appendOnly": "true"}


def test_only_differing_properties_are_set():
    current = {"delta.appendOnly": "false", "delta.logRetentionDuration": "INTERVAL 30 DAYS", "a": "1"}
    wanted = {
        "delta.appendOnly": "FALSE",
        "delta.logRetentionDuration": "interval 30 days",
        "a": "2",
        "b": "x",
    }
    assert differing(wanted, current) == {"a": "2", "b": "x"}
    assert differing(None, current) == {}


def test_delta_spark_sets_properties_on_creation_and_by_alter_table():
    request = CommitRequest("1.5", "app", 1, {}, {"delta.appendOnly": "true"})
    plan = MergePlan(Operation.WRITE)
    assert write_options(plan, request, creating=True)["delta.appendOnly"] == "true"
    assert "delta.appendOnly" not in write_options(plan, request, creating=False)
    sql = set_properties_sql("delta.`/data/t`", {"delta.checkpointInterval": "5", "it's": "o'k"})
    assert sql == (
        "ALTER TABLE delta.`/data/t` SET TBLPROPERTIES ('delta.checkpointInterval' = '5', 'it\\'s' = 'o\\'k')"
    )
