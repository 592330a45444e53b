"""insert-only's duplicate keys, as dlt treats them: a key the table holds already inserts nothing, however
often the batch has it, so its duplicates are no error; duplicates of a key the table lacks stay refused
(DuplicateKeyError), since it is unclear which row to insert.

The writer refuses any duplicated key before it commits; only then (never on the common path) are the
table's keys read, the batch's rows of duplicated keys the table holds dropped, and the commit made again.
A load with child tables checks the root's keys so before the child tables commit.
"""

from __future__ import annotations

import logging

import pyarrow as pa

from ..delta import unique_keys
from ..errors import DuplicateKeyError
from ..plan.merge import Operation
from ..spark.extract import arrow_to_spark
from ..spark.names import cols

log = logging.getLogger(__name__)


def commit(spark, writer, path: str, table, plan, source, request):
    """The writer's commit of `plan`; an insert-only source's duplicated keys the table holds dropped."""
    try:
        return writer.commit(spark, path, table, plan, source, request)
    except DuplicateKeyError:
        if plan.strategy != "insert-only" or plan.operation is not Operation.MERGE or table is None:
            raise
        source = _without_held_duplicates(spark, writer, table, list(plan.unique_key), source)
        return writer.commit(spark, path, table, plan, source, request)


def check_before_child_tables(spark, writer, table, plan, source) -> None:
    """The root's duplicate keys refused before any child table commits, as the root's commit would
    refuse them (an insert-only source's duplicates of keys the table holds are no error): a load refused
    leaves every table as it was."""
    keys = plan.unique_key
    if not keys or plan.operation is not Operation.MERGE:
        return
    try:
        _check_unique(source, plan)
    except DuplicateKeyError:
        if plan.strategy != "insert-only" or table is None:
            raise
        _check_unique(_without_held_duplicates(spark, writer, table, list(keys), source), plan)


def _check_unique(source, plan) -> None:
    if isinstance(source, pa.Table):
        unique_keys.check_arrow(source, plan)
    else:
        unique_keys.check_spark(source, plan)


def _without_held_duplicates(spark, writer, table, keys: list[str], source):
    """`source` (Arrow or a DataFrame) without the rows of keys it has more than once that the table
    holds: the merge would insert none of them."""
    if isinstance(source, pa.Table):
        duplicated = unique_keys.duplicated_keys(source, keys)
        duplicated_df = arrow_to_spark(spark, duplicated) if duplicated.num_rows else None
    else:
        duplicated_df = source.groupBy(*cols(keys)).count().filter("`count` > 1").select(*cols(keys))
    if duplicated_df is None:
        return source
    held = writer.read_columns(spark, table, keys).join(duplicated_df, on=keys, how="left_semi")
    held_keys = {tuple(row[c] for c in keys) for row in held.distinct().collect()}
    if not held_keys:
        return source
    log.info("insert-only: %d duplicated key(s) the table holds already insert nothing", len(held_keys))
    if isinstance(source, pa.Table):
        keep = [tuple(row[c] for c in keys) not in held_keys for row in source.select(keys).to_pylist()]
        return source.filter(pa.array(keep, pa.bool_()))
    return source.join(held.distinct(), on=keys, how="left_anti")
