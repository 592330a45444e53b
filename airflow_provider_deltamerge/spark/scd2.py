"""scd2 in Spark: row versions, validity columns, and the retire rows of a merge-key load.

`stage_scd2` turns a staged batch into the rows an scd2 plan inserts; `rows_and_retires` adds, for
merge-key loads, one 'retire' row per active target version the batch replaces. See `plan.scd2` for
the rules and the plan.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ConfigError, SourceError
from ..model.naming import HELPER_PREFIX, ROW_ID, SYSTEM_PREFIX
from ..model.run import load_time
from ..plan.merge import ACTION, Operation
from ..plan.scd2 import RETIRE_AT, RetireScope, Scd2Settings, plan_scd2
from .frames import check_key_columns, short_hash
from .names import col, cols
from .schema import align_to_table

log = logging.getLogger(__name__)
# Values as stored, spelled one way whatever the session: UTC, microseconds, null fields left out
# (so a column sent as null, left out of a row, or missing from the batch hashes the same).
HASH_JSON_OPTIONS = {
    "timeZone": "UTC",
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
    "ignoreNullFields": "true",
}
# Helper column: the row's `_dlt_id` is its version hash already, taken over the row with its child
# tables' arrays (so a changed list is a new version, as in dlt), before those arrays left the row.
VERSIONED = HELPER_PREFIX + "versioned"


def stage_scd2(staged, request, snapshot, load_id: str) -> tuple:
    """(staged batch, plan) of an scd2 load: the rows it inserts, aligned to the table, versioned, with
    validity. `staged` is a `stage.StagedBatch`, `request` a `LoadRequest`."""
    settings = Scd2Settings.from_options(request.disposition.scd2)
    boundary = None if settings.boundary_column else settings.boundary or load_time(load_id)
    plan = plan_scd2(
        settings,
        request.hints.merge_key,
        table_exists=snapshot is not None,
        batch_empty=staged.empty,
        boundary=boundary,
    )
    if plan.operation is Operation.NOTHING:
        # No rows, but shaped all the same: an empty window is recorded by an empty write, which must
        # not create the table without its validity columns.
        empty = with_validity(staged.df, settings, boundary or load_time(load_id))
        return dataclasses.replace(staged, df=empty), plan
    if request.cursor is not None and not request.hints.merge_key:
        log.warning(
            "scd2 without a merge_key treats the batch as a full extract: every active row outside this "
            "incremental window is retired. Set merge_key to the natural key for incremental extracts."
        )
    if snapshot is not None:
        check_table(snapshot.schema, settings, request.hints.merge_key, request.table)
    check_batch(staged.df, settings)
    aligned = align_to_table(staged.df, snapshot.schema if snapshot is not None else None, request.table)
    return dataclasses.replace(staged, df=with_validity(aligned, settings, boundary)), plan


def check_table(schema: T.StructType, settings: Scd2Settings, merge_key: tuple[str, ...], table: str) -> None:
    """An existing table must hold the columns scd2 matches on and keeps in step, from its first scd2 load."""
    present = set(schema.fieldNames())
    needed = [("validity_column_names", c) for c in (settings.valid_from, settings.valid_to)]
    needed += [("row_version_column_name", settings.version_column)] + [("merge_key", c) for c in merge_key]
    if settings.active_column:
        needed.append(("active_column_name", settings.active_column))
    for option, column in needed:
        if column not in present:
            raise ConfigError(
                option,
                f"table {table!r} has no column {column!r}, so it was not loaded by scd2 with these options "
                f"(columns: {', '.join(sorted(present))}). scd2 options that name columns must stay the same "
                "for the life of a table: use the table's column names, or load into a new table",
            )


def check_batch(df: DataFrame, settings: Scd2Settings) -> None:
    """Fail on batch columns scd2 writes, and on missing, null or unreadable version or boundary values."""
    for column in settings.system_columns:
        if column in df.columns:
            raise SourceError(
                f"the batch has a column {column!r}, which scd2 writes itself (validity_column_names / "
                "active_column_name); rename that column in the source or choose other scd2 column names"
            )
    if not settings.hashed_version:
        check_key_columns(df, {"row_version_column_name": (settings.version_column,)})
    if settings.boundary_column:
        check_boundary_column(df, settings.boundary_column)


def check_boundary_column(df: DataFrame, column: str) -> None:
    if column not in df.columns:
        raise SourceError(
            f"boundary_column {column!r} is not in the data; "
            f"columns present: {', '.join(_data_columns(df))}. "
            "Fix the boundary_column option or add the column to the source."
        )
    value = boundary_values(df, column)
    counts = df.agg(
        F.sum(col(column).isNull().cast("long")).alias("missing"),
        F.sum((col(column).isNotNull() & value.isNull()).cast("long")).alias("unreadable"),
    ).first()
    if counts["missing"] or counts["unreadable"]:
        raise SourceError(
            f"boundary_column {column!r} is null in {counts['missing'] or 0} row(s) and not a readable "
            f"timestamp in {counts['unreadable'] or 0} row(s); every row needs the time its version became "
            "valid. Nothing was loaded. Fill or fix those values in the source."
        )


def boundary_values(df: DataFrame, column: str) -> Column:
    """The boundary column as UTC timestamps: dates are midnight UTC, timestamps without zone are UTC."""
    data_type = df.schema[column].dataType
    value = col(column)
    if isinstance(data_type, T.TimestampType):
        return value
    if isinstance(data_type, T.DateType):
        return F.timestamp_seconds(F.unix_date(value).cast("long") * 86400)
    if isinstance(data_type, T.TimestampNTZType):
        session_zone = df.sparkSession.conf.get("spark.sql.session.timeZone")
        return F.from_utc_timestamp(value.cast(T.TimestampType()), session_zone)
    if isinstance(data_type, T.StringType):
        return F.try_to_timestamp(value)
    raise SourceError(
        f"boundary_column {column!r} holds {data_type.simpleString()}; it must hold timestamps, dates or "
        "ISO 8601 strings"
    )


def _data_columns(df: DataFrame) -> list[str]:
    return [c for c in df.columns if not c.startswith((SYSTEM_PREFIX, HELPER_PREFIX))]


def row_version_hash(df: DataFrame, settings: Scd2Settings) -> Column:
    """A hash of the row's stored values: data columns by sorted name, system and helper columns left out."""
    columns = sorted(c for c in _data_columns(df) if c not in settings.system_columns)
    as_json = F.to_json(F.struct(*(col(c).alias(c) for c in columns)), HASH_JSON_OPTIONS)
    return short_hash(as_json)


