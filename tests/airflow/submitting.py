"""What tests running spark-submit share: the credentials handed to every job (none may reach a log line
or an error message) and the Airflow connection a test names."""

from __future__ import annotations

import json

SECRET_CONF = "TOPSECRET-conf-value-42"
# Credentials of every kind a cluster is handed; none may reach a log line or an error message.
CREDENTIALS = {
    "spark.hadoop.fs.s3a.secret.key": SECRET_CONF,
    "spark.hadoop.fs.s3a.session.token": "session-token-value-77",
    "spark.hadoop.fs.azure.account.key.lakeacct.dfs.core.windows.net": "azure-account-key-88==",
    "spark.hadoop.fs.azure.sas.landing.lakeacct.blob.core.windows.net": "sv=2024&sig=sas-signature-99",
}
SUBMIT_CONF = {"spark.ui.enabled": "false", **CREDENTIALS}


def set_connection(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))
