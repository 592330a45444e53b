"""Object stores (pure): which store a dataset is on, its storage options, and the same settings for Spark.

A dataset on S3 (``s3://``), Azure (``az://``, ``abfss://``, ...) or Google Cloud Storage (``gs://``) is
read and written by delta-rs with ``storage_options``: the object_store keys delta-rs takes
(``AWS_ACCESS_KEY_ID``, ``azure_storage_account_key``, ...). They come from the caller (run_load's
``storage_options``, the CLI's ``--storage-option``) or from an Airflow connection
(``options_from_connection``, called at the Airflow edge). Without any, delta-rs takes the environment's
default credential chain (``AWS_*`` / ``AZURE_*`` variables, profiles, instance roles).

Spark reads sources and, with the delta-spark writer, writes tables through Hadoop's file systems;
``hadoop_settings`` gives the same credentials as Hadoop configuration keys (``fs.s3a.*``,
``fs.azure.*``), which a cluster sets as ``spark.hadoop.<key>``.

Concurrent commits to one S3 table are coordinated by S3's conditional put (``If-None-Match: *`` on the
commit file), which delta-rs uses by default; ``delta_rs_options`` sets it explicitly
(``aws_conditional_put: etag``) unless the options say otherwise. delta-rs removed its DynamoDB log store
(deltalake 1.6 logs an error and ignores ``AWS_S3_LOCKING_PROVIDER``), so that option is refused rather
than silently trusted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from ..errors import ConfigError

STORES = {
    "s3": "s3",
    "s3a": "s3",
    "az": "azure",
    "abfs": "azure",
    "abfss": "azure",
    "azure": "azure",
    "adl": "azure",
    "gs": "gcs",
    "gcs": "gcs",
}
CONDITIONAL_PUT = "aws_conditional_put"
UNSAFE_RENAME = "aws_s3_allow_unsafe_rename"
LOCKING_PROVIDER = "aws_s3_locking_provider"
AWS_CONNECTION_TYPES = ("aws",)
AZURE_CONNECTION_TYPES = ("wasb", "adls", "azure_data_lake", "azure")
PASSED_THROUGH = "storage_options"  # a connection extra handed to delta-rs as it is
# AWS Glue's own endpoint, named as boto3 names a service's endpoint; AWS_ENDPOINT_URL is S3's only.
GLUE_ENDPOINT = "AWS_ENDPOINT_URL_GLUE"

# Option names delta-rs accepts for one setting (compared lower-case), the first is the one we write.
_ALIASES = {
    "aws_access_key_id": ("aws_access_key_id", "access_key_id"),
    "aws_secret_access_key": ("aws_secret_access_key", "secret_access_key"),
    "aws_session_token": ("aws_session_token", "session_token", "aws_token", "token"),
    "aws_region": ("aws_region", "region", "aws_default_region"),
    "aws_endpoint_url": ("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint"),
    "azure_storage_account_name": ("azure_storage_account_name", "account_name"),
    "azure_storage_account_key": ("azure_storage_account_key", "azure_storage_access_key", "account_key"),
    "azure_storage_sas_key": ("azure_storage_sas_key", "azure_storage_sas_token", "sas_key", "sas_token"),
    "azure_endpoint": ("azure_storage_endpoint", "azure_endpoint", "endpoint"),
}


def store_of(dataset: str) -> str | None:
    """'s3', 'azure' or 'gcs' for a dataset on an object store; None for a local path, hdfs, memory."""
    scheme = dataset.split("://", 1)[0].lower() if "://" in dataset else ""
    return STORES.get(scheme)


STORE_NAMES = {"s3": "S3", "azure": "Azure storage", "gcs": "Google Cloud Storage"}
_STORE_PREFIXES = {"aws_": "s3", "azure_": "azure", "google_": "gcs"}


def stores_reached(options: Mapping[str, str] | None) -> set[str]:
    """The object stores storage options carry settings for, by their names: `aws_*` (and their short
    aliases) reach S3, `azure_*` Azure, `google_*` Google Cloud Storage; generic options reach none."""
    reached = set()
    for key in options or {}:
        name = key.lower()
        reached.update(store for prefix, store in _STORE_PREFIXES.items() if name.startswith(prefix))
        reached.update(store for store in _ALIAS_STORES.get(name, ()))
    return reached


def _alias_stores() -> dict[str, set[str]]:
    """Each short alias (`access_key_id`, `account_name`, ...) and the stores whose setting it names."""
    stores: dict[str, set[str]] = {}
    for canonical, aliases in _ALIASES.items():
        store = next(s for prefix, s in _STORE_PREFIXES.items() if canonical.startswith(prefix))
        for alias in aliases:
            stores.setdefault(alias, set()).add(store)
    return {alias: found for alias, found in stores.items() if len(found) == 1}  # `endpoint`: either


_ALIAS_STORES = _alias_stores()


def check_storage_options(value: Any) -> dict[str, str] | None:
    """Storage options as delta-rs takes them: a mapping of option names to text (numbers and booleans
    become text); None when empty."""
    if value is None or value == {}:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError("storage_options", "must be a mapping of option names to values")
    options: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ConfigError("storage_options", f"option names must be non-empty text, got {key!r}")
        if not isinstance(item, (str, int, float, bool)):
            raise ConfigError("storage_options", f"the value of {key!r} must be text, a number or a boolean")
        options[key] = str(item).lower() if isinstance(item, bool) else str(item)
    if _get(options, LOCKING_PROVIDER):
        raise ConfigError(
            "storage_options",
            "AWS_S3_LOCKING_PROVIDER is ignored by delta-rs (the DynamoDB log store was removed); "
            "concurrent commits to S3 are coordinated by S3's conditional put, which deltamerge turns on. "
            "Remove the option.",
        )
    return options


def delta_rs_options(dataset: str, options: Mapping[str, str] | None) -> dict[str, str] | None:
    """What delta-rs is handed for the dataset: the options, with S3's conditional put turned on unless
    they choose a conditional put mode or unsafe renames themselves; None for a local dataset without
    options."""
    handed = dict(options or {})
    if (
        store_of(dataset) == "s3"
        and _get(handed, CONDITIONAL_PUT) is None
        and not _get(handed, UNSAFE_RENAME)
    ):
        handed[CONDITIONAL_PUT] = "etag"
    return handed or None


def unsafe_commits(options: Mapping[str, str] | None) -> bool:
    """Whether the options turn S3's commit coordination off (unsafe renames, conditional put disabled)."""
    options = options or {}
    return (_get(options, UNSAFE_RENAME) or "").lower() == "true" or (
        _get(options, CONDITIONAL_PUT) or ""
    ).lower() == "disabled"


