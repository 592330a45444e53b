"""scd2 of change events with tracked columns in Spark: the batch's keys' histories rebuilt from all
their events, and the MERGE source that makes the table hold them (rules: plan/scd2_history.py).

The events of a key are points in sequence order (window functions over the key):
- an event opens a version where it is not a delete and the point before it is none, a delete, or an
  event whose tracked columns (their JSON) differ; the running count of openings numbers the versions;
- a version is valid from its opening event until the point after its newest event (lead), and holds
  that newest event's values;
- the rebuilt versions are joined with the table's versions of the keys on (merge key, valid_from).
Staged rows carry ORIGIN: KEPT (read from the companion table), BATCH (the batch's events and deletes,
remembered deletes too); the table's versions no kept event opens join as SYNTH events. Of the points
at one (key, sequence) the first of kept, batch event, delete counts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ConfigError, MissingKeyColumnError
from ..model import null_updates, track_history
from ..model.cdc import SEQUENCE, sequence_columns
from ..model.naming import HELPER_PREFIX, LOAD_ID, ROW_ID, SYSTEM_PREFIX
from ..model.track_history import missing_tracked, tracked_columns
from ..plan.merge import ACTION, HARD_DELETE_FLAG
from ..plan.scd2 import Scd2Settings
from ..plan.scd2_feed import BY_DELETE, SPLIT
from ..plan.scd2_history import (
    DELETE,
    INSERT,
    NEW_EVENTS,
    NEW_OPENER,
    SAME,
    UPDATE,
    HistoryScope,
    plan_scd2_history,
)
from .frames import materialize
from .names import col, cols
from .scd2 import check_batch, check_table, row_version_hash
from .scd2_feed import check_sequence_type, sequence_value
from .schema import align_to_table

ORIGIN = HELPER_PREFIX + "origin"  # where a point comes from: KEPT, SYNTH or BATCH
KEPT, SYNTH, BATCH = 0, 1, 2
_RANK, _OPENS, _GROUP = HELPER_PREFIX + "rank", HELPER_PREFIX + "opens", HELPER_PREFIX + "group"
_TRACKED, _NEXT, _NEXT_DELETE = HELPER_PREFIX + "tracked", HELPER_PREFIX + "next", HELPER_PREFIX + "next_d"
_OLD_TO, _OLD_ID, _IS_VERSION = HELPER_PREFIX + "old_to", HELPER_PREFIX + "old_id", HELPER_PREFIX + "is_v"
_IN_TABLE = HELPER_PREFIX + "in_table"
_SINCE, _RAW = HELPER_PREFIX + "since", HELPER_PREFIX + "raw_"  # partial updates: deletes so far; as it came


@dataclass(frozen=True)
class Rebuilt:
    """A load's rebuilt histories: every version of its keys with its ACTION (SAME where the table holds
    it as it is), and the events to keep (the batch's new ones, and the table's versions no kept event
    opened), both computed once."""

    versions: DataFrame
    events_to_keep: DataFrame


def stage_scd2_history(staged, request, snapshot) -> tuple:
    """(staged events, plan): the batch's events as points (sequence in SEQUENCE, ORIGIN), checked."""
    settings = Scd2Settings.from_options(request.disposition.scd2)
    hints = request.hints
    df = staged.df
    if snapshot is not None and not staged.empty:
        check_table(snapshot.schema, settings, hints.merge_key, request.table)
    check_batch(df, settings)
    missing = missing_tracked(hints, df.columns) if not staged.empty else []
    if missing:
        data = [c for c in df.columns if not c.startswith((SYSTEM_PREFIX, HELPER_PREFIX))]
        raise ConfigError(
            "track_history_column_list",
            f"names column(s) {missing} the events lack (their stored columns: {data}); track columns "
            "the events carry",
        )
    lacking = [c for c in hints.ignore_null_updates_column_list if c not in df.columns]
    if lacking and not staged.empty:
        data = [c for c in df.columns if not c.startswith((SYSTEM_PREFIX, HELPER_PREFIX))]
        raise MissingKeyColumnError(lacking[0], "ignore_null_updates_column_list", data)
    tracked = (
        tracked_columns(hints, df.columns, settings.system_columns) if track_history.active(hints) else None
    )
    plan = plan_scd2_history(
        settings,
        hints.merge_key,
        tracked,
        table_exists=snapshot is not None,
        batch_empty=staged.empty,
        sequence_fields=tuple(hints.sequence_by) if len(hints.sequence_by) > 1 else (),
        filled=null_updates.subject_columns(
            hints, [c for c in df.columns if c not in settings.system_columns]
        ),
    )
    sequence = sequence_value(df, hints.sequence_by)  # several columns: one struct of them
    df = df.withColumn(SEQUENCE, sequence).drop(*sequence_columns(len(hints.sequence_by))[1:])
    if snapshot is not None:
        check_sequence_type(snapshot.schema, df.schema[SEQUENCE].dataType, settings, hints)
    if ORIGIN not in df.columns:
        df = df.withColumn(ORIGIN, F.lit(BATCH))
    return dataclasses.replace(staged, df=df), plan


