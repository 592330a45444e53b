"""A table named through a catalog (`schema.table`, `catalog.schema.table`): where it lives, and its
entries (the table's, its bookkeeping's, its companion and child tables') registered.

Before a load: its schema checked (refused naming the schemas the catalog holds, or created with
`create_schema=True`), an entry under its name checked to be a Delta table (a view, a Parquet or
Hive-format table refused by name and kind) and its location read; a table the catalog does not hold is
placed at the schema's location, or under `dataset` where one is given. The load then runs on that
folder as on any dataset: `_dlt_loads` and `_dlt_pipeline_state` beside the table. After it (and before
it, for a load whose registration failed after its commit), every table of the load that is on storage
and missing from the catalog is registered in the table's schema.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from ..delta import store
from ..delta.child_tables import existing_child_tables
from ..delta.delta_spark_status import delta_spark_status
from ..errors import CatalogError
from ..model.catalog import Catalog, check_location_reached
from ..model.cdc import tombstones_table
from ..model.naming import table_path
from ..model.request import LoadRequest
from ..model.track_history import events_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placed:
    """A catalog table's request, placed at its folder, and the catalog that names it."""

    request: LoadRequest
    catalog: Catalog


def catalog_of(spark, request: LoadRequest) -> Catalog:
    """The catalog client the request names: the Spark session's (its catalog part, where given), or
    AWS Glue's API (`catalog="glue"`)."""
    if request.catalog == "glue":
        return _glue_catalog(request)
    from ..spark.catalog import SparkCatalog

    return SparkCatalog(spark, request.target.catalog)


def _glue_catalog(request: LoadRequest) -> Catalog:
    try:
        from ..delta.glue_catalog import GlueCatalog
    except ImportError as missing:
        raise CatalogError(
            request.table_name,
            f"catalog='glue' needs AWS Glue's client, which is not available here ({missing}); install "
            "airflow-provider-deltamerge[glue], or use catalog='spark' with a session that reaches Glue",
        ) from None
    return GlueCatalog(request.storage_options, request.target.catalog)  # a catalog part: Glue's catalog id


def place(spark, request: LoadRequest, writer_name: str) -> Placed:
    """The request at the folder its catalog keeps the table in; CatalogError before anything is
    written where the name cannot be loaded as given."""
    catalog = catalog_of(spark, request)
    schema, name = request.target.schema, request.table
    held = _check_schema(catalog, request)
    entry = catalog.table(schema, name) if held else None
    if entry is None:
        _check_can_register(spark, catalog, request)  # before a schema is created for the table
        if not held:
            catalog.create_schema(schema, request.dataset)
            log.info("schema %s created in the catalog", schema)
        folder = request.dataset or catalog.schema_location(schema)
        if not folder:
            raise CatalogError(
                request.table_name,
                f"is not in the catalog, and its schema {schema!r} has no location to create it at; give "
                "a dataset (the folder to create it under), or a schema with a location. Nothing was "
                "written.",
            )
        _check_reached(request, folder)
        return Placed(request.placed(writer_location(folder)), catalog)
    if entry.kind != "delta":
        raise CatalogError(
            request.table_name,
            f"the catalog holds a {entry.kind} {'' if entry.kind == 'view' else 'table '}under this name, "
            "not a Delta table; loads write Delta tables only: name another table, or convert it "
            "(CONVERT TO DELTA). Nothing was written.",
        )
    if entry.managed and writer_name == "delta-rs" and getattr(catalog, "owns_managed_files", bool)():
        raise CatalogError(
            request.table_name,
            "is a managed table of a catalog that owns its tables' files (Unity Catalog): only the catalog's "
            "own writers may write them, so delta-rs cannot; load it with backend='delta-spark' through the "
            "catalog's Spark connector, or load an external table. Nothing was written.",
        )
    _check_reached(request, entry.location)
    return Placed(request.placed(_folder_of(request, entry.location)), catalog)


def _check_reached(request: LoadRequest, location: str | None) -> None:
    check_location_reached(request.table_name, location, request.storage_options, request.dataset)


