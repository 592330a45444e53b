"""AWS Glue as a catalog of Delta tables, through Glue's API with boto3 (the ``glue`` extra).

For deployments whose Spark session has no Glue client (delta-rs from a plain Airflow worker, tables
queried with Athena): the table is registered and looked up in Glue directly, with the credentials
and region of the dataset's storage options (the ``storage_conn_id`` connection). Glue's own endpoint,
where one is set, is the option ``AWS_ENDPOINT_URL_GLUE`` (a connection's extra
``service_config.glue.endpoint_url``); ``AWS_ENDPOINT_URL`` stays S3's. The entry a registration
writes, and why, is in ``glue_entries``.

Every failure of boto3 (no credentials, access denied, throttled after its retries, an endpoint it
cannot reach) is a CatalogError naming the table or schema, what failed and what to do, credentials
masked.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..errors import CatalogError, ConfigError
from ..model.catalog import CatalogTable
from ..model.secrets import credential_values, redact_text
from ..model.storage import GLUE_ENDPOINT, aws_client_settings, check_storage_options
from .glue_entries import catalog_table, delta_table_input, glue_location, same_location
from .glue_failures import ATTEMPTS, glue_failure

CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS = 10, 30
NOT_REGISTERED = "Nothing was registered."
_SHOWN_SCHEMAS = 20


class GlueCatalog:
    """The AWS Glue Data Catalog `catalog_id` (the account's own where None), reached with the AWS
    credentials, region and Glue endpoint of `storage_options`; boto3's default chain supplies what
    they leave out. Implements model.catalog.Catalog; safe to share between threads."""

    def __init__(self, storage_options: Mapping[str, Any] | None = None, catalog_id: str | None = None):
        if catalog_id is not None and (not isinstance(catalog_id, str) or not catalog_id.strip()):
            raise ConfigError(
                "glue_catalog_id", f"must be a Glue catalog id (an account id), got {catalog_id!r}"
            )
        self.catalog_id = catalog_id
        self._options = check_storage_options(storage_options) or {}
        self._settings = aws_client_settings(self._options, GLUE_ENDPOINT)
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GlueCatalog(catalog_id={self.catalog_id!r}, endpoint={self.endpoint!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    @property
    def endpoint(self) -> str | None:
        """Glue's endpoint: the override where one is given, else the region's (once a call made it)."""
        override = self._settings.get("endpoint_url")
        return override or (self._client.meta.endpoint_url if self._client is not None else None)

    def client(self, subject: str) -> Any:
        """The boto3 Glue client, made on first use; `subject` names what it is wanted for."""
        with self._lock:
            if self._client is None:
                self._client = _new_client(subject, self._settings)
            return self._client

    def schemas(self) -> list[str]:
        return self._schemas("*")

    def _schemas(self, subject: str) -> list[str]:
        with self._failures(subject, "GetDatabases"):
            pages = self.client(subject).get_paginator("get_databases").paginate(**self._ids())
            return sorted(database["Name"] for page in pages for database in page["DatabaseList"])

    def schema_location(self, schema: str) -> str | None:
        with self._failures(schema, "GetDatabase"):
            glue = self.client(schema)
            try:
                database = glue.get_database(**self._ids(), Name=schema.lower())["Database"]
            except glue.exceptions.EntityNotFoundException:
                raise self._missing_schema(schema, schema, "") from None
        return database.get("LocationUri") or None

    def table(self, schema: str, name: str) -> CatalogTable | None:
        with self._failures(f"{schema}.{name}", "GetTable"):
            glue = self.client(f"{schema}.{name}")
            try:
                entry = glue.get_table(**self._ids(), DatabaseName=schema.lower(), Name=name.lower())
            except glue.exceptions.EntityNotFoundException:  # the table, or its schema
                return None
        return catalog_table(entry["Table"])

    def create_schema(self, schema: str, location: str | None = None) -> None:
        database = {"Name": schema.lower(), **({"LocationUri": glue_location(location)} if location else {})}
        with self._failures(schema, "CreateDatabase", "The schema was not created."):
            glue = self.client(schema)
            try:
                glue.create_database(**self._ids(), DatabaseInput=database)
            except glue.exceptions.AlreadyExistsException:
                pass

    def register(self, schema: str, name: str, location: str) -> None:
        subject = f"{schema}.{name}"
        existing = self.table(schema, name)
        if existing is None:
            if self._create_table(subject, schema, name, location):
                return
            existing = self.table(schema, name)  # the entry a registration at once wrote
            if existing is None:
                raise CatalogError(
                    subject,
                    "AWS Glue said the table existed, then that it did not (dropped meanwhile). "
                    f"{NOT_REGISTERED} Retry the task.",
                )
        _check_registered(subject, existing, location)

    def _create_table(self, subject: str, schema: str, name: str, location: str) -> bool:
        """Whether this call created the entry; False where another had created it first."""
        with self._failures(subject, "CreateTable", NOT_REGISTERED):
            glue = self.client(subject)
            try:
                glue.create_table(
                    **self._ids(), DatabaseName=schema.lower(), TableInput=delta_table_input(name, location)
                )
            except glue.exceptions.AlreadyExistsException:
                return False
            except glue.exceptions.EntityNotFoundException:
                raise self._missing_schema(subject, schema, NOT_REGISTERED) from None
        return True

    def _missing_schema(self, subject: str, schema: str, outcome: str) -> CatalogError:
        held = self._schemas(subject)
        shown = ", ".join(repr(name) for name in held[:_SHOWN_SCHEMAS]) + (
            " ..." if len(held) > _SHOWN_SCHEMAS else ""
        )
        return CatalogError(
            subject,
            f"AWS Glue holds no schema (database) {schema.lower()!r}{self._in_catalog()}; it holds "
            f"{shown or 'none'}. {outcome + ' ' if outcome else ''}Name one of those, or create it "
            "(create_schema=True).",
        )

    def _ids(self) -> dict[str, str]:
        return {"CatalogId": self.catalog_id} if self.catalog_id else {}

    def _in_catalog(self) -> str:
        return f" in catalog {self.catalog_id!r}" if self.catalog_id else ""

    @contextmanager
    def _failures(self, subject: str, action: str, outcome: str = "") -> Iterator[None]:
        """boto3's failures inside the block as CatalogError, credentials masked; the AWS error is
        not chained, as its text may quote them."""
        try:
            from botocore.exceptions import BotoCoreError, ClientError

            aws_errors: tuple[type[Exception], ...] = (BotoCoreError, ClientError)
        except ImportError:  # the client's own import says what to install
            aws_errors = ()
        try:
            yield
        except aws_errors as error:
            problem = glue_failure(action, error, self.endpoint) + (f" {outcome}" if outcome else "")
            raise CatalogError(subject, redact_text(problem, credential_values(self._options))) from None


def _new_client(subject: str, settings: dict[str, str]) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise CatalogError(
            subject,
            "AWS Glue is reached with boto3, which is not installed: install the provider's glue extra "
            "(pip install 'airflow-provider-deltamerge[glue]').",
        ) from None
    arguments = dict(settings)
    endpoint = arguments.pop("endpoint_url", None)
    config = Config(
        retries={"mode": "standard", "max_attempts": ATTEMPTS},
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
    )
    return boto3.session.Session(**arguments).client("glue", endpoint_url=endpoint, config=config)


def _check_registered(subject: str, existing: CatalogTable, location: str) -> None:
    """An entry already under the name is left alone where it is the Delta table at `location`."""
    if existing.kind != "delta":
        raise CatalogError(
            subject,
            f"AWS Glue holds a {existing.kind} under this name"
            + (f" (at {existing.location!r})" if existing.location else "")
            + f", not a Delta table. {NOT_REGISTERED} Drop that entry, or load under another name.",
        )
    if existing.location is None or not same_location(existing.location, location):
        registered = f"at {existing.location!r}" if existing.location else "without a location"
        raise CatalogError(
            subject,
            f"AWS Glue registers it {registered}, but this load writes it at {location!r}. "
            f"{NOT_REGISTERED} Load into the registered location, or drop the Glue entry to register "
            "the table anew.",
        )