def rebuild(events: DataFrame, target: DataFrame | None, scope: HistoryScope, settings, load_id, table):
    """The histories of the events' keys, rebuilt (see the module's doc), against `target` (the table's
    versions, all columns; None for a new table)."""
    keys = list(scope.merge_key)
    events = events.drop(LOAD_ID, ROW_ID)
    deleted = F.col(HARD_DELETE_FLAG) if HARD_DELETE_FLAG in events.columns else F.lit(None)
    events = events.withColumn(HARD_DELETE_FLAG, F.coalesce(deleted.cast("boolean"), F.lit(False)))
    if target is not None:
        target = target.join(events.select(*cols(keys)).distinct(), on=keys, how="left_semi")
        synthesized = _synthesized(events, target, scope, _data(target.columns, settings))
        events = events.unionByName(synthesized, allowMissingColumns=True)
    data = _data(events.columns, settings)
    filled = tuple(c for c in scope.filled if c in data)
    points = _filled(_one_per_place(events, keys), keys, filled)
    points = materialize(_numbered(points, keys, scope.tracked))
    versions = _versions(points, keys, data, scope, settings, load_id)
    schema = target.schema if target is not None else None
    versions = align_to_table(versions, schema, table, keep=(*_helpers(), ROW_ID))
    typed = [c for c in data if c not in keys and not isinstance(points.schema[c].dataType, T.NullType)]
    kept = points.filter(~F.col(HARD_DELETE_FLAG) & (F.col(ORIGIN) != KEPT))
    raw = [F.col(_RAW + c).alias(c) if c in filled else col(c) for c in typed]  # as it came
    kept = kept.select(*cols(keys), *_sequence_parts(points), *raw)  # a column of nulls only: no type
    return Rebuilt(materialize(_compared(versions, target, scope)), kept)


def _sequence_parts(points: DataFrame) -> list[Column]:
    """SEQUENCE as the companion table keeps it: one column, or a struct's fields in `_dlt_sequence`,
    `_dlt_sequence_2`, ..."""
    kind = points.schema[SEQUENCE].dataType
    if not isinstance(kind, T.StructType):
        return [F.col(SEQUENCE)]
    names = sequence_columns(len(kind.fields))
    return [F.col(SEQUENCE).getField(f.name).alias(n) for f, n in zip(kind.fields, names, strict=True)]


def merge_source(rebuilt: Rebuilt, merging: bool) -> DataFrame:
    """What the writer commits: the versions that change (MERGE), or all of them without helper
    columns (the WRITE of a new table)."""
    if merging:
        return rebuilt.versions.filter(F.col(ACTION) != SAME)
    return rebuilt.versions.drop(*_helpers())


def counts(rebuilt: Rebuilt) -> dict[str, int]:
    """What the rebuild did: new events (opening or absorbed), those absorbed, closed versions split,
    versions made to end at a delete."""
    row = rebuilt.versions.agg(
        F.coalesce(F.sum(NEW_EVENTS), F.lit(0)).alias("new"),
        F.coalesce(F.sum(NEW_OPENER), F.lit(0)).alias("opened"),
        F.count_if(F.col(SPLIT)).alias("split"),
        F.count_if(F.col(BY_DELETE)).alias("by_delete"),
    ).collect()[0]
    return {
        "new": int(row["new"]),
        "absorbed": int(row["new"]) - int(row["opened"]),
        "split": int(row["split"]),
        "by_delete": int(row["by_delete"]),
    }


