"""The extract and stage steps of a load: the batch read from its source (a callable given the window),
named and shaped for the table; then staged in one pass, collected to the driver as Arrow where the
writer and the commit take it (load/staged_arrow.py), and the partitions a merge condition may name.
"""

from __future__ import annotations

from ..model.request import LoadRequest
from ..spark.python_rows import extracted
from ..spark.schema_steps import stored_column_schema
from ..spark.sql_parameters import bind_parameters_in_analyzer
from ..spark.stage import stage_batch
from . import (
    staged_arrow,
)


def extract(spark, data, request: LoadRequest, window, table, commits):
    if callable(data) and not hasattr(data, "sparkSession"):
        bind_parameters_in_analyzer(spark)
        data = data(spark, window)
    table_schema = table.schema if table is not None else None
    return extracted(spark, data, request, table_schema, stored_column_schema(commits), window)


def stage(request: LoadRequest, batch, table, load_id: str, schema, collect, checks=None):
    """The staged batch: collected to the driver by its one pass by `collect`
    (load/staged_arrow.py's `staging_collection`, asked before the expectations), else materialised in
    Spark. `checks`: the load's expectations, which the driver decides where they ask to
    (spark/expectations.py), from the flagged rows the pass collects."""
    flagged = None
    if collect is not None and checks is not None and checks.on_driver is not None:
        collect, flagged = checks.collecting(collect), checks.flagged
    folders = tuple(table.partition_columns) if table is not None else schema.partition_by
    to_name = partitions_to_name(request, table)
    hints = request.hints
    staged = stage_batch(batch, request.disposition, hints, load_id, collect, to_name, folders, flagged)
    return staged_arrow.checked(staged, request, table) if staged.arrow is not None else staged


def partitions_to_name(request: LoadRequest, table) -> tuple[str, ...]:
    """The partition columns whose values in the batch a merge condition may name: those of an existing
    table a merge other than scd2 goes into (scd2 plans are not bounded, and a new table is written)."""
    merges = request.disposition.disposition == "merge" and request.disposition.scd2 is None
    return tuple(table.partition_columns) if merges and table is not None else ()
