"""What a catalog holds under a table's name, and what every catalog client offers (pure).

A catalog client (Spark's session catalog, AWS Glue's API) answers in these terms, so a load asks
the same questions of whichever catalog names its table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CatalogTable:
    """An entry of a catalog: `kind` is "delta" for a Delta table, else what the catalog calls it
    ("view", "parquet", "hive", ...); `location` is the table's storage URI (None for a view);
    `managed` is whether the catalog owns the table's storage (dropping it deletes the data)."""

    schema: str
    name: str
    kind: str
    location: str | None
    managed: bool


class Catalog(Protocol):
    """A catalog's schemas (databases) and tables. Every method raises CatalogError (naming the
    table or schema, credentials masked) where the catalog refuses or cannot be reached."""

    def schemas(self) -> list[str]:
        """The schemas the catalog holds, sorted."""
        ...

    def schema_location(self, schema: str) -> str | None:
        """Where a schema keeps its tables' storage, where the catalog says (None where it does not)."""
        ...

    def table(self, schema: str, name: str) -> CatalogTable | None:
        """The entry under `schema.name`, or None where the catalog holds none."""
        ...

    def create_schema(self, schema: str, location: str | None = None) -> None:
        """Create `schema` (at `location` where given); nothing where it exists."""
        ...

    def register(self, schema: str, name: str, location: str) -> None:
        """Register the Delta table at `location` as `schema.name`; nothing where that entry exists at
        `location` already (two registrations of one table at once both succeed)."""
        ...
