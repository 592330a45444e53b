"""The Spark session's catalog as a `model.catalog.Catalog`: whatever catalog the session is configured
with (a Hive metastore, Glue through EMR's client, Unity Catalog through its Spark connector,
`spark_catalog` with Delta's catalog), asked in Spark SQL.

An entry is read with `SHOW TABLE EXTENDED` (its Provider, Type and Location: what the catalog itself
holds, read without resolving the table, so a session without Delta's jars reads a Delta table's entry
too), or `DESCRIBE TABLE EXTENDED` where a catalog does not answer that; a schema's location with
`DESCRIBE NAMESPACE EXTENDED`. A table is registered
with `CREATE TABLE IF NOT EXISTS ... USING delta LOCATION`, which takes the table's schema from its
Delta log; that statement needs Delta's catalog in the session.
"""

from __future__ import annotations

from ..errors import CatalogError
from ..model.catalog import CatalogTable
from ..model.naming import backticked, spark_string

DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
UNITY_CATALOG_CLASSES = ("io.unitycatalog.", "com.databricks.")  # catalogs that own managed tables' files


class SparkCatalog:
    """One catalog of a Spark session: `name` is its catalog part (None: the session's current one)."""

    def __init__(self, spark, name: str | None = None):
        self.spark, self.name = spark, name

    def _qualified(self, *parts: str) -> str:
        return ".".join(backticked(p) for p in ([self.name] if self.name else []) + list(parts))

    def _sql(self, statement: str, subject: str):
        from pyspark.errors import PySparkException

        try:
            return self.spark.sql(statement).collect()
        except PySparkException as error:
            raise CatalogError(
                subject,
                f"Spark's catalog refused `{statement}`: {_first_line(error)}. Check the session's catalog "
                "settings and its permissions on the schema.",
            ) from None

    def schemas(self) -> list[str]:
        where = f" IN {backticked(self.name)}" if self.name else ""
        return sorted(row[0] for row in self._sql(f"SHOW NAMESPACES{where}", self.name or "spark_catalog"))

    def schema_location(self, schema: str) -> str | None:
        rows = self._sql(f"DESCRIBE NAMESPACE EXTENDED {self._qualified(schema)}", schema)
        location = {row[0]: row[1] for row in rows}.get("Location")
        return location or None

    def table(self, schema: str, name: str) -> CatalogTable | None:
        try:
            info = self._shown(schema, name)
        except CatalogError:  # a catalog that does not answer SHOW TABLE EXTENDED
            info = self._described(schema, name)
        if info is None:
            return None
        kind = "view" if info.get("Type") == "VIEW" else (info.get("Provider") or "hive").lower()
        return CatalogTable(schema, name, kind, info.get("Location") or None, info.get("Type") == "MANAGED")

    def _shown(self, schema: str, name: str) -> dict[str, str] | None:
        statement = f"SHOW TABLE EXTENDED IN {self._qualified(schema)} LIKE {spark_string(name)}"
        for row in self._sql(statement, f"{schema}.{name}"):
            if row.tableName.lower() == name.lower() and not row.isTemporary:
                lines = (line.partition(": ") for line in row.information.splitlines())
                return {key: value for key, _, value in lines}
        return None

    def _described(self, schema: str, name: str) -> dict[str, str] | None:
        qualified = self._qualified(schema, name)
        if not self.spark.catalog.tableExists(qualified):
            return None
        return {
            row[0]: row[1] for row in self._sql(f"DESCRIBE TABLE EXTENDED {qualified}", f"{schema}.{name}")
        }

    def create_schema(self, schema: str, location: str | None = None) -> None:
        where = f" LOCATION {spark_string(location)}" if location else ""
        self._sql(f"CREATE NAMESPACE IF NOT EXISTS {self._qualified(schema)}{where}", schema)

    def register(self, schema: str, name: str, location: str) -> None:
        statement = (
            f"CREATE TABLE IF NOT EXISTS {self._qualified(schema, name)} USING delta "
            f"LOCATION {spark_string(location)}"
        )
        try:
            self._sql(statement, f"{schema}.{name}")
        except CatalogError:  # two registrations at once: the other's entry is there now
            entry = self.table(schema, name)
            if entry is None or entry.kind != "delta":
                raise

    def implementation(self) -> str:
        """The class of the session's catalog of this name (its `spark.sql.catalog.<name>` setting)."""
        name = self.name or self.spark.catalog.currentCatalog()
        return self.spark.conf.get(f"spark.sql.catalog.{name}", None) or ""

    def owns_managed_files(self) -> bool:
        """Whether the catalog manages its managed tables' storage itself (Unity Catalog): no writer
        but the catalog's own may write there."""
        return self.implementation().startswith(UNITY_CATALOG_CLASSES)

    def registers_delta(self) -> bool:
        """Whether `register` can work: Delta's catalog in the session (its DeltaCatalog, or a catalog of
        its own such as Unity Catalog's)."""
        implementation = self.implementation()
        return implementation == DELTA_CATALOG or (self.name is not None and bool(implementation))


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0][:400] if str(error).strip() else type(error).__name__
