"""A load's table properties on an existing table: checked against the load before anything is read,
set by one metadata commit after the batch is staged and before the load's own commit.

A table the load creates gets its properties with its first commit (the writers take them from the
CommitRequest), so nothing here runs for it but the check.
"""

from __future__ import annotations

import logging

from ..model.table_properties import check_loading_allowed, differing

log = logging.getLogger(__name__)


def check_table_allows_load(spark, writer, request, table, replaces_window: bool) -> None:
    """Refuse, before anything is read or written, a load that the table's properties (as they are, with
    the load's own applied) would make fail at its commit: an append-only table takes plain appends."""
    wanted = request.table_properties or {}
    disposition = request.disposition.disposition
    removes_rows = disposition != "append" or replaces_window  # only then can appendOnly stand in the way
    current = writer.table_properties(spark, table) if table is not None and removes_rows else {}
    check_loading_allowed({**current, **wanted}, disposition, replaces_window, request.table)


def apply_table_properties(spark, writer, request, table):
    """The table after its properties are what the load asks for: unchanged when they already are, else a
    new snapshot after one metadata commit that sets those that differ. Returns (snapshot, what was set)."""
    if table is None or not request.table_properties:
        return table, {}
    changes = differing(request.table_properties, writer.table_properties(spark, table))
    if not changes:
        return table, {}
    writer.set_table_properties(spark, request.table_path, changes)
    log.info("table %s: set %s", request.table_path, changes)
    return writer.snapshot(spark, request.table_path), changes
