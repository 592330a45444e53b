"""AWS Glue's table entries (pure): the entry that registers a Delta table, and any entry read as a
CatalogTable.

The entry registering a Delta table is what the readers of a Glue catalog look for:
- Athena reads a table as Delta where its parameter ``table_type`` is ``DELTA``, and takes its
  columns from the Delta log, not from Glue (Athena user guide, "Get started with Delta Lake tables").
- Spark on EMR (and Athena, and Trino's Delta connector) read a table as Delta where its parameter
  ``spark.sql.sources.provider`` is ``delta``, at the location in its SerDe parameter ``path``
  (Athena user guide, "Synchronize Delta Lake metadata"; Spark's HiveExternalCatalog).
- Its storage descriptor is the one Spark and Trino write for a table Hive cannot read itself:
  ``LazySimpleSerDe`` over ``SequenceFileInputFormat`` and one placeholder column ``col
  array<string>``, so that a Hive-style reader never takes the folder for plain Parquet files (it
  holds removed files too). TableType ``EXTERNAL_TABLE``: dropping the entry keeps the data.
- Glue keeps names lowercase ("For Hive compatibility, this must be entirely lowercase": the Glue
  API's Table structure), so names are sent lowercase.
"""

from __future__ import annotations

from typing import Any

from ..model.catalog import CatalogTable

DELTA_PARAMETERS = {"table_type": "DELTA", "spark.sql.sources.provider": "delta", "EXTERNAL": "TRUE"}
PLACEHOLDER_COLUMNS = [{"Name": "col", "Type": "array<string>", "Comment": "from deserializer"}]
NOT_HIVE_READABLE = {
    "InputFormat": "org.apache.hadoop.mapred.SequenceFileInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveSequenceFileOutputFormat",
}
LAZY_SIMPLE_SERDE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
VIEW_TYPE, MANAGED_TYPE, EXTERNAL_TYPE = "VIRTUAL_VIEW", "MANAGED_TABLE", "EXTERNAL_TABLE"
PATH = "path"
_S3_SCHEMES = {"s3a": "s3", "s3n": "s3"}  # Hadoop's names for S3; Athena and EMR read s3://
_FORMATS = ("parquet", "orc", "avro", "json", "csv", "iceberg", "hudi")


def glue_location(location: str) -> str:
    """A table's location as Glue's readers take it: ``s3://`` for Hadoop's ``s3a://`` and ``s3n://``."""
    scheme, separator, rest = location.partition("://")
    return f"{_S3_SCHEMES.get(scheme.lower(), scheme)}{separator}{rest}" if separator else location


def same_location(first: str, second: str) -> bool:
    """Whether two locations name one folder: S3's schemes alike, ``file:`` URIs and local paths alike,
    trailing slashes ignored."""
    return _comparable(first) == _comparable(second)


def _comparable(location: str) -> str:
    text = glue_location(location.strip())
    scheme, separator, rest = text.partition("://")
    if separator:
        text = f"{scheme.lower()}://{rest}"
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif text.startswith("file:/"):
        text = text[len("file:") :]
    return text.rstrip("/") or "/"


def delta_table_input(name: str, location: str) -> dict[str, Any]:
    """Glue's TableInput registering the Delta table at `location` as `name`."""
    location = glue_location(location)
    return {
        "Name": name.lower(),
        "TableType": EXTERNAL_TYPE,
        "Parameters": dict(DELTA_PARAMETERS),
        "PartitionKeys": [],
        "StorageDescriptor": {
            "Columns": [dict(column) for column in PLACEHOLDER_COLUMNS],
            "Location": location,
            **NOT_HIVE_READABLE,
            "SerdeInfo": {
                "SerializationLibrary": LAZY_SIMPLE_SERDE,
                "Parameters": {"serialization.format": "1", PATH: location},
            },
        },
    }


def catalog_table(entry: dict[str, Any]) -> CatalogTable:
    """A Glue table entry (GetTable's ``Table``) as a CatalogTable."""
    storage = entry.get("StorageDescriptor") or {}
    serde_parameters = _lowered((storage.get("SerdeInfo") or {}).get("Parameters"))
    view = entry.get("TableType") == VIEW_TYPE
    return CatalogTable(
        schema=entry.get("DatabaseName", ""),
        name=entry.get("Name", ""),
        kind=entry_kind(entry),
        location=None if view else (serde_parameters.get(PATH) or storage.get("Location") or None),
        managed=entry.get("TableType") == MANAGED_TYPE,
    )


def entry_kind(entry: dict[str, Any]) -> str:
    """ "delta" where the entry's parameters say Delta (Athena's or Spark's), "view" for a view, else
    the table's format as its parameters or storage descriptor name it ("parquet", "iceberg", ...),
    "hive" where nothing names one."""
    if entry.get("TableType") == VIEW_TYPE:
        return "view"
    parameters = _lowered(entry.get("Parameters"))
    table_type = parameters.get("table_type", "").lower()
    provider = parameters.get("spark.sql.sources.provider", "").lower()
    if "delta" in (table_type, provider):
        return "delta"
    for named in (table_type, provider, parameters.get("classification", "").lower()):
        if named and named != "hive":
            return named
    storage = entry.get("StorageDescriptor") or {}
    described = " ".join(
        str(value or "").lower()
        for value in (
            storage.get("InputFormat"),
            (storage.get("SerdeInfo") or {}).get("SerializationLibrary"),
        )
    )
    return next((name for name in _FORMATS if name in described), "hive")


def _lowered(parameters: dict[str, str] | None) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in (parameters or {}).items()}