def options_from_connection(
    conn_id: str, conn_type: str | None, login: Any, password: Any, host: Any, extra: Mapping[str, Any]
) -> dict[str, str]:
    """Storage options from an Airflow connection's fields.

    ``aws``: login and password are the access key id and secret; extra ``aws_session_token``,
    ``region_name``, ``endpoint_url`` (also inside ``service_config.s3``), and AWS Glue's endpoint
    ``service_config.glue.endpoint_url`` as ``AWS_ENDPOINT_URL_GLUE``. Azure (``wasb``, ``adls``,
    ...): login the account name, password the account key; extra ``sas_token``, ``connection_string``,
    ``account_url`` (or an ``http(s)://`` host) as the endpoint. Any type: extra ``storage_options`` is
    handed over as it is, over the fields above.
    """
    extra = dict(extra or {})
    if conn_type in AWS_CONNECTION_TYPES:
        options = _aws_options(login, password, extra)
    elif conn_type in AZURE_CONNECTION_TYPES:
        options = _azure_options(login, password, host, extra)
    elif PASSED_THROUGH in extra:
        options = {}
    else:
        raise ConfigError(
            "storage_conn_id",
            f"connection {conn_id!r} has type {conn_type!r}; use an 'aws' or an Azure ('wasb', 'adls') "
            f"connection, or any connection whose extra holds {PASSED_THROUGH!r}",
        )
    passed = extra.get(PASSED_THROUGH) or {}
    if isinstance(passed, str):
        passed = json.loads(passed)
    return check_storage_options({**options, **passed}) or {}


def _aws_options(login: Any, password: Any, extra: dict[str, Any]) -> dict[str, str]:
    services = (extra.get("service_config") or {}) if isinstance(extra, dict) else {}
    s3_config, glue_config = services.get("s3") or {}, services.get("glue") or {}
    endpoint = s3_config.get("endpoint_url") or extra.get("endpoint_url") or extra.get("host")
    found = {
        "AWS_ACCESS_KEY_ID": login or extra.get("aws_access_key_id"),
        "AWS_SECRET_ACCESS_KEY": password or extra.get("aws_secret_access_key"),
        "AWS_SESSION_TOKEN": extra.get("aws_session_token"),
        "AWS_REGION": extra.get("region_name") or extra.get("region"),
        "AWS_ENDPOINT_URL": endpoint,
        GLUE_ENDPOINT: glue_config.get("endpoint_url"),
    }
    if endpoint and str(endpoint).startswith("http://"):
        found["AWS_ALLOW_HTTP"] = "true"
    return {key: str(value) for key, value in found.items() if value}


