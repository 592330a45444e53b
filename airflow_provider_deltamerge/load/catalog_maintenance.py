"""`maintain_table` for a table named through a catalog too: the table's folder asked of its catalog
(the Spark session's, or AWS Glue's), then Delta's maintenance there (delta/maintenance.py)."""

from __future__ import annotations

from typing import Any

from ..delta import maintenance
from ..errors import CatalogError
from ..model.arguments import check_table_name
from ..model.request import LoadRequest
from ..model.table_names import parse_table_name
from . import catalog_target


def maintain_table(dataset: str | None, table_name: str, *, catalog: str = "spark", **options: Any) -> dict:
    """`delta.maintenance.maintain_table`; for `schema.table` (or `catalog.schema.table`) the table the
    catalog holds, which must be a Delta table (CatalogError otherwise, before anything is done). The
    Spark session is `spark` where given, else the shared local one (the Spark catalog's lookup)."""
    if not parse_table_name(check_table_name(table_name)).in_catalog:
        return maintenance.maintain_table(dataset, table_name, **options)
    request = LoadRequest.create(
        dataset=dataset, table_name=table_name, naming=options.get("naming", "snake_case"), catalog=catalog
    )
    spark = options.get("spark")
    if spark is None and catalog == "spark":
        from ..spark.session import default_session

        spark = options["spark"] = default_session()
    client = catalog_target.catalog_of(spark, request)
    entry = client.table(request.target.schema, request.table)
    if entry is None:
        raise CatalogError(
            table_name, "is not in the catalog: there is no table to maintain. Nothing was done."
        )
    placed = catalog_target.place(spark, request, options.get("backend", "auto"))
    metrics = maintenance.maintain_table(
        placed.request.dataset, placed.request.table, **{**options, "naming": "direct"}
    )
    return {**metrics, **catalog_target.where_it_lives(placed.request)}
