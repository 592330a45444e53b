"""A catalog table named where a command takes a dataset (`deltamerge loads sales.orders`): its folder
asked of the Spark session's catalog (a local session, configured as spark-defaults.conf or
PYSPARK_SUBMIT_ARGS say: a Hive metastore, Glue's client), and the command run on that folder, for
that table."""

from __future__ import annotations

import argparse

from ..errors import CatalogError
from ..model.table_names import parse_table_name


def names_catalog_table(location: str) -> bool:
    """Whether a DATASET argument is a catalog table's name (`schema.table`) rather than a location."""
    if "/" in location or "\\" in location or "://" in location:
        return False
    try:
        return parse_table_name(location).in_catalog
    except CatalogError:
        return False


def with_catalog_table(args: argparse.Namespace) -> argparse.Namespace:
    """`args` with a catalog table's folder as the dataset and its name as the table (where the command
    takes one); unchanged for a location."""
    if not names_catalog_table(getattr(args, "dataset", "") or ""):
        return args
    from ..load import catalog_target
    from ..model.request import LoadRequest
    from ..spark.session import default_session

    request = LoadRequest.create(table_name=args.dataset)
    spark = default_session()
    entry = catalog_target.catalog_of(spark, request).table(request.target.schema, request.table)
    if entry is None:
        raise CatalogError(args.dataset, "is not in the Spark session's catalog: no such table to read")
    placed = catalog_target.place(spark, request, "delta-rs")
    args.dataset = placed.request.dataset
    if hasattr(args, "table") and args.table is None:
        args.table = placed.request.table
    return args