def aws_client_settings(options: Mapping[str, str] | None, endpoint_option: str) -> dict[str, str]:
    """The options' AWS credentials and region as boto3 client arguments (``aws_access_key_id``,
    ``aws_secret_access_key``, ``aws_session_token``, ``region_name``), and ``endpoint_url`` from the
    option `endpoint_option` (a service's own endpoint, such as ``AWS_ENDPOINT_URL_GLUE``), each where
    given: boto3 takes the rest from its default chain."""
    options = options or {}
    settings = {
        "aws_access_key_id": _setting(options, "aws_access_key_id"),
        "aws_secret_access_key": _setting(options, "aws_secret_access_key"),
        "aws_session_token": _setting(options, "aws_session_token"),
        "region_name": _setting(options, "aws_region"),
        "endpoint_url": _get(options, endpoint_option.lower()),
    }
    return {key: value for key, value in settings.items() if value}


def _azure_options(login: Any, password: Any, host: Any, extra: dict[str, Any]) -> dict[str, str]:
    parts = _connection_string(extra.get("connection_string") or "")
    endpoint = extra.get("account_url") or parts.get("blobendpoint")
    if not endpoint and host and str(host).startswith(("http://", "https://")):
        endpoint = host
    found = {
        "azure_storage_account_name": login or extra.get("account_name") or parts.get("accountname"),
        "azure_storage_account_key": password or extra.get("shared_access_key") or parts.get("accountkey"),
        "azure_storage_sas_key": extra.get("sas_token") or parts.get("sharedaccesssignature"),
        "azure_endpoint": endpoint,
    }
    if endpoint and str(endpoint).startswith("http://"):
        found["azure_allow_http"] = "true"
    return {key: str(value) for key, value in found.items() if value}


def _connection_string(text: str) -> dict[str, str]:
    """An Azure storage connection string's parts, names lower-case."""
    pairs = (part.split("=", 1) for part in text.split(";") if "=" in part)
    return {name.strip().lower(): value.strip() for name, value in pairs}


def hadoop_settings(dataset: str, options: Mapping[str, str] | None) -> dict[str, str]:
    """The options as Hadoop configuration keys for the dataset's file system (set as
    ``spark.hadoop.<key>`` on a cluster); empty where the dataset is not on S3 or Azure."""
    options = options or {}
    store = store_of(dataset)
    if store == "s3":
        return _s3a_settings(options)
    if store == "azure":
        return _abfs_settings(dataset, options)
    return {}


def _s3a_settings(options: Mapping[str, str]) -> dict[str, str]:
    endpoint = _setting(options, "aws_endpoint_url")
    token = _setting(options, "aws_session_token")
    settings = {
        "fs.s3a.access.key": _setting(options, "aws_access_key_id"),
        "fs.s3a.secret.key": _setting(options, "aws_secret_access_key"),
        "fs.s3a.session.token": token,
        "fs.s3a.endpoint.region": _setting(options, "aws_region"),
        "fs.s3a.endpoint": endpoint,
    }
    if token:
        settings["fs.s3a.aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        )
    if endpoint:
        settings["fs.s3a.path.style.access"] = "true"
        if endpoint.startswith("http://"):
            settings["fs.s3a.connection.ssl.enabled"] = "false"
    return {key: value for key, value in settings.items() if value}


def _abfs_settings(dataset: str, options: Mapping[str, str]) -> dict[str, str]:
    account = _setting(options, "azure_storage_account_name") or _account_in_uri(dataset)
    if not account:
        return {}
    host = f"{account}.dfs.core.windows.net"
    key, sas = _setting(options, "azure_storage_account_key"), _setting(options, "azure_storage_sas_key")
    settings = {}
    if key:
        settings[f"fs.azure.account.key.{host}"] = key
    elif sas:
        settings[f"fs.azure.account.auth.type.{host}"] = "SAS"
        settings[f"fs.azure.sas.fixed.token.{host}"] = sas.lstrip("?")
    return settings


def _account_in_uri(dataset: str) -> str | None:
    """The account of ``abfss://container@account.dfs.core.windows.net/...``."""
    netloc = urlparse(dataset).netloc
    return netloc.split("@", 1)[1].split(".", 1)[0] if "@" in netloc else None


def _setting(options: Mapping[str, str], name: str) -> str | None:
    return _first(options, _ALIASES[name])


def _get(options: Mapping[str, str], name: str) -> str | None:
    return _first(options, (name,))


def _first(options: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    lowered = {key.lower(): value for key, value in options.items()}
    return next((lowered[name] for name in names if lowered.get(name)), None)
