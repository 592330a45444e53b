"""Object store settings (pure): connections to delta-rs storage options, the same credentials as Hadoop
settings for Spark, S3's commit coordination, and requests that never carry credentials in their JSON."""

from __future__ import annotations

import json

import pytest

from airflow_provider_deltamerge import ConfigError, LoadRequest
from airflow_provider_deltamerge.model.storage import (
    aws_client_settings,
    check_storage_options,
    delta_rs_options,
    hadoop_settings,
    options_from_connection,
    store_of,
    unsafe_commits,
)

SECRET = "s3cr3t-value-for-tests"


def test_each_scheme_names_its_store():
    assert [
        store_of(d) for d in ("s3://b/x", "s3a://b/x", "az://c/x", "abfss://c@a.dfs.core.windows.net/x")
    ] == [
        "s3",
        "s3",
        "azure",
        "azure",
    ]
    assert (store_of("gs://b/x"), store_of("/lake"), store_of("file:///lake"), store_of("memory:///x")) == (
        "gcs",
        None,
        None,
        None,
    )


def test_an_aws_connection_maps_to_delta_rs_options():
    options = options_from_connection(
        "lake",
        "aws",
        "AKIDEXAMPLE",
        SECRET,
        None,
        {
            "aws_session_token": "tok-123",
            "region_name": "eu-west-1",
            "endpoint_url": "http://127.0.0.1:9000",
            "service_config": {"glue": {"endpoint_url": "http://127.0.0.1:5000"}},
        },
    )
    assert options == {
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": "tok-123",
        "AWS_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",  # S3's
        "AWS_ALLOW_HTTP": "true",
        "AWS_ENDPOINT_URL_GLUE": "http://127.0.0.1:5000",
    }
    assert aws_client_settings(options, "AWS_ENDPOINT_URL_GLUE") == {
        "aws_access_key_id": "AKIDEXAMPLE",
        "aws_secret_access_key": SECRET,
        "aws_session_token": "tok-123",
        "region_name": "eu-west-1",
        "endpoint_url": "http://127.0.0.1:5000",
    }


def test_an_azure_connection_maps_account_key_sas_and_connection_string():
    assert options_from_connection("lake", "wasb", "acct", SECRET, None, {}) == {
        "azure_storage_account_name": "acct",
        "azure_storage_account_key": SECRET,
    }
    assert options_from_connection("lake", "wasb", "acct", None, None, {"sas_token": "sv=1&sig=abc"}) == {
        "azure_storage_account_name": "acct",
        "azure_storage_sas_key": "sv=1&sig=abc",
    }
    text = f"AccountName=acct;AccountKey={SECRET};BlobEndpoint=http://127.0.0.1:10000/acct"
    assert options_from_connection("lake", "wasb", None, None, None, {"connection_string": text}) == {
        "azure_storage_account_name": "acct",
        "azure_storage_account_key": SECRET,
        "azure_endpoint": "http://127.0.0.1:10000/acct",
        "azure_allow_http": "true",
    }


def test_extra_storage_options_pass_through_and_other_connection_types_are_refused():
    passed = {"storage_options": {"google_service_account_path": "/keys/sa.json"}}
    assert options_from_connection("gcs", "generic", None, None, None, passed) == {
        "google_service_account_path": "/keys/sa.json"
    }
    with pytest.raises(ConfigError, match="storage_conn_id: connection 'pg' has type 'postgres'"):
        options_from_connection("pg", "postgres", "u", SECRET, "db", {})


def test_hadoop_settings_carry_the_same_credentials():
    s3 = {
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": "tok-123",
        "AWS_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
    }
    assert hadoop_settings("s3://bucket/lake", s3) == {
        "fs.s3a.access.key": "AKIDEXAMPLE",
        "fs.s3a.secret.key": SECRET,
        "fs.s3a.session.token": "tok-123",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider",
        "fs.s3a.endpoint.region": "eu-west-1",
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
    }
    azure = {"azure_storage_account_name": "acct", "azure_storage_account_key": SECRET}
    assert hadoop_settings("abfss://c@acct.dfs.core.windows.net/lake", azure) == {
        "fs.azure.account.key.acct.dfs.core.windows.net": SECRET
    }
    sas = {"azure_storage_sas_key": "?sv=1&sig=abc"}
    assert hadoop_settings("abfss://c@acct.dfs.core.windows.net/lake", sas) == {
        "fs.azure.account.auth.type.acct.dfs.core.windows.net": "SAS",
        "fs.azure.sas.fixed.token.acct.dfs.core.windows.net": "sv=1&sig=abc",
    }
    assert hadoop_settings("/lake", s3) == {}


def test_s3_commits_use_conditional_put_unless_the_options_choose_otherwise():
    assert delta_rs_options("s3://b/lake", None) == {"aws_conditional_put": "etag"}
    assert delta_rs_options("s3://b/lake", {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}) == {
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true"
    }
    assert delta_rs_options("/lake", None) is None
    assert delta_rs_options("az://c/lake", {"azure_storage_account_name": "a"}) == {
        "azure_storage_account_name": "a"
    }
    assert unsafe_commits({"AWS_S3_ALLOW_UNSAFE_RENAME": "true"})
    assert unsafe_commits({"aws_conditional_put": "disabled"})
    assert not unsafe_commits(delta_rs_options("s3://b/lake", None))


def test_bad_storage_options_are_refused_naming_the_argument():
    with pytest.raises(ConfigError, match="storage_options: .*DynamoDB log store was removed"):
        check_storage_options({"AWS_S3_LOCKING_PROVIDER": "dynamodb"})
    with pytest.raises(ConfigError, match="storage_options: must be a mapping"):
        check_storage_options("AWS_REGION=eu-west-1")
    with pytest.raises(ConfigError, match="storage_options: the value of 'AWS_REGION'"):
        check_storage_options({"AWS_REGION": ["eu-west-1"]})
    assert check_storage_options({"AWS_ALLOW_HTTP": True, "timeout": 30}) == {
        "AWS_ALLOW_HTTP": "true",
        "timeout": "30",
    }


def test_a_request_keeps_its_storage_options_out_of_its_json_and_its_repr():
    request = LoadRequest.create(
        dataset="s3://bucket/lake",
        table_name="orders",
        source={"table": "orders"},
        storage_options={"AWS_SECRET_ACCESS_KEY": SECRET},
    )
    assert request.store_options == {"AWS_SECRET_ACCESS_KEY": SECRET, "aws_conditional_put": "etag"}
    assert SECRET not in request.to_json() and SECRET not in repr(request)
    assert SECRET not in request.describe()
    back = LoadRequest.from_json(request.to_json(), {"AWS_SECRET_ACCESS_KEY": SECRET})
    assert back == request
    assert "storage_options" not in json.loads(request.to_json())


def test_boto3_takes_each_delta_rs_spelling_of_the_aws_options():
    # no Glue endpoint: boto3 takes the region's
    assert aws_client_settings(
        {
            "access_key_id": "A",
            "secret_access_key": SECRET,
            "token": "t-1",
            "aws_default_region": "us-east-2",
        },
        "AWS_ENDPOINT_URL_GLUE",
    ) == {
        "aws_access_key_id": "A",
        "aws_secret_access_key": SECRET,
        "aws_session_token": "t-1",
        "region_name": "us-east-2",
    }
