"""Which child tables a table has in its dataset. Once a table has child tables, every later load of it
processes them (dlt's WD-7), also when its batch has no rows for them, so they are found on storage
rather than in the batch: the Delta tables beside it named `<table>__...` that have a `_dlt_parent_id`
column and whose nearest table above them by name is the table or one of its child tables (so a table
of its own named `<table>__archive`, and that table's child tables, are left alone)."""

from __future__ import annotations

import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError
from deltalake.fs import DeltaStorageHandler

from ..model.naming import table_path
from ..plan.nested import (
    PARENT_ID,
    SEPARATOR,
    NestedPlan,
    check_not_adopted,
    check_root_table,
    is_child_table_of,
)
from .storage import unreadable_store
from .store import HISTORY_DEPTH


def existing_child_tables(dataset: str, root: str, storage_options: dict | None = None) -> tuple[str, ...]:
    """The names of `root`'s child tables (any depth) in `dataset`, sorted."""
    folders = _folders(dataset, storage_options)
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


def _folders(dataset: str, storage_options: dict | None) -> list[str]:
    """The folders directly in `dataset`, listed by delta-rs with the options its tables are read with
    (an object store's endpoint and credentials). A store that cannot be listed is refused: guessing
    "no child tables" would leave the children of merged rows stale."""
    try:
        filesystem = pafs.PyFileSystem(DeltaStorageHandler(dataset, storage_options))
        entries = filesystem.get_file_info(pafs.FileSelector("", allow_not_found=True))
    except TableNotFoundError:  # a local dataset folder that does not exist yet
        return []
    except (OSError, DeltaError) as exc:
        raise unreadable_store(dataset, exc, storage_options) from exc
    return [e.base_name for e in entries if e.type == pafs.FileType.Directory]


def _has_parent_key(path: str, storage_options: dict | None) -> bool:
    return PARENT_ID in {f.name for f in DeltaTable(path, storage_options=storage_options).schema().fields}


def refuse_adopting_tables(
    dataset: str, root: str, plan: NestedPlan, written: tuple[str, ...], existing: tuple[str, ...], history
) -> None:
    """Refuse child tables of the load (`written`) that exist as tables of their own or of another root
    (plan.nested.check_not_adopted). `history` is the writer's (path, limit) -> commits, read once per
    child table the load writes."""
    check_not_adopted(root, plan, existing, _root_tables(dataset, written, history))


def refuse_loading_a_child_table(dataset: str, table: str, history) -> None:
    """Refuse loading directly into a child table of another table (its name holds the separator, and
    its commits name a root table). `history`: the writer's (path, limit) -> commits."""
    if SEPARATOR in table:
        check_root_table(table, _root_tables(dataset, [table], history).get(table, ()))


def _root_tables(dataset: str, names, history) -> dict[str, set[str | None]]:
    """For each of `names` that is a table: the `root_table` its recent loads' commits name (None for a
    commit of a table loaded on its own)."""
    found = {}
    for name in names:
        commits = history(table_path(dataset, name), HISTORY_DEPTH)
        if commits:
            found[name] = {c.metadata.get("root_table") for c in commits if c.load_id}
    return found