def _synthesized(events: DataFrame, target: DataFrame, scope: HistoryScope, data: list[str]) -> DataFrame:
    """The table's versions that no kept event opens (loaded before the lists were used) as events."""
    keys = list(scope.merge_key)
    opened = events.filter(F.col(ORIGIN) == KEPT).select(*cols(keys), F.col(SEQUENCE).alias(scope.valid_from))
    versions = target.join(opened, on=[*keys, scope.valid_from], how="left_anti")
    kind = events.schema[SEQUENCE].dataType
    return versions.select(
        *cols(data),
        col(scope.valid_from).cast(kind).alias(SEQUENCE),
        F.lit(False).alias(HARD_DELETE_FLAG),
        F.lit(SYNTH).alias(ORIGIN),
    )


def _one_per_place(events: DataFrame, keys: list[str]) -> DataFrame:
    """One point per (key, sequence): a kept (or the table's) event, else the batch's event, else a
    delete."""
    priority = F.when(F.col(HARD_DELETE_FLAG), F.lit(3)).otherwise(F.col(ORIGIN))
    place = Window.partitionBy(*cols(keys), F.col(SEQUENCE)).orderBy(priority)
    ranked = events.withColumn(_RANK, F.row_number().over(place))
    return ranked.filter(F.col(_RANK) == 1).drop(_RANK)


def _filled(points: DataFrame, keys: list[str], filled: tuple[str, ...]) -> DataFrame:
    """Partial updates: each `filled` column's null in an event (a struct's null fields) replaced by the
    newest value an event of its key carried before it since the key's newest delete before it (a delete
    resets the row), its value as it came kept in a helper (_RAW + column) for the companion table."""
    if not filled:
        return points
    order = Window.partitionBy(*cols(keys)).orderBy(F.col(SEQUENCE))
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    points = points.withColumn(_SINCE, F.sum(F.col(HARD_DELETE_FLAG).cast("int")).over(running))
    since = Window.partitionBy(*cols(keys), F.col(_SINCE)).orderBy(F.col(SEQUENCE))
    before = since.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    points = points.withColumns({_RAW + c: col(c) for c in filled})
    newest = {c: _newest(col(c), points.schema[c].dataType, before) for c in filled}
    return points.withColumns(newest).drop(_SINCE)


def _newest(value: Column, kind, before) -> Column:
    """The newest non-null `value` up to the point (`before`), a delete's none; a struct's field by field
    (AUTO CDC's partial updates of nested fields): null where no point up to it carried the struct, else
    each field the newest non-null value of that field, so a null field keeps the one before."""
    carried = F.when(~F.col(HARD_DELETE_FLAG), value)
    newest = F.last(carried, ignorenulls=True).over(before)
    if not isinstance(kind, T.StructType) or not kind.fields:
        return newest
    fields = [_newest(value.getField(f.name), f.dataType, before).alias(f.name) for f in kind.fields]
    return F.when(newest.isNull(), F.lit(None).cast(kind)).otherwise(F.struct(*fields).cast(kind))


def _numbered(points: DataFrame, keys: list[str], tracked: tuple[str, ...] | None) -> DataFrame:
    """Each point with whether it opens a version (every event that is no delete, where `tracked` is
    None), the number of the version it belongs to, and the next point of its key (its sequence,
    whether a delete)."""
    deleted = F.col(HARD_DELETE_FLAG)
    order = Window.partitionBy(*cols(keys)).orderBy(F.col(SEQUENCE))
    if tracked is None:
        opens = ~deleted
    else:
        tracked_json = F.to_json(F.struct(*(col(c).alias(c) for c in tracked)), {"ignoreNullFields": "false"})
        points = points.withColumn(_TRACKED, F.when(~deleted, tracked_json))
        before_deleted = F.lag(deleted).over(order)
        changed = ~F.lag(F.col(_TRACKED)).over(order).eqNullSafe(F.col(_TRACKED))
        opens = ~deleted & (before_deleted.isNull() | before_deleted | changed)
    points = points.withColumn(_OPENS, opens)
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    points = points.withColumn(_GROUP, F.sum(F.col(_OPENS).cast("int")).over(running))
    points = points.withColumn(_NEXT, F.lead(F.col(SEQUENCE)).over(order))
    return points.withColumn(_NEXT_DELETE, F.coalesce(F.lead(deleted).over(order), F.lit(False)))


