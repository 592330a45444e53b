"""GlueCatalog against moto's Glue on 127.0.0.1, with real boto3 calls: registration as Athena and EMR
Spark read it, lookups of what Glue holds (Delta tables, views, Parquet tables), idempotent and
concurrent registration, missing schemas, and every failure as a CatalogError without credentials."""

from __future__ import annotations

import pickle
import sys
import threading

import pytest
from botocore.exceptions import ClientError

from airflow_provider_deltamerge import CatalogError, ConfigError
from airflow_provider_deltamerge.delta.glue_catalog import GlueCatalog
from airflow_provider_deltamerge.model.catalog import CatalogTable
from airflow_provider_deltamerge.model.storage import options_from_connection
from tests.storage.servers import S3_REGION, create_user, free_port

ORDERS = "s3://lake/sales/orders"


def raw_entry(catalog: GlueCatalog, schema: str, name: str) -> dict:
    return catalog.client("test").get_table(DatabaseName=schema, Name=name)["Table"]


def put_entry(catalog: GlueCatalog, schema: str, name: str, table_type: str, parameters: dict, storage: dict):
    """An entry some other engine wrote."""
    catalog.client("test").create_table(
        DatabaseName=schema,
        TableInput={
            "Name": name,
            "TableType": table_type,
            "Parameters": parameters,
            "StorageDescriptor": storage,
        },
    )


def test_a_registered_table_has_the_entry_athena_and_emr_spark_read_as_delta(catalog, schema):
    catalog.register(schema, "orders", "s3a://lake/sales/orders")

    entry = raw_entry(catalog, schema, "orders")
    assert entry["TableType"] == "EXTERNAL_TABLE"
    assert entry["Parameters"]["table_type"] == "DELTA"  # Athena
    assert entry["Parameters"]["spark.sql.sources.provider"] == "delta"  # Spark (EMR), Trino
    storage = entry["StorageDescriptor"]
    assert storage["Location"] == ORDERS  # s3:// as Athena and EMR take it, not Hadoop's s3a://
    assert storage["SerdeInfo"]["Parameters"]["path"] == ORDERS
    assert (
        storage["SerdeInfo"]["SerializationLibrary"] == "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
    )
    assert "parquet" not in storage["InputFormat"].lower()  # Hive-style readers never take it as Parquet
    assert storage["Columns"] == [{"Name": "col", "Type": "array<string>", "Comment": "from deserializer"}]

    assert catalog.table(schema, "orders") == CatalogTable(schema, "orders", "delta", ORDERS, managed=False)
    assert catalog.table(schema, "Orders") == catalog.table(schema, "orders")  # Glue's names are lowercase
    assert catalog.table(schema, "customers") is None


def test_registering_again_at_the_same_location_leaves_the_entry_alone(catalog, schema):
    catalog.register(schema, "orders", ORDERS)
    before = raw_entry(catalog, schema, "orders")

    catalog.register(schema, "orders", ORDERS + "/")
    catalog.register(schema, "orders", "s3a://lake/sales/orders")

    assert raw_entry(catalog, schema, "orders") == before


def test_a_table_registered_at_another_location_is_refused_naming_both(catalog, schema):
    catalog.register(schema, "orders", ORDERS)
    before = raw_entry(catalog, schema, "orders")

    with pytest.raises(CatalogError) as refused:
        catalog.register(schema, "orders", "s3://lake/elsewhere/orders")

    assert refused.value.name == f"{schema}.orders"
    assert ORDERS in str(refused.value) and "s3://lake/elsewhere/orders" in str(refused.value)
    assert "Nothing was registered" in str(refused.value)
    assert raw_entry(catalog, schema, "orders") == before


def test_a_registration_that_loses_the_race_to_create_the_entry_succeeds(glue_options, schema):
    """The other registration lands between this one's lookup and its CreateTable: Glue answers
    AlreadyExistsException, and the entry it finds is the same table."""
    mine, theirs = GlueCatalog(glue_options), GlueCatalog(glue_options)
    raced = []

    def other_registration_first(**_):
        if not raced:
            raced.append(True)
            theirs.register(schema, "orders", ORDERS)

    mine.client("test").meta.events.register("before-call.glue.CreateTable", other_registration_first)
    mine.register(schema, "orders", ORDERS)

    assert raced and mine.table(schema, "orders").location == ORDERS


def test_a_race_lost_to_a_registration_at_another_location_is_refused(glue_options, schema):
    mine, theirs = GlueCatalog(glue_options), GlueCatalog(glue_options)
    mine.client("test").meta.events.register(
        "before-call.glue.CreateTable", lambda **_: theirs.register(schema, "orders", "s3://lake/other")
    )

    with pytest.raises(CatalogError, match="s3://lake/other") as refused:
        mine.register(schema, "orders", ORDERS)

    assert ORDERS in str(refused.value)
    assert theirs.table(schema, "orders").location == "s3://lake/other"


