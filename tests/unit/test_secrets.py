"""Which values are credentials, and that they are kept out of the texts a user is shown."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.model.request import LoadRequest
from airflow_provider_deltamerge.model.secrets import (
    command_line_secrets,
    credential_values,
    is_credential_key,
    redact_text,
    redacted,
)

JDBC_URL = "jdbc:postgresql://db.internal:5432/shop?user=loader&password=url-pass-123&ssl=true"


@pytest.mark.parametrize(
    "key",
    [
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.session.token",
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",
        "spark.hadoop.fs.azure.sas.container.acct.blob.core.windows.net",
        "password",
        "sfPassword",
        "aws_secret_access_key",
        "client_credential",
    ],
)
def test_credential_keys(key):
    assert is_credential_key(key)


@pytest.mark.parametrize("key", ["spark.sql.shuffle.partitions", "url", "dbtable", "header", "spark.master"])
def test_ordinary_keys(key):
    assert not is_credential_key(key)


def test_credentials_are_found_in_confs_options_and_urls():
    handed = {
        "spark_conf": {"spark.hadoop.fs.s3a.session.token": "tok-123", "spark.executor.memory": "2g"},
        "source": {
            "format": "jdbc",
            "options": {"url": JDBC_URL, "password": "opt-pass-456", "user": "loader"},
        },
        "other": ["https://loader:userinfo-pass@host/path"],
    }
    assert credential_values(handed) == ["tok-123", "url-pass-123", "opt-pass-456", "userinfo-pass"]


def test_redaction_hides_every_credential_and_keeps_the_rest():
    text = f"--conf spark.hadoop.fs.s3a.session.token=tok-123 --conf url={JDBC_URL}"
    shown = redact_text(text, ["tok-123", "url-pass-123"])
    assert "tok-123" not in shown and "url-pass-123" not in shown
    assert "db.internal:5432/shop?user=loader" in shown
    assert redacted({"options": {"password": "p4ss", "url": JDBC_URL, "header": True}}) == {
        "options": {"password": "***", "url": JDBC_URL.replace("url-pass-123", "***"), "header": True}
    }


def test_a_config_error_on_a_source_never_echoes_its_credentials():
    source = {"format": "jdbc", "options": {"url": JDBC_URL, "password": "opt-pass-456"}, "oops": 1}
    with pytest.raises(ConfigError) as error:
        LoadRequest.create(source=source, dataset="/lake", table_name="orders")
    assert error.value.argument == "source"
    assert "url-pass-123" not in str(error.value) and "opt-pass-456" not in str(error.value)
    with pytest.raises(ConfigError) as error:
        LoadRequest.create(
            source={"format": "jdbc", "options": {"password": ["opt-pass-456"]}},
            dataset="/lake",
            table_name="o",
        )
    assert "opt-pass-456" not in str(error.value)


@pytest.mark.parametrize(
    ("arguments", "secrets"),
    [
        (["--storage-option", "AWS_SECRET_ACCESS_KEY:sk-123"], ["sk-123"]),
        (["--storage-option=AWS_SECRET_ACCESS_KEY=sk=12:3"], ["sk=12:3"]),
        (["AWS_SECRET_ACCESS_KEY", "sk-123", "orders"], ["sk-123"]),
        (
            ["--source", '{"options": {"url": "' + JDBC_URL + '", "password": "pw-456"}}'],
            ["url-pass-123", "pw-456"],
        ),
        (["s3://loader:pw-789@minio/lake"], ["pw-789"]),
        (["--primary-key", "order_id", "--storage-option", "AWS_REGION=eu-west-1", "orders"], []),
    ],
)
def test_the_secrets_of_a_command_line(arguments, secrets):
    assert command_line_secrets(arguments) == secrets


@pytest.mark.parametrize(
    "dataset",
    [
        "s3://AKIAEXAMPLE:url-pass-123@bucket/lake",
        "abfss://lake@acct.dfs.core.windows.net/shop?sv=2024&sig=url-pass-123",
        "gs://bucket/lake?token=url-pass-123",
        "foo://user:url-pass-123@host/lake",  # refused for its credential before its scheme
    ],
)
def test_a_dataset_uri_holding_a_credential_is_refused_at_every_entry_point_without_showing_it(
    dataset, tmp_path, capsys
):
    from airflow_provider_deltamerge.cli.main import main
    from airflow_provider_deltamerge.delta.maintenance import maintain_table

    for enter in (
        lambda: LoadRequest.create(dataset=dataset, table_name="orders"),
        lambda: maintain_table(dataset, "orders", optimize=True),
        lambda: maintain_table(dataset, "_dlt_loads", vacuum=True),
    ):
        with pytest.raises(ConfigError) as error:
            enter()
        assert error.value.argument == "dataset" and "holds a credential in its URI" in str(error.value)
        assert "url-pass-123" not in str(error.value) and "storage_options" in str(error.value)
    assert main(["history", dataset, "orders"]) == 1
    shown = capsys.readouterr()
    assert "holds a credential" in shown.err and "url-pass-123" not in shown.out + shown.err
