"""Which child tables a table has in its dataset. Once a table has child tables, every later load of it
processes them (dlt's WD-7), also when its batch has no rows for them, so they are found on storage
rather than in the batch: the Delta tables beside it named `<table>__...` that have a `_dlt_parent_id`
column and whose nearest table above them by name is the table or one of its child tables (so a table
of its own named `<table>__archive`, and that table's child tables, are left alone)."""

from __future__ import annotations

import logging

import pyarrow.fs as pafs
from deltalake import DeltaTable

from ..plan.nested import PARENT_ID, SEPARATOR, is_child_table_of
from ..spec.naming import table_path

log = logging.getLogger(__name__)


def existing_child_tables(dataset: str, root: str, storage_options: dict | None = None) -> tuple[str, ...]:
    """The names of `root`'s child tables (any depth) in `dataset`, sorted."""
    folders = _folders(dataset)
    candidates = sorted((n for n in folders if is_child_table_of(root, n)), key=len)
    tables = {n for n in candidates if DeltaTable.is_deltatable(table_path(dataset, n), storage_options)}
    children: list[str] = []
    for name in candidates:
        if name not in tables or not _has_parent_key(table_path(dataset, name), storage_options):
            continue
        parts = name.split(SEPARATOR)
        above = (SEPARATOR.join(parts[:i]) for i in range(len(parts) - 1, 0, -1))
        nearest = next((a for a in above if a == root or a in tables), None)
        if nearest == root or nearest in children:
            children.append(name)
    return tuple(sorted(children))


def _folders(dataset: str) -> list[str]:
    try:
        filesystem, base = pafs.FileSystem.from_uri(dataset if "://" in dataset else f"file://{dataset}")
        entries = filesystem.get_file_info(pafs.FileSelector(base, allow_not_found=True))
    except (OSError, ValueError) as exc:  # pyarrow cannot list this store: only the batch's tables count
        log.warning(
            "cannot list the tables of %s (%s); child tables without rows in this batch are left as they are",
            dataset,
            exc,
        )
        return []
    return [e.base_name for e in entries if e.type == pafs.FileType.Directory]


def _has_parent_key(path: str, storage_options: dict | None) -> bool:
    return PARENT_ID in {f.name for f in DeltaTable(path, storage_options=storage_options).schema().fields}