def test_registrations_at_once_from_many_threads_all_succeed_with_one_entry(glue_options, schema):
    workers = 6
    start, failures = threading.Barrier(workers), []

    def register():
        catalog = GlueCatalog(glue_options)
        catalog.client("test")  # made before the start, so that the calls themselves race
        start.wait()
        try:
            catalog.register(schema, "orders", ORDERS)
        except Exception as error:  # noqa: BLE001 - any failure fails the test below
            failures.append(error)

    threads = [threading.Thread(target=register) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert failures == []
    tables = GlueCatalog(glue_options).client("test").get_tables(DatabaseName=schema)["TableList"]
    assert [table["Name"] for table in tables] == ["orders"]


def test_a_view_is_read_as_a_view_and_never_registered_over(catalog, schema):
    put_entry(
        catalog,
        schema,
        "recent_orders",
        "VIRTUAL_VIEW",
        {"presto_view": "true"},
        {"Columns": [{"Name": "id", "Type": "bigint"}]},
    )

    assert catalog.table(schema, "recent_orders") == CatalogTable(
        schema, "recent_orders", "view", None, managed=False
    )
    with pytest.raises(CatalogError, match="holds a view under this name, not a Delta table"):
        catalog.register(schema, "recent_orders", ORDERS)


@pytest.mark.parametrize(
    "parameters, serde",
    [
        ({"classification": "parquet"}, "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"),
        ({"spark.sql.sources.provider": "parquet"}, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"),
        ({}, "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"),
    ],
    ids=["crawler", "spark", "hive-ddl"],
)
def test_a_parquet_table_is_read_as_parquet_and_never_registered_over(catalog, schema, parameters, serde):
    storage = {
        "Columns": [{"Name": "id", "Type": "bigint"}],
        "Location": ORDERS,
        "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        "SerdeInfo": {"SerializationLibrary": serde},
    }
    put_entry(catalog, schema, "orders", "EXTERNAL_TABLE", parameters, storage)

    assert catalog.table(schema, "orders") == CatalogTable(schema, "orders", "parquet", ORDERS, False)
    with pytest.raises(CatalogError, match=f"holds a parquet under this name \\(at '{ORDERS}'\\)"):
        catalog.register(schema, "orders", ORDERS)


def test_a_delta_table_spark_registered_is_found_at_its_path_and_left_alone(catalog, schema):
    """Spark's Hive client keeps a data source table's location in the SerDe parameter `path` (the
    storage descriptor's may be a placeholder), and its provider in the table's parameters."""
    storage = {
        "Location": "s3://warehouse/orders-__PLACEHOLDER__",
        "SerdeInfo": {"Parameters": {"path": "s3a://lake/sales/orders/"}},
    }
    put_entry(catalog, schema, "orders", "MANAGED_TABLE", {"spark.sql.sources.provider": "DELTA"}, storage)
    before = raw_entry(catalog, schema, "orders")

    assert catalog.table(schema, "orders") == CatalogTable(
        schema, "orders", "delta", "s3a://lake/sales/orders/", managed=True
    )
    catalog.register(schema, "orders", ORDERS)
    assert raw_entry(catalog, schema, "orders") == before


def test_a_missing_schema_is_named_with_the_schemas_glue_holds(catalog, schema):
    assert catalog.table("no_such_schema", "orders") is None

    with pytest.raises(CatalogError) as refused:
        catalog.register("no_such_schema", "orders", ORDERS)
    message = str(refused.value)
    assert refused.value.name == "no_such_schema.orders"
    assert "no schema (database) 'no_such_schema'" in message and repr(schema) in message
    assert "create_schema=True" in message and "Nothing was registered" in message
    assert "no_such_schema" not in catalog.schemas()

    with pytest.raises(CatalogError, match="no schema \\(database\\) 'no_such_schema'"):
        catalog.schema_location("no_such_schema")


def test_create_schema_creates_it_at_its_location_once(catalog):
    catalog.create_schema("marketing", "s3a://lake/marketing")

    assert "marketing" in catalog.schemas()
    assert catalog.schema_location("marketing") == "s3://lake/marketing"
    catalog.create_schema("marketing", "s3://lake/other")  # exists: nothing
    assert catalog.schema_location("marketing") == "s3://lake/marketing"

    catalog.create_schema("no_location")
    assert catalog.schema_location("no_location") is None
    catalog.register("no_location", "orders", ORDERS)
    assert catalog.table("no_location", "orders").kind == "delta"


def test_a_catalog_id_names_the_account_catalog(glue_options, schema):
    catalog = GlueCatalog(glue_options, catalog_id="123456789012")  # moto's account
    catalog.register(schema, "orders", ORDERS)
    assert catalog.table(schema, "orders").location == ORDERS
    with pytest.raises(ConfigError, match="glue_catalog_id"):
        GlueCatalog(glue_options, catalog_id=" ")


def test_a_storage_connection_s_credentials_and_glue_endpoint_reach_glue(aws_server, schema):
    options = options_from_connection(
        "lake",
        "aws",
        aws_server.access_key,
        aws_server.secret_key,
        None,
        {"region_name": S3_REGION, "service_config": {"glue": {"endpoint_url": aws_server.endpoint}}},
    )
    catalog = GlueCatalog(options)

    catalog.register(schema, "orders", ORDERS)

    assert catalog.table(schema, "orders").kind == "delta"
    assert aws_server.secret_key not in repr(catalog)


def _assert_without_secrets(error: CatalogError, *secrets: str) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.name, copy.problem) == (
        type(error),
        str(error),
        error.name,
        error.problem,
    )
    for secret in secrets:
        assert secret not in str(error) and secret not in repr(error)
    assert error.__cause__ is None and error.__suppress_context__


def test_wrong_credentials_are_a_catalog_error_without_them(glue_options, schema):
    secret, key = "wrong-secret-for-the-test", "AKIAWRONGKEYFORTEST1"
    catalog = GlueCatalog({**glue_options, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret})

    with pytest.raises(CatalogError) as failed:
        catalog.register(schema, "orders", ORDERS)

    assert failed.value.name == f"{schema}.orders"
    assert "AWS Glue refused GetTable" in str(failed.value)
    assert "Check the AWS credentials of the storage connection" in str(failed.value)
    _assert_without_secrets(failed.value, secret, key)

    wrong_secret = GlueCatalog({**glue_options, "AWS_SECRET_ACCESS_KEY": secret})
    with pytest.raises(CatalogError, match="Check the AWS credentials") as failed:
        wrong_secret.schemas()
    _assert_without_secrets(failed.value, secret, glue_options["AWS_ACCESS_KEY_ID"])


def test_access_denied_names_the_glue_permission_and_registers_nothing(aws_server, glue_options, schema):
    access_key, secret_key = create_user(
        aws_server.endpoint,
        (aws_server.access_key, aws_server.secret_key),
        f"reader-{schema}",
        '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": '
        '["glue:GetTable", "glue:GetDatabases"], "Resource": "*"}]}',
    )
    reader = GlueCatalog(
        {
            **glue_options,
            "AWS_ACCESS_KEY_ID": access_key,
            "AWS_SECRET_ACCESS_KEY": secret_key,
        }
    )

    with pytest.raises(CatalogError) as denied:
        reader.register(schema, "orders", ORDERS)

    assert "AccessDenied" in str(denied.value) and "allowed glue:CreateTable" in str(denied.value)
    assert "Nothing was registered" in str(denied.value)
    _assert_without_secrets(denied.value, secret_key, access_key)
    assert GlueCatalog(glue_options).table(schema, "orders") is None


def test_an_unreachable_endpoint_is_a_catalog_error_naming_it(glue_options):
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    catalog = GlueCatalog({**glue_options, "AWS_ENDPOINT_URL_GLUE": endpoint})

    with pytest.raises(CatalogError) as failed:
        catalog.table("sales", "orders")

    assert failed.value.name == "sales.orders"
    assert f"could not be reached at {endpoint}" in str(failed.value)
    assert "service_config.glue.endpoint_url" in str(failed.value)
    _assert_without_secrets(failed.value, glue_options["AWS_SECRET_ACCESS_KEY"])


@pytest.fixture
def no_aws_environment(monkeypatch, tmp_path):
    """No credentials or region from the environment, profiles or instance metadata."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_GLUE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.usefixtures("no_aws_environment")
def test_no_credentials_or_no_region_is_a_catalog_error_saying_what_to_set(glue_options):
    without_keys = GlueCatalog(
        {"AWS_REGION": S3_REGION, "AWS_ENDPOINT_URL_GLUE": glue_options["AWS_ENDPOINT_URL_GLUE"]}
    )
    with pytest.raises(CatalogError, match="no complete AWS credentials for Glue") as failed:
        without_keys.schemas()
    assert "login and password" in str(failed.value)

    without_region = GlueCatalog(
        {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": glue_options["AWS_SECRET_ACCESS_KEY"]}
    )
    with pytest.raises(CatalogError, match="no AWS region for Glue. Set region_name") as failed:
        without_region.table("sales", "orders")
    _assert_without_secrets(failed.value, glue_options["AWS_SECRET_ACCESS_KEY"])


def test_without_boto3_the_error_says_which_extra_to_install(glue_options, monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)  # an import of it fails, as where it is not installed

    with pytest.raises(CatalogError, match=r"airflow-provider-deltamerge\[glue\]") as failed:
        GlueCatalog(glue_options).table("sales", "orders")
    assert failed.value.name == "sales.orders"


def test_a_catalog_pickles_without_its_client_and_works_after(catalog, schema):
    catalog.register(schema, "orders", ORDERS)
    copy = pickle.loads(pickle.dumps(catalog))
    assert copy.table(schema, "orders") == catalog.table(schema, "orders")
    assert catalog.client("test") is not copy.client("test")


def test_a_throttled_call_says_to_retry_later():
    """Glue's throttling cannot be provoked from moto: boto3's own error, after its retries."""
    from airflow_provider_deltamerge.delta.glue_failures import ATTEMPTS, glue_failure

    throttled = ClientError(
        {
            "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        },
        "GetTable",
    )
    said = glue_failure("GetTable", throttled, None)
    assert said.startswith("AWS Glue refused GetTable (ThrottlingException: Rate exceeded).")
    assert f"busy through {ATTEMPTS} attempts: retry the task later" in said