def _versions(points: DataFrame, keys, data, scope: HistoryScope, settings, load_id) -> DataFrame:
    """A version per group of events: valid from its opening event until the point after its newest,
    that newest event's values; how many new events it holds and whether one opens it."""
    events = points.filter(~F.col(HARD_DELETE_FLAG))
    group = Window.partitionBy(*cols(keys), F.col(_GROUP))
    new = (F.col(ORIGIN) == BATCH).cast("int")
    events = events.withColumn(NEW_EVENTS, F.sum(new).over(group))
    events = events.withColumn(NEW_OPENER, F.max(F.when(F.col(_OPENS), new).otherwise(0)).over(group))
    events = events.withColumn(scope.valid_from, F.min(F.col(SEQUENCE)).over(group))
    events = events.withColumn(_RANK, F.row_number().over(group.orderBy(F.col(SEQUENCE).desc())))
    versions = events.filter(F.col(_RANK) == 1)
    versions = versions.select(
        *cols(data),
        col(scope.valid_from),
        F.col(_NEXT).alias(scope.valid_to),
        F.col(_NEXT_DELETE).alias(BY_DELETE),
        F.col(NEW_EVENTS),
        F.col(NEW_OPENER),
    )
    versions = versions.withColumn(ROW_ID, row_version_hash(versions.select(*cols(data)), settings))
    versions = versions.withColumn(LOAD_ID, F.lit(load_id))
    if scope.active_column:
        versions = versions.withColumn(scope.active_column, col(scope.valid_to).isNull())
    return versions


def _compared(versions: DataFrame, target: DataFrame | None, scope: HistoryScope) -> DataFrame:
    """Each rebuilt version with its ACTION against the table's version at its (key, valid_from), and
    the table's versions no longer opened (DELETE); SPLIT where a closed version now ends earlier,
    BY_DELETE where a written version ends at a delete it did not end at before."""
    at = [*scope.merge_key, scope.valid_from]
    valid_to = col(scope.valid_to)
    if target is None:
        return versions.withColumn(ACTION, F.lit(INSERT)).withColumn(SPLIT, F.lit(False))
    table = target.select(
        *cols(at),
        col(scope.valid_to).alias(_OLD_TO),
        F.col(ROW_ID).alias(_OLD_ID),
        F.lit(True).alias(_IN_TABLE),
    )
    joined = versions.withColumn(_IS_VERSION, F.lit(True)).join(table, on=at, how="full_outer")
    same_end = F.col(_OLD_TO).eqNullSafe(valid_to)
    action = (
        F.when(F.col(_IS_VERSION).isNull(), F.lit(DELETE))
        .when(F.col(_IN_TABLE).isNull(), F.lit(INSERT))
        .when(same_end & F.col(_OLD_ID).eqNullSafe(F.col(ROW_ID)), F.lit(SAME))
        .otherwise(F.lit(UPDATE))
    )
    joined = joined.withColumn(ACTION, action)
    split = (F.col(ACTION) == UPDATE) & F.col(_OLD_TO).isNotNull() & ~same_end
    by_delete = F.coalesce(F.col(BY_DELETE), F.lit(False)) & F.col(ACTION).isin(INSERT, UPDATE) & ~same_end
    joined = joined.withColumn(SPLIT, split).withColumn(BY_DELETE, by_delete)
    return joined.drop(_OLD_TO, _OLD_ID, _IS_VERSION, _IN_TABLE).fillna(0, [NEW_EVENTS, NEW_OPENER])


def _data(columns, settings) -> list[str]:
    """The data columns of events or versions: not system, helper or validity columns."""
    data = [c for c in columns if not c.startswith((SYSTEM_PREFIX, HELPER_PREFIX))]
    return [c for c in data if c not in settings.system_columns]


def _helpers() -> tuple[str, ...]:
    return (ACTION, SPLIT, BY_DELETE, NEW_EVENTS, NEW_OPENER)