def _check_schema(catalog: Catalog, request: LoadRequest) -> bool:
    """Whether the catalog holds the table's schema; False where it is to be created (create_schema)."""
    schema = request.target.schema
    held = catalog.schemas()
    if schema in held or schema.lower() in held:
        return True
    if request.create_schema:
        return False
    raise CatalogError(
        request.table_name,
        f"the catalog holds no schema {schema!r} (it holds: {', '.join(held) or 'none'}); create it, or "
        "load with create_schema=True. Nothing was written.",
    )


def _check_can_register(spark, catalog: Catalog, request: LoadRequest) -> None:
    """A new table is registered after its first commit: refused up front where the session cannot."""
    registers = getattr(catalog, "registers_delta", None)
    if registers is None or registers():
        return
    _, why = delta_spark_status(spark)
    raise CatalogError(
        request.table_name,
        "is not in the catalog, and this Spark session cannot register a Delta table in it: "
        f"`CREATE TABLE ... USING delta` needs Delta's catalog in the session ({why}). Give the session "
        "Delta's jars with spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog "
        "(either writer then loads it), register the table first, or use catalog='glue'. Nothing was "
        "written.",
    )


def _folder_of(request: LoadRequest, location: str | None) -> str:
    """The folder of a table the catalog holds: its location's parent, where the table's folder is named
    as the table (its bookkeeping beside it, as in any dataset)."""
    path = writer_location((location or "").rstrip("/"))
    folder, _, base = path.rpartition("/")
    if base != request.table or not folder:
        raise CatalogError(
            request.table_name,
            f"lives at {location!r}, a folder not named {request.table!r}: a load keeps a table in a folder "
            "named as it, beside its _dlt_loads; load it by its path (dataset and table name) instead",
        )
    if request.dataset is not None and writer_location(request.dataset) != folder:
        raise CatalogError(
            request.table_name,
            f"lives at {location!r}, not under the dataset {request.dataset!r}: leave dataset out to load "
            "the table where the catalog keeps it",
        )
    return folder


def writer_location(location: str) -> str:
    """A location as the writers take it: Hadoop's `file:/x` and `file:///x` as the path `/x`."""
    if location.startswith("file:"):
        return "/" + location[len("file:") :].lstrip("/")
    return location


def tables_of_load(request: LoadRequest) -> list[str]:
    """The load's tables a catalog lists beside it: the table, the dataset's bookkeeping, the table's
    companion tables and its child tables, those on storage."""
    from deltalake import DeltaTable

    names = [
        request.table,
        store.LOADS_TABLE,
        store.STATE_TABLE,
        tombstones_table(request.table),
        events_table(request.table),
    ]
    on_storage = [
        name
        for name in names
        if DeltaTable.is_deltatable(table_path(request.dataset, name), request.store_options)
    ]
    return on_storage + list(existing_child_tables(request.dataset, request.table, request.store_options))


def register_tables(placed: Placed) -> list[str]:
    """Every table of the load on storage registered in the table's schema where the catalog holds no
    entry of its name; the names registered. Idempotent, and safe with another load doing the same."""
    request, catalog = placed.request, placed.catalog
    schema, registered = request.target.schema, []
    if not getattr(catalog, "registers_delta", lambda: True)():  # a table it holds, loaded by delta-rs
        log.warning("this Spark session cannot register Delta tables; the load's tables were not registered")
        return registered
    for name in tables_of_load(request):
        location = table_path(request.dataset, name)
        entry = catalog.table(schema, name)
        if entry is None:
            catalog.register(schema, name, location)
            registered.append(name)
        elif entry.location and writer_location(entry.location).rstrip("/") != location:
            log.warning(
                "%s.%s in the catalog is at %s, not at %s: left as it is",
                schema,
                name,
                entry.location,
                location,
            )
    if registered:
        log.info("registered in the catalog's schema %s: %s", schema, ", ".join(registered))
    return registered


def where_it_lives(request: LoadRequest) -> dict[str, str]:
    """A placed catalog table's name as the catalog gives it (`catalog_table`) and its folder
    (`table_location`): what its metrics add to those its load record holds."""
    return {"catalog_table": request.target.display(request.table), "table_location": request.table_path}


def reported(info, placed: Placed):
    """A catalog table's LoadInfo: its metrics name the table as the catalog does and where it lives,
    for lineage and for the task log."""
    return dataclasses.replace(info, metrics={**info.metrics, **where_it_lives(placed.request)})
