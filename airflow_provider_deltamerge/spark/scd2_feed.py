"""scd2 of change events in Spark: the batch's events as versions, and the MERGE source that inserts
them into a key's history and closes the versions they fall into (rules: plan/scd2_feed.py).

A staged row flagged as a delete (HARD_DELETE_FLAG, true where the event deletes its key) is a point of
the history that opens no version: the version it falls into ends at its sequence. `apply_as_deletes`
sets the flag in staging; the deletes earlier loads remembered for the batch's keys join the staged
rows, flagged, before this (load/tombstones.py).
"""

from __future__ import annotations

import dataclasses

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ConfigError
from ..model.cdc import sequence_columns
from ..model.naming import HELPER_PREFIX, ROW_ID
from ..plan.merge import ACTION, HARD_DELETE_FLAG
from ..plan.scd2 import RETIRE_AT, Scd2Settings
from ..plan.scd2_feed import BY_DELETE, SPLIT, FeedScope, plan_scd2_events
from .frames import materialize
from .names import col, cols
from .scd2 import check_batch, check_table, row_version_hash
from .schema import align_to_table

POINT = HELPER_PREFIX + "point"  # a sequence where a key's history changes: a version opens or ends
KIND = HELPER_PREFIX + "kind"  # what happens there (ordered: an end before a version opening there)
OLD_TO = HELPER_PREFIX + "old_to"  # a table version's valid_to before this load
NEXT = HELPER_PREFIX + "next"  # the next point of the key: where the version opened here ends
NEXT_KIND = HELPER_PREFIX + "next_kind"  # what that next point is (END: the version ends at a delete)
END, VERSION, EVENT = 0, 1, 2  # KIND: a delete, a table version, a new event's version


def stage_scd2_events(staged, request, snapshot, load_id: str) -> tuple:
    """(staged batch, plan) of an scd2 load of change events: the events as versions, valid until the
    next event of their key in the batch, aligned to the table. `staged` is a `stage.StagedBatch`."""
    settings = Scd2Settings.from_options(request.disposition.scd2)
    merge_key = request.hints.merge_key
    sequence = request.hints.sequence_by
    plan = plan_scd2_events(
        settings,
        merge_key,
        table_exists=snapshot is not None,
        batch_empty=staged.empty,
        sequence_fields=tuple(sequence) if len(sequence) > 1 else (),
    )
    schema = snapshot.schema if snapshot is not None else None
    if snapshot is not None and not staged.empty:
        check_table(schema, settings, merge_key, request.table)
    check_batch(staged.df, settings)
    versions = batch_versions(staged.df, settings, merge_key, request.hints.sequence_by)
    check_sequence_type(schema, versions.schema[settings.valid_from].dataType, settings, request.hints)
    aligned = align_to_table(versions, schema, request.table, keep=(HARD_DELETE_FLAG,))
    return dataclasses.replace(staged, df=aligned), plan


def batch_versions(
    df: DataFrame, settings: Scd2Settings, merge_key: tuple[str, ...], sequence: tuple[str, ...]
) -> DataFrame:
    """Each event as a version: its hash in `_dlt_id`, valid from its sequence (`sequence_value`) until
    the next event of its key in the batch (a delete's too), the active flag where asked for."""
    kept = sequence_columns(len(sequence))
    df = df.withColumn(ROW_ID, row_version_hash(df, settings))
    df = df.withColumn(settings.valid_from, sequence_value(df, sequence)).drop(*kept)
    valid_to = F.lit(None)
    if all(c in df.columns for c in merge_key):  # an empty batch may lack them
        following = Window.partitionBy(*cols(merge_key)).orderBy(col(settings.valid_from))
        valid_to = F.lead(col(settings.valid_from)).over(following)
    df = df.withColumn(settings.valid_to, valid_to.cast(df.schema[settings.valid_from].dataType))
    if settings.active_column:
        df = df.withColumn(settings.active_column, col(settings.valid_to).isNull())
    return df


def sequence_value(df: DataFrame, sequence: tuple[str, ...]) -> Column:
    """An event's sequence as one value: its system columns (`_dlt_sequence`, ...) where staging kept
    them, else the sequence_by columns; of several columns, a struct of them (in order, named after the
    sequence_by columns), which Spark and Delta compare field by field, the first that differs
    deciding, as AUTO CDC's `sequence_by=struct(...)` does. Null where the batch lacks them."""
    kept = sequence_columns(len(sequence))
    parts = kept if all(c in df.columns for c in kept) else sequence
    if not all(c in df.columns for c in parts):
        return F.lit(None)
    if len(parts) == 1:
        return col(parts[0])
    return F.struct(*(col(p).alias(name) for p, name in zip(parts, sequence, strict=True)))


def check_sequence_type(schema, kind, settings: Scd2Settings, hints) -> None:
    """The batch's sequence must have the type the table's validity bounds have (one column, or the
    same struct of several): the bounds of one history are compared with each other."""
    if schema is None or settings.valid_from not in schema.fieldNames() or isinstance(kind, T.NullType):
        return
    stored = schema[settings.valid_from].dataType
    if _shape(stored) != _shape(kind):
        raise ConfigError(
            "sequence_by",
            f"{list(hints.sequence_by)} gives sequences of type {kind.simpleString()}, but the versions of "
            f"the table hold {settings.valid_from!r} as {stored.simpleString()}: one history's bounds are "
            "compared with each other. Load it with the sequence_by it was built with, or into a new table",
        )


