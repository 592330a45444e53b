"""What a catalog holds under a table's name, and what every catalog client offers (pure).

A catalog client (Spark's session catalog, AWS Glue's API) answers in these terms, so a load asks
the same questions of whichever catalog names its table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from ..errors import CatalogError
from .storage import STORE_NAMES, store_of, stores_reached


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


def check_location_reached(
    table_name: str, location: str | None, options: Mapping[str, str] | None, dataset: str | None
) -> None:
    """CatalogError where the catalog keeps a table (or a schema its new tables) on an object store the
    load's storage options do not reach (and that is not the store of the `dataset` it was given): the
    load would fail halfway, or write with the wrong credentials. Local, HDFS and other paths pass."""
    store = store_of(location or "")
    if store is None or store in stores_reached(options) or store == store_of(dataset or ""):
        return
    others = sorted(STORE_NAMES[s] for s in stores_reached(options))
    carried = f"are for {' and '.join(others)}" if others else "name no object store's settings"
    raise CatalogError(
        table_name,
        f"the catalog keeps it at {location!r}, on {STORE_NAMES[store]}, which this load's storage "
        f"options do not reach (they {carried}); set storage options for {STORE_NAMES[store]} "
        f"({_WHAT_TO_SET[store]}), or name a table the storage connection reaches. Nothing was written.",
    )


_WHAT_TO_SET = {
    "s3": "operators: storage_conn_id an AWS connection; run_load: AWS_* storage_options, AWS_REGION "
    "alone to take the environment's credentials",
    "azure": "operators: storage_conn_id an Azure (wasb/adls) connection; run_load: "
    "azure_storage_account_name and its key or SAS token",
    "gcs": "run_load and operators: google_* storage_options, such as google_service_account_path",
}
