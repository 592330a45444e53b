"""A catalog table (or a new table's schema) kept on an object store the load's storage options do not
reach is refused before anything is written, naming the table, the location and what to set."""

from __future__ import annotations

import pickle

import pytest

from airflow_provider_deltamerge.errors import CatalogError
from airflow_provider_deltamerge.model.catalog import check_location_reached
from airflow_provider_deltamerge.model.storage import stores_reached

AWS = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t-value", "AWS_REGION": "eu-west-1"}
AZURE = {"azure_storage_account_name": "acct", "azure_storage_account_key": "s3cr3t-value"}
GCS = {"google_service_account_path": "/keys/sa.json"}


@pytest.mark.parametrize(
    "options, stores",
    [
        (None, set()),
        ({}, set()),
        (AWS, {"s3"}),
        ({"access_key_id": "a", "secret_access_key": "b"}, {"s3"}),  # delta-rs's short aliases
        (AZURE, {"azure"}),
        ({"account_name": "acct", "sas_token": "t"}, {"azure"}),
        (GCS, {"gcs"}),
        ({"endpoint": "http://127.0.0.1:9000", "allow_http": "true"}, set()),  # either store's: neither
        ({**AWS, **AZURE}, {"s3", "azure"}),
    ],
)
def test_storage_options_reach_the_stores_their_settings_name(options, stores):
    assert stores_reached(options) == stores


@pytest.mark.parametrize(
    "location, options, named",
    [
        ("s3://lake/sales/orders", None, "name no object store's settings"),
        ("s3a://lake/sales/orders", AZURE, "are for Azure storage"),
        ("abfss://c@acct.dfs.core.windows.net/sales/orders", AWS, "are for S3"),
        ("gs://lake/sales/orders", {**AWS, **AZURE}, "are for Azure storage and S3"),
        ("az://c/sales/orders", {"allow_http": "true"}, "name no object store's settings"),
    ],
)
def test_a_location_on_a_store_the_options_do_not_reach_is_refused(location, options, named):
    with pytest.raises(CatalogError) as refused:
        check_location_reached("sales.orders", location, options, None)
    message = str(refused.value)
    assert message.startswith("table 'sales.orders': the catalog keeps it at ")
    assert repr(location) in message and named in message
    assert "set storage options for" in message and "Nothing was written" in message
    assert "s3cr3t" not in message and "AKIAEXAMPLE" not in message  # names stores, never settings
    again = pickle.loads(pickle.dumps(refused.value))
    assert (type(again), str(again)) == (CatalogError, message)


@pytest.mark.parametrize(
    "store, what_to_set",
    [("s3://l/t", "AWS_REGION alone"), ("abfss://c@a.dfs.core.windows.net/t", "azure_storage_account_name")],
)
def test_the_refusal_says_what_to_set_for_the_store_of_the_location(store, what_to_set):
    with pytest.raises(CatalogError, match=what_to_set):
        check_location_reached("sales.orders", store, GCS, None)


@pytest.mark.parametrize(
    "location, options, dataset",
    [
        ("s3://lake/sales/orders", AWS, None),
        ("s3a://lake/sales/orders", {"aws_region": "eu-west-1"}, None),
        ("abfss://c@acct.dfs.core.windows.net/sales/orders", AZURE, None),
        ("gs://lake/orders", GCS, None),
        ("file:/warehouse/sales.db/orders", AWS, None),  # local, HDFS: no object store's options apply
        ("/warehouse/sales.db/orders", None, None),
        ("hdfs://nn/warehouse/sales.db/orders", AZURE, None),
        ("s3://lake/sales/orders", None, "s3://lake/sales"),  # the dataset given: the store it is on
        (None, None, None),  # a view has no location (refused as a view elsewhere)
    ],
)
def test_a_location_the_load_reaches_passes(location, options, dataset):
    check_location_reached("sales.orders", location, options, dataset)
