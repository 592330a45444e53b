"""Loads into a table named through AWS Glue (`catalog="glue"`), end to end: moto's Glue and S3 on
127.0.0.1, the delta-rs writer, real registration and lookup calls."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import CatalogError, run_load
from airflow_provider_deltamerge.delta.glue_catalog import GlueCatalog

pytestmark = pytest.mark.spark


def load(spark, options, rows, **arguments):
    return run_load(
        rows, spark=spark, catalog="glue", backend="delta-rs", storage_options=options, **arguments
    )


def test_a_glue_table_is_created_registered_and_found_again_by_name(spark, aws_server, glue_options):
    dataset = aws_server.create_bucket("glue-lake") + "/sales"
    catalog = GlueCatalog(glue_options)
    with pytest.raises(CatalogError, match="holds no schema 'sales'"):
        load(spark, glue_options, [{"id": 1}], table_name="sales.orders", dataset=dataset)
    assert not DeltaTable.is_deltatable(f"{dataset}/orders", storage_options=glue_options)

    first = load(
        spark,
        glue_options,
        [{"id": 1, "v": "a"}],
        table_name="sales.Orders",
        dataset=dataset,
        create_schema=True,
    )
    entry = catalog.table("sales", "orders")
    assert (entry.kind, entry.location, entry.managed) == ("delta", f"{dataset}/orders", False)
    assert catalog.table("sales", "_dlt_loads").location == f"{dataset}/_dlt_loads"
    assert first.metrics["catalog_table"] == "sales.orders"

    # no dataset: the table is where Glue says
    load(
        spark,
        glue_options,
        [{"id": 1, "v": "b"}, {"id": 2, "v": "c"}],
        table_name="sales.orders",
        write_disposition="merge",
        primary_key="id",
    )
    rows = DeltaTable(f"{dataset}/orders", storage_options=glue_options).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "b"), (2, "c")]


def test_a_glue_entry_on_a_store_the_storage_options_do_not_reach_is_refused(
    spark, glue_options, catalog, schema
):
    elsewhere = "abfss://lake@acct.dfs.core.windows.net/sales"
    catalog.register(schema, "orders", f"{elsewhere}/orders")  # an entry Glue holds, on Azure
    catalog.create_schema("azure_" + schema, elsewhere)  # a schema whose new tables go to Azure
    for name in (f"{schema}.orders", f"azure_{schema}.orders"):
        with pytest.raises(
            CatalogError, match=r"on Azure storage, which this load's storage options do not reach"
        ):
            load(
                spark, glue_options, [{"id": 1}], table_name=name, write_disposition="merge", primary_key="id"
            )
    assert catalog.table(f"azure_{schema}", "orders") is None
    assert catalog.table(schema, "_dlt_loads") is None  # nothing registered, nothing written
