"""sequence_by on LoadRequest, the operator and the command line: checked, normalised, carried in JSON."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_provider_deltamerge import ConfigError
from airflow_provider_deltamerge.cli.commands import load_arguments
from airflow_provider_deltamerge.cli.parser import build_parser
from airflow_provider_deltamerge.model.request import LoadRequest
from airflow_provider_deltamerge.operators.merge import DeltaMergeOperator

UPSERT = {"disposition": "merge", "strategy": "upsert"}


def test_sequence_by_is_normalised_into_the_hints_and_travels_in_the_request_json():
    request = LoadRequest.create(
        dataset="/tmp/d",
        table_name="t",
        write_disposition=UPSERT,
        primary_key="id",
        sequence_by=["LogDay", "Pos"],
    )
    assert request.hints.sequence_by == ("log_day", "pos")
    again = LoadRequest.from_json(request.to_json())
    assert again.sequence_by == ["LogDay", "Pos"]
    assert again.hints == request.hints


def test_a_bad_sequence_by_fails_the_operator_when_the_dag_is_parsed():
    with pytest.raises(ConfigError) as refused:
        DeltaMergeOperator(
            task_id="cdc",
            source={"table": "events"},
            dataset="/tmp/d",
            table_name="t",
            sequence_by=["seq", "seq"],
        )
    assert refused.value.argument == "sequence_by"


def test_the_load_command_passes_sequence_by_and_the_column_lists():
    command = ["load", "/tmp/d", "t", "--source", "events", "--sequence-by", "a,b"]
    command += ["--except-column-list", "op"]
    arguments = load_arguments(build_parser().parse_args(command))
    assert (arguments["sequence_by"], arguments["except_column_list"]) == (["a", "b"], ["op"])


def test_apply_as_deletes_and_the_retention_travel_in_the_request_json_and_the_hints():
    request = LoadRequest.create(
        dataset="/tmp/d",
        table_name="t",
        write_disposition=UPSERT,
        primary_key="id",
        sequence_by="seq",
        apply_as_deletes=" op = 'D' ",
        tombstone_retention=timedelta(hours=1),
    )
    assert (request.hints.apply_as_deletes, request.tombstone_retention) == ("op = 'D'", 3600)
    again = LoadRequest.from_json(request.to_json())
    assert (again.hints, again.tombstone_retention) == (request.hints, 3600)
    assert LoadRequest.create(dataset="/tmp/d", table_name="t").tombstone_retention == 7 * 24 * 3600


def test_the_operator_and_the_load_command_take_apply_as_deletes():
    operator = DeltaMergeOperator(
        task_id="cdc",
        source={"table": "events"},
        dataset="/tmp/d",
        table_name="t",
        write_disposition=UPSERT,
        primary_key="id",
        sequence_by="seq",
        apply_as_deletes="op = 'D'",
        tombstone_retention=60,
    )
    arguments = operator.load_arguments({})
    assert (arguments["apply_as_deletes"], arguments["tombstone_retention"]) == ("op = 'D'", 60)
    with pytest.raises(ConfigError) as refused:
        DeltaMergeOperator(
            task_id="bad", source={"table": "e"}, dataset="/tmp/d", table_name="t", apply_as_deletes=3
        )
    assert refused.value.argument == "apply_as_deletes"
    command = ["load", "/tmp/d", "t", "--source", "events", "--sequence-by", "seq"]
    command += ["--apply-as-deletes", "op = 'D'", "--tombstone-retention", "120"]
    arguments = load_arguments(build_parser().parse_args(command))
    assert (arguments["apply_as_deletes"], arguments["tombstone_retention"]) == ("op = 'D'", 120)


def test_the_operator_and_the_load_command_take_apply_as_truncates():
    operator = DeltaMergeOperator(
        task_id="cdc",
        source={"table": "events"},
        dataset="/tmp/d",
        table_name="t",
        write_disposition=UPSERT,
        primary_key="id",
        sequence_by="seq",
        apply_as_truncates="op = 'T'",
    )
    assert operator.load_arguments({})["apply_as_truncates"] == "op = 'T'"
    assert "apply_as_truncates" in DeltaMergeOperator.template_fields
    command = ["load", "/tmp/d", "t", "--source", "events", "--sequence-by", "seq"]
    command += ["--apply-as-truncates", "op = 'T'"]
    arguments = load_arguments(build_parser().parse_args(command))
    assert arguments["apply_as_truncates"] == "op = 'T'"
    request = LoadRequest.create(
        dataset="/tmp/d",
        table_name="t",
        write_disposition=UPSERT,
        primary_key="id",
        sequence_by="seq",
        apply_as_truncates=" op = 'T' ",
    )
    assert request.hints.apply_as_truncates == "op = 'T'"
    assert LoadRequest.from_json(request.to_json()).hints == request.hints


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({"sequence_by": None}, "give sequence_by too"),
        ({"write_disposition": {"disposition": "merge", "strategy": "scd2"}, "merge_key": "id"}, "not scd2"),
        ({"apply_as_truncates": 3}, "is not a SQL condition"),
    ],
)
def test_apply_as_truncates_is_refused_where_it_has_no_meaning(arguments, why):
    given = {"dataset": "/tmp/d", "table_name": "t", "write_disposition": UPSERT, "primary_key": "id"}
    given.update({"sequence_by": "seq", "apply_as_truncates": "op = 'T'"})
    with pytest.raises(ConfigError, match=why) as refused:
        LoadRequest.create(**{**given, **arguments})
    assert refused.value.argument == "apply_as_truncates"
