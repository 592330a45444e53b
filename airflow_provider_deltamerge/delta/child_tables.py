"""Which child tables a table has in its dataset: the folders beside it named `<table>__...` that hold a
Delta table. Once a table has child tables, every later load of it processes them (dlt's WD-7), also
when its batch has no rows for them, so they are found on storage rather than in the batch."""

from __future__ import annotations

import logging

import pyarrow.fs as pafs
from deltalake import DeltaTable

from ..plan.nested import is_child_table_of
from ..spec.naming import table_path

log = logging.getLogger(__name__)


def existing_child_tables(dataset: str, root: str) -> tuple[str, ...]:
    """The names of the Delta tables in `dataset` that are child tables of `root` (any depth), sorted."""
    try:
        filesystem, base = pafs.FileSystem.from_uri(dataset if "://" in dataset else f"file://{dataset}")
        entries = filesystem.get_file_info(pafs.FileSelector(base, allow_not_found=True))
    except (OSError, ValueError) as exc:  # pyarrow cannot list this store: only the batch's tables count
        log.warning(
            "cannot list the tables of %s (%s); child tables without rows in this batch are left as they are",
            dataset,
            exc,
        )
        return ()
    names = sorted(
        e.base_name
        for e in entries
        if e.type == pafs.FileType.Directory and is_child_table_of(root, e.base_name)
    )
    return tuple(n for n in names if DeltaTable.is_deltatable(table_path(dataset, n)))