def with_validity(df: DataFrame, settings: Scd2Settings, boundary: datetime | None) -> DataFrame:
    """The rows as new active versions: version hash (by default), valid_from, valid_to, active flag."""
    if VERSIONED in df.columns:
        df = df.drop(VERSIONED)
    elif settings.hashed_version:
        df = df.withColumn(ROW_ID, row_version_hash(df, settings))
    valid_from = F.lit(boundary) if boundary is not None else boundary_values(df, settings.boundary_column)
    df = df.withColumn(settings.valid_from, valid_from.cast(T.TimestampType()))
    df = df.withColumn(settings.valid_to, F.lit(settings.active_marker).cast(T.TimestampType()))
    if settings.active_column:
        df = df.withColumn(settings.active_column, F.lit(True))
    return df


def is_active(valid_to: Column, active_marker: datetime | None) -> Column:
    return (
        valid_to.isNull()
        if active_marker is None
        else valid_to == F.lit(active_marker).cast(T.TimestampType())
    )


def rows_and_retires(rows: DataFrame, target: DataFrame, scope: RetireScope) -> DataFrame:
    """The batch as 'insert' rows plus one 'retire' row per active target version the batch replaces.

    A version is replaced when its merge-key value occurs in the batch and its (merge key, version)
    does not; its retire row carries the latest valid_from of the batch rows with that merge-key value.
    """
    keys = list(scope.merge_key)
    matched = list(dict.fromkeys((*keys, scope.version_column)))
    active = (
        target.filter(is_active(col(scope.valid_to), scope.active_marker)).select(*cols(matched)).distinct()
    )
    retire_at = rows.groupBy(*cols(keys)).agg(F.max(col(scope.valid_from)).alias(RETIRE_AT))
    retired = (
        active.join(retire_at, on=keys, how="inner")
        .join(rows.select(*cols(matched)).distinct(), on=matched, how="left_anti")
        .withColumn(ACTION, F.lit("retire"))
    )
    inserts = rows.withColumn(ACTION, F.lit("insert")).withColumn(
        RETIRE_AT, F.lit(None).cast(T.TimestampType())
    )
    return inserts.unionByName(retired, allowMissingColumns=True)
