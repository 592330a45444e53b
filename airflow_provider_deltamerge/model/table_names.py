"""A table's name as a load is given it (pure): `table` (a folder under the dataset, as always),
`schema.table` or `catalog.schema.table` (a table named through a catalog).

Dots separate parts outside backticks; a part in backticks holds anything (`` `my-db`.`orders` ``), a
backtick inside it doubled, as Spark SQL spells it. The naming convention applies to the table part
only: `sales.Orders` is table `orders` in schema `sales`, never a table `sales_orders`. Catalog and
schema parts are kept as given: the catalog decides what it calls them.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from ..errors import CatalogError
from .naming import backticked

PARTS = ("table", "schema.table", "catalog.schema.table")


@dataclass(frozen=True)
class TableName:
    """A parsed `table_name`: `schema` (and `catalog`) None for a plain table under the dataset."""

    table: str
    schema: str | None = None
    catalog: str | None = None

    @property
    def in_catalog(self) -> bool:
        return self.schema is not None

    def sql(self, table: str | None = None) -> str:
        """The name as Spark SQL takes it, every part quoted; `table` in place of the table part (a
        stored name, a companion table's)."""
        parts = [p for p in (self.catalog, self.schema) if p is not None] + [table or self.table]
        return ".".join(backticked(p) for p in parts)

    def display(self, table: str | None = None) -> str:
        """The name for messages and lineage: parts joined by dots, quoted only where they need it."""
        parts = [p for p in (self.catalog, self.schema) if p is not None] + [table or self.table]
        return ".".join(p if _plain(p) else backticked(p) for p in parts)


def _plain(part: str) -> bool:
    return part.replace("_", "a").isalnum() and part.isascii()


def parse_table_name(name: str) -> TableName:
    """`name` split into its parts; CatalogError for more than three parts, an empty part, or a
    backtick that does not open or close a whole part."""
    parts = _split(name)
    if len(parts) > len(PARTS):
        raise CatalogError(
            name,
            f"has {len(parts)} parts; a table is named `table`, `schema.table` or `catalog.schema.table` "
            "(a part holding a dot goes in backticks: `my.db`.orders). Nothing was read or written.",
        )
    for part in parts:
        if not part.strip():
            raise CatalogError(
                name,
                "has an empty part; name it `table`, `schema.table` or `catalog.schema.table` with "
                "every part given. Nothing was read or written.",
            )
    return TableName(*reversed(parts))


def _split(name: str) -> list[str]:
    """The parts of a dotted name, backticks honoured (a doubled backtick inside one is a backtick)."""
    parts: list[str] = []
    current, quoted, closed, i = "", False, False, 0
    while i < len(name):
        c = name[i]
        if quoted:
            if c == "`" and name[i + 1 : i + 2] == "`":
                current, i = current + "`", i + 2
                continue
            if c == "`":
                quoted, closed = False, True
            else:
                current += c
        elif c == ".":
            parts.append(current)
            current, closed = "", False
        elif c == "`" and not current and not closed:
            quoted = True
        elif c == "`" or closed:
            raise _bad_backticks(name)
        else:
            current += c
        i += 1
    if quoted:
        raise _bad_backticks(name)
    return [*parts, current]


def _bad_backticks(name: str) -> CatalogError:
    return CatalogError(
        name,
        "has a backtick that does not enclose a whole part; quote a part whole (`my-db`.orders) and "
        "double a backtick inside one. Nothing was read or written.",
    )


def catalog_namespace(target: TableName, catalog: str = "spark") -> str:
    """Who names a catalog table, as OpenLineage's namespace and its asset URI's host: the catalog part,
    else the Spark session's catalog (`spark_catalog`, the namespace of source tables too), or `glue`."""
    return "glue" if catalog == "glue" else (target.catalog or "spark_catalog")


def catalog_uri(target: TableName, stored_table: str, catalog: str = "spark") -> str:
    """A catalog table's asset URI: `catalog://<catalog>/<schema>/<table>` (the table as stored),
    whatever folder the catalog keeps it in."""
    parts = (catalog_namespace(target, catalog), target.schema or "", stored_table)
    return "catalog://" + "/".join(quote(p, safe="") for p in parts)