def _shape(kind) -> tuple:
    """A type's shape as sequences compare it: a struct's field names, in order, else whether it is one."""
    if isinstance(kind, T.StructType):
        return tuple(f.name for f in kind.fields)
    return ()


def versions_and_closes(rows: DataFrame, target: DataFrame, scope: FeedScope) -> DataFrame:
    """The MERGE source: an 'insert' row per new event (a non-delete event at a sequence where the
    table holds no version of its key), valid until the next point of its key in the batch or the table;
    a 'retire' row per table version whose end moves earlier (SPLIT where it was closed already).
    Computed once (materialised), so the commit and the metrics see the same rows."""
    keys = list(scope.merge_key)
    at = [*keys, scope.valid_from]
    deletes = F.col(HARD_DELETE_FLAG) if HARD_DELETE_FLAG in rows.columns else F.lit(False)
    versions = target.join(rows.select(*cols(keys)).distinct(), on=keys, how="left_semi")
    new = rows.join(versions.select(*cols(at)), on=at, how="left_anti")  # not delivered before
    points = _table_points(versions, scope).unionByName(
        new.select(
            *cols(keys),
            col(scope.valid_from).alias(POINT),
            F.when(deletes, F.lit(END)).otherwise(F.lit(EVENT)).alias(KIND),
            F.lit(None).cast(versions.schema[scope.valid_to].dataType).alias(OLD_TO),
        )
    )
    order = Window.partitionBy(*cols(keys)).orderBy(F.col(POINT), F.col(KIND))
    points = points.withColumn(NEXT, F.lead(F.col(POINT)).over(order))
    points = points.withColumn(NEXT_KIND, F.coalesce(F.lead(F.col(KIND)).over(order) == END, F.lit(False)))
    retired = points.filter((F.col(KIND) == VERSION) & ~F.col(OLD_TO).eqNullSafe(F.col(NEXT))).select(
        *cols(keys),
        F.col(POINT).alias(scope.valid_from),
        F.col(NEXT).alias(RETIRE_AT),
        F.col(OLD_TO).isNotNull().alias(SPLIT),
        F.col(NEXT_KIND).alias(BY_DELETE),
        F.lit("retire").alias(ACTION),
    )
    ends = points.filter(F.col(KIND) == EVENT).select(
        *cols(keys), F.col(POINT).alias(scope.valid_from), NEXT, F.col(NEXT_KIND).alias(BY_DELETE)
    )
    inserts = new.filter(~deletes).drop(HARD_DELETE_FLAG, scope.valid_to).join(ends, on=at, how="inner")
    inserts = inserts.withColumnRenamed(NEXT, scope.valid_to)
    if scope.active_column:
        inserts = inserts.withColumn(scope.active_column, col(scope.valid_to).isNull())
    inserts = inserts.select(
        *(col(c) for c in rows.columns if c != HARD_DELETE_FLAG),
        F.lit("insert").alias(ACTION),
        F.lit(None).cast(retired.schema[RETIRE_AT].dataType).alias(RETIRE_AT),
        F.lit(False).alias(SPLIT),
        F.col(BY_DELETE),
    )
    return materialize(inserts.unionByName(retired, allowMissingColumns=True))


def versions_split(source: DataFrame) -> int:
    """How many closed table versions the source closes earlier (late events split them)."""
    return source.filter(F.col(SPLIT)).count() if SPLIT in source.columns else 0


def versions_closed_by_deletes(source: DataFrame) -> int:
    """How many versions the source makes end at a delete: new versions a delete closes, and table
    versions whose end moves to a delete."""
    return source.filter(F.col(BY_DELETE)).count() if BY_DELETE in source.columns else 0


def written_versions_closed_by_deletes(staged: DataFrame, scope: FeedScope) -> int:
    """For the first load of a table (written, not merged): how many of its versions end at a delete
    of the batch."""
    if HARD_DELETE_FLAG not in staged.columns:
        return 0
    keys = list(scope.merge_key)
    ends = staged.filter(F.col(HARD_DELETE_FLAG)).select(*cols(keys), col(scope.valid_from).alias(POINT))
    versions = staged.filter(~F.col(HARD_DELETE_FLAG)).select(*cols(keys), col(scope.valid_to).alias(POINT))
    return versions.join(ends.distinct(), on=[*keys, POINT], how="left_semi").count()


def _table_points(versions: DataFrame, scope: FeedScope) -> DataFrame:
    """The table's versions of the batch's keys as points, and the deletes their gaps imply: a version
    closed before the next one opens (or closed, and the last) ends at a delete."""
    keys = list(scope.merge_key)
    valid_from, valid_to = col(scope.valid_from), col(scope.valid_to)
    following = Window.partitionBy(*cols(keys)).orderBy(valid_from)
    versions = versions.withColumn(NEXT, F.lead(valid_from).over(following))
    opened = versions.select(
        *cols(keys), valid_from.alias(POINT), F.lit(VERSION).alias(KIND), valid_to.alias(OLD_TO)
    )
    gap = valid_to.isNotNull() & ~valid_to.eqNullSafe(F.col(NEXT))
    ended = versions.filter(gap).select(
        *cols(keys),
        valid_to.cast(versions.schema[scope.valid_from].dataType).alias(POINT),
        F.lit(END).alias(KIND),
        F.lit(None).cast(versions.schema[scope.valid_to].dataType).alias(OLD_TO),
    )
    return opened.unionByName(ended)
