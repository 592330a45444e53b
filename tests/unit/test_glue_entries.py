"""AWS Glue's entries and failures (pure): which entries are Delta tables and what else they are,
locations compared as Glue's readers take them, and boto3's errors said with what to do."""

from __future__ import annotations

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
)

from airflow_provider_deltamerge.delta.glue_entries import (
    catalog_table,
    delta_table_input,
    entry_kind,
    glue_location,
    same_location,
)
from airflow_provider_deltamerge.delta.glue_failures import glue_failure


@pytest.mark.parametrize(
    "first, second, same",
    [
        ("s3://lake/orders", "s3://lake/orders/", True),
        ("s3a://lake/orders", "s3://lake/orders", True),
        ("S3N://lake/orders/", "s3://lake/orders", True),
        ("file:///lake/orders", "/lake/orders/", True),
        ("file:/lake/orders", "/lake/orders", True),
        ("s3://lake/orders", "s3://lake/orders_v2", False),
        ("s3://lake/orders", "s3://other/orders", False),
        ("s3://lake/Orders", "s3://lake/orders", False),  # keys are case-sensitive
        ("abfss://c@a.dfs.core.windows.net/orders", "s3://c/orders", False),
    ],
)
def test_locations_are_compared_as_glue_s_readers_take_them(first, second, same):
    assert same_location(first, second) is same
    assert same_location(second, first) is same


def test_hadoop_s3_schemes_are_written_as_s3_and_others_as_given():
    assert glue_location("s3a://lake/orders") == "s3://lake/orders"
    assert glue_location("abfss://c@a.dfs.core.windows.net/x") == "abfss://c@a.dfs.core.windows.net/x"
    assert glue_location("/lake/orders") == "/lake/orders"


def test_the_registering_entry_is_read_back_as_the_delta_table_it_registers():
    entry = {**delta_table_input("Orders", "s3a://lake/orders"), "DatabaseName": "sales"}
    assert entry["Name"] == "orders"
    table = catalog_table(entry)
    assert (table.kind, table.location, table.managed) == ("delta", "s3://lake/orders", False)


@pytest.mark.parametrize(
    "entry, kind",
    [
        ({"Parameters": {"table_type": "delta"}}, "delta"),
        ({"Parameters": {"TABLE_TYPE": "DELTA"}}, "delta"),
        ({"Parameters": {"spark.sql.sources.provider": "Delta"}}, "delta"),
        ({"TableType": "VIRTUAL_VIEW", "Parameters": {"spark.sql.sources.provider": "delta"}}, "view"),
        ({"Parameters": {"table_type": "ICEBERG", "metadata_location": "s3://x"}}, "iceberg"),
        ({"Parameters": {"spark.sql.sources.provider": "hive", "classification": "csv"}}, "csv"),
        (
            {
                "StorageDescriptor": {
                    "InputFormat": "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
                    "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.orc.OrcSerde"},
                }
            },
            "orc",
        ),
        ({"StorageDescriptor": {"InputFormat": "org.apache.hadoop.mapred.TextInputFormat"}}, "hive"),
        ({}, "hive"),
    ],
)
def test_an_entry_s_kind_is_delta_only_where_its_parameters_say_so(entry, kind):
    assert entry_kind(entry) == kind


def test_a_view_has_no_location_and_a_managed_table_is_managed():
    view = catalog_table(
        {"Name": "v", "DatabaseName": "s", "TableType": "VIRTUAL_VIEW", "StorageDescriptor": {"Location": ""}}
    )
    assert (view.kind, view.location) == ("view", None)
    managed = catalog_table({"Name": "t", "DatabaseName": "s", "TableType": "MANAGED_TABLE"})
    assert (managed.managed, managed.location) == (True, None)


def _client_error(code: str, message: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}, "X"
    )


def test_an_answer_in_xml_is_read_for_its_code_and_message_and_its_status_decides_the_advice():
    xml = (
        '<?xml version="1.0"?>\n<ErrorResponse><Errors><Error><Code>AccessDenied</Code>'
        "<Message>User: arn:aws:iam::1:user/r is not authorized to perform: glue:CreateTable</Message>"
        "</Error></Errors></ErrorResponse>"
    )
    said = glue_failure("CreateTable", _client_error("403", xml, 403), None)
    assert said.startswith("AWS Glue refused CreateTable (AccessDenied: User: arn:aws:iam::1:user/r is not")
    assert "<" not in said and "allowed glue:CreateTable" in said


@pytest.mark.parametrize(
    "error, expected",
    [
        (_client_error("ServiceUnavailableException", "down", 503), "retry the task later"),
        (_client_error("SomethingNew", "gateway", 502), "retry the task later"),
        (_client_error("InvalidInputException", "bad name", 400), "Check the schema and table names"),
        (_client_error("SomethingNew", "odd", 400), "look at the catalog in the Glue console"),
        (NoCredentialsError(), "no complete AWS credentials"),
        (NoRegionError(), "Set region_name in the storage connection's extra"),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), "could not be reached at http://glue"),
        (ParamValidationError(report="Invalid length for parameter Name"), "Check the schema and table"),
    ],
    ids=[
        "unavailable",
        "bad-gateway",
        "invalid-input",
        "unknown",
        "no-credentials",
        "no-region",
        "unreachable",
        "params",
    ],
)
def test_each_failure_says_what_to_do(error, expected):
    assert expected in glue_failure("GetTable", error, "http://glue")


def test_a_long_message_is_cut_to_one_line():
    said = glue_failure("GetTable", _client_error("SomethingNew", "word\n" * 500, 400), None)
    assert "\n" not in said and len(said) < 700
