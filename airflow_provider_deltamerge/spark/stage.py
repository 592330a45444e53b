"""The stage step: one extracted batch made ready for its commit, in two parts.

- `stage_batch`: the preparation rules in their order (key checks, dedup, hard-delete flags, system
  columns), computed from the source in one pass (the writer checks unique keys, see plan.unique_key).
  That pass materialises the batch in Spark, or, given `collect`, is the collection of the batch to the
  driver as Arrow (load/staged_arrow.py), so the writer gets it without a second pass;
- `shape_source`: the merge source the plan asks for, built from the staged batch (helper columns start
  with `__`). The planner decides the shape; this only builds it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..errors import BatchTooLargeError, NullKeyError, PartitionValueError
from ..model.cdc import event_key
from ..model.naming import NAME_BYTES, ROW_ID
from ..model.options import ID_FROM_PRIMARY_KEY, TableHints, WriteDisposition
from ..plan.merge import ACTION, HARD_DELETE_FLAG, MergePlan, Operation, SourceShape, key_helpers
from ..plan.pruning import KeyRange
from . import arrow_events, arrow_profile, cdc, frames, null_updates, partition_values, profile
from .extract import arrow_to_spark
from .names import col, cols
from .scd2 import rows_and_retires
from .scd2_feed import versions_and_closes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StagedBatch:
    df: DataFrame  # materialised; data columns, system columns, and __hd where hard deletes apply
    rows_extracted: int
    rows_staged: int
    key_ranges: tuple[KeyRange, ...] = ()  # min and max of the key columns (partitions named), for pruning
    arrow_bytes: int = 0  # the staged batch's size as Arrow, estimated before any transfer
    arrow: Any = None  # pyarrow.Table: the batch collected by staging's pass; `df` is then not materialised
    aligned_to: Any = None  # the table schema `arrow` was aligned to (see load/staged_arrow.py)

    @property
    def empty(self) -> bool:
        return self.rows_staged == 0

    @property
    def hard_delete(self) -> bool:
        return HARD_DELETE_FLAG in self.df.columns


def stage_batch(
    df: DataFrame,
    disposition: WriteDisposition,
    hints: TableHints,
    load_id: str,
    collect: Callable[[DataFrame], Any] | None = None,
    partition_by: tuple[str, ...] = (),
    partition_folders: tuple[str, ...] = (),
    flagged: DataFrame | None = None,
) -> StagedBatch:
    """Key checks, dedup, hard-delete flags and system columns, computed from the source in one pass
    that materialises the batch and profiles it (spark/profile.py). `collect` (given only where the
    aggregates ride on the pass) turns the staged DataFrame into the Arrow table the writer takes; that
    collection is then the pass, and the caller checks an upsert's unique keys in the Arrow data.
    `partition_by`: the partition columns of the table merged into, whose values in the batch the key
    ranges list (spark/partition_values.py). `flagged`: `df` with the rows a load's expectations set
    aside, flagged: where staging collects every row as it is (`collects_every_row`), the collection reads
    it and `collect` leaves those rows out on the driver (spark/expectations.py); else it is not read."""
    named = {"primary_key": hints.primary_key, "merge_key": hints.merge_key, "sequence_by": hints.sequence_by}
    keys = {k: v for k, v in named.items() if v}  # columns every row must have, and not null
    if _lacks_columns(df, keys, disposition, hints):  # refused, or an empty batch: the checks as before
        if frames.check_key_columns(df, keys) == 0:
            return _empty(df, load_id)
    key_columns = list(dict.fromkeys(c for columns in keys.values() for c in columns))
    raw = df
    nulls = profile.null_counts(df, key_columns)
    if hints.apply_as_truncates:  # refused before any job; a truncate's key columns may be null
        cdc.check_condition(df, "apply_as_truncates", hints.apply_as_truncates)
        df = cdc.flag_truncate_events(df, hints.apply_as_truncates, hints.primary_key)
        nulls = cdc.null_counts(key_columns, hints.primary_key)
    if hints.apply_as_deletes:  # refused before any job: a condition Spark cannot evaluate on the events
        cdc.check_condition(df, "apply_as_deletes", hints.apply_as_deletes)
    checked = _Checked(raw, load_id, keys, hints, disposition, partition_by, partition_folders)
    if collect is not None and arrow_events.ranks_on_driver(df, disposition, hints):
        try:
            return _events_ranked_on_driver(df, collect, key_columns, checked)
        except BatchTooLargeError as whole:  # each key's newest may still fit: ranked in Spark first
            log.info(
                "the change events for %s take more than the %.0f MiB the driver may hold whole: "
                "ranked in Spark instead, each key's newest collected",
                whole.table,
                whole.limit_bytes / 2**20,
            )
    one_observation = profile.observes_in_pass(df) and _keeps_every_row(disposition, hints)
    if one_observation:  # the raw batch's counts are the staged batch's: observed with its aggregates
        raw_profile = None
    elif profile.observes_in_pass(df):
        df, raw_profile = profile.with_observed(df, nulls)
    else:  # one job over the source for what only the raw batch shows
        counted = profile.aggregated(df, nulls)
        raw_profile = lambda: counted  # noqa: E731
    ties_in_pass = _counts_ties_in_pass(df, disposition, hints)
    if hints.sequence_by and not ties_in_pass:  # two different events of a key at one sequence
        cdc.check_ordered_events(df, event_key(disposition, hints), hints.sequence_by)
    staged = _prepared(df, disposition, hints, load_id, ties_in_pass)
    ranged = profile.ranged_columns(staged, hints.primary_key + hints.merge_key)
    aggregates = _aggregates(staged, ranged, partition_folders)
    aggregates += [cdc.sum_of_ties()] if ties_in_pass else []
    aggregates += nulls if one_observation else []
    arrow = None
    if collect is not None and one_observation:  # every count is in the collected rows: none observed
        staged = _without_ties(staged, ties_in_pass)
        arrow = collect(staged if flagged is None else _prepared(flagged, disposition, hints, load_id))
        after = _arrow_profile(arrow, staged, key_columns, ranged, partition_folders, aggregates)
    elif profile.observes_in_pass(staged):
        staged, staged_profile = profile.with_observed(staged, aggregates)
        staged = _without_ties(staged, ties_in_pass)
        if collect is not None:
            arrow = collect(staged)
        else:
            staged = frames.materialize(staged)
        after = staged_profile()
    else:
        staged = frames.materialize(staged)
        after = profile.aggregated(staged, aggregates)
    before = after if raw_profile is None else raw_profile()
    return checked.batch(staged, arrow, before, after, ranged, bool(ties_in_pass and after.get("ties")))


def _events_ranked_on_driver(
    df: DataFrame, collect: Callable, key_columns: list[str], checked: _Checked
) -> StagedBatch:
    """An upsert's change events: every event collected by the pass, each key's newest kept by pyarrow
    on the driver, the ties counted there (spark/arrow_events.py); then the checks every batch passes."""
    hints, disposition = checked.hints, checked.disposition
    events = arrow_events.prepared(df, hints)
    staged = frames.add_system_columns(events.frame, checked.load_id, row_id_key(disposition, hints))
    every_event = collect(staged)
    before = arrow_events.raw_profile(every_event, events, key_columns)
    if before.rows == 0 or any(before.get(f"null:{c}") for c in key_columns):  # refused, or empty
        return checked.batch(staged, None, before, before, [], False)
    arrow, ties = arrow_events.newest_per_key(every_event, events, hints.primary_key, len(hints.sequence_by))
    staged = staged.drop(*events.helpers)
    ranged = profile.ranged_columns(staged, hints.primary_key + hints.merge_key)
    aggregates = _aggregates(staged, ranged, checked.partition_folders)
    newest = lambda: arrow_to_spark(staged.sparkSession, arrow)  # noqa: E731
    after = _arrow_profile(arrow, staged, [], ranged, checked.partition_folders, aggregates, newest)
    return checked.batch(staged, arrow, before, after, ranged, ties > 0)


def _aggregates(staged: DataFrame, ranged: list[str], partition_folders: tuple[str, ...]) -> list:
    """The staged batch's aggregates every check reads: dates, key bounds, text bytes, folder names."""
    aggregates = profile.unstorable_date_counts(staged) + profile.key_bounds(staged, ranged)
    return aggregates + profile.text_bytes(staged) + profile.partition_folder_bytes(staged, partition_folders)


@dataclass(frozen=True)
class _Checked:
    """The checks a staged batch passes after its pass, on its profile (spark/profile.py), in order."""

    raw: DataFrame  # the batch before preparation: the ties check names its events
    load_id: str
    keys: dict  # hint -> its columns, none null
    hints: TableHints
    disposition: WriteDisposition
    partition_by: tuple[str, ...]
    partition_folders: tuple[str, ...]

    def batch(self, staged, arrow, before, after, ranged, ties: bool) -> StagedBatch:
        raw, hints, disposition = self.raw, self.hints, self.disposition
        if before.rows == 0:
            return _empty(raw, self.load_id)
        for hint, columns in self.keys.items():
            for column in columns:
                if before.get(f"null:{column}"):
                    raise NullKeyError(column, hint, int(before.get(f"null:{column}")))
        if ties:  # found in the pass: the check that names them, then
            cdc.check_ordered_events(raw, hints.primary_key, hints.sequence_by)
        if ROW_ID in raw.columns and disposition.scd2 is None:  # scd2 puts its version hash there
            frames.check_row_ids(staged, arrow)
        # The writer checks that upsert and insert-only sources hold each key once (plan.unique_key), on
        # the rows it commits; an upsert's flagged rows count too, and a new table's source leaves them out.
        if disposition.strategy == "upsert" and hints.hard_delete and arrow is None:
            frames.check_unique_keys(staged, hints.primary_key, disposition.strategy)
        for column in self.partition_folders:
            if after.get(f"folder:{column}") > NAME_BYTES:
                raise PartitionValueError(column, int(after.get(f"folder:{column}")), NAME_BYTES)
        outside = {c: int(after.get(f"dates:{c}")) for c in profile.date_columns(staged)}
        frames.check_storable_dates(staged, hints.primary_key or hints.merge_key, outside)
        ranges = profile.key_ranges(staged, after, ranged)
        ranges = partition_values.with_partitions(ranges, staged, arrow, self.partition_by)
        size = arrow.nbytes if arrow is not None else profile.arrow_bytes(staged, after)
        return StagedBatch(staged, before.rows, after.rows, ranges, size, arrow)


def _arrow_profile(
    arrow, staged: DataFrame, key_columns, ranged, folders, aggregates, frame: Callable | None = None
) -> profile.Profile:
    """The staged batch's profile from its collected rows; where those cannot decide it (a zoned
    timestamp a day from a storable limit), the aggregates as a job of their own, over `frame()` where
    the collected rows are not `staged`'s (ranked on the driver)."""
    dates, text_folders = profile.date_columns(staged), profile.text_columns(staged, folders)
    counted = arrow_profile.profiled(arrow, key_columns, dates, ranged, text_folders)
    if counted is not None:
        return counted
    return profile.aggregated(frame() if frame is not None else staged, aggregates)


def _lacks_columns(df: DataFrame, keys: dict, disposition: WriteDisposition, hints: TableHints) -> bool:
    """Whether a key or dedup_sort column is absent: refused unless the batch is empty."""
    if any(c not in df.columns for columns in keys.values() for c in columns):
        return True
    sort = hints.dedup_sort
    return sort is not None and _dedups(disposition, hints) and sort[0] not in df.columns


def _dedups(disposition: WriteDisposition, hints: TableHints) -> bool:
    deduplicates = disposition.strategy == "delete-insert" and not disposition.deduplicated
    return deduplicates and bool(hints.primary_key)


def collects_every_row(disposition: WriteDisposition, hints: TableHints) -> bool:
    """Whether staging's collection, where it collects, is of each row of the batch as it is: prepared
    row by row, nothing ranked, deduplicated or flagged as a change event."""
    return (
        _keeps_every_row(disposition, hints) and not hints.apply_as_deletes and not hints.apply_as_truncates
    )


def _keeps_every_row(disposition: WriteDisposition, hints: TableHints) -> bool:
    """Whether preparation keeps each row of the batch, its key columns as they are (no dedup, no
    ranking or filling of events): the raw batch's row and null-key counts are then the staged batch's,
    and one observation of the pass gives both (each observation splits the pass's generated code)."""
    return not _dedups(disposition, hints) and not hints.sequence_by


def _counts_ties_in_pass(df: DataFrame, disposition: WriteDisposition, hints: TableHints) -> bool:
    """Whether an upsert's events are checked for ties by the staging pass itself (where its aggregates
    ride on it as observed metrics) rather than by a job of their own before it."""
    if null_updates.active(hints):  # its events' values are filled per column before the ranking
        return False
    return bool(hints.sequence_by) and disposition.strategy == "upsert" and profile.observes_in_pass(df)


def _prepared(
    df: DataFrame, disposition: WriteDisposition, hints: TableHints, load_id: str, count_ties: bool = False
) -> DataFrame:
    """The preparation rules in their order, lazily: dedup, hard-delete flags, system columns.
    `count_ties`: an upsert's newest events carry their keys' tie counts (spark/cdc.py)."""
    if _dedups(disposition, hints):
        df = frames.keep_one_row_per_key(df, hints.primary_key, hints.dedup_sort)
    if hints.sequence_by and disposition.strategy == "scd2":  # every event a version (spark/scd2_feed.py)
        df = cdc.distinct_events(df, hints.merge_key, hints.sequence_by)
        if hints.apply_as_deletes:  # a delete closes the version it falls into and opens none
            df = cdc.flag_delete_events(df, hints.apply_as_deletes)
        df = cdc.event_columns(df, hints)
    elif hints.sequence_by:
        if hints.apply_as_deletes:  # flagged before the columns it names are left out or filled
            df = cdc.flag_delete_events(df, hints.apply_as_deletes)
        df = null_updates.newest_values(df, hints)  # partial updates: each column's newest value
        df = cdc.newest_event_per_key(df, hints.primary_key, hints.sequence_by, count_ties)
        if hints.apply_as_truncates:
            df = cdc.truncates_as_deletes(df)
        df = cdc.event_columns(df, hints)
    if hints.hard_delete:
        df = frames.flag_hard_deletes(df, hints.hard_delete)
    return frames.add_system_columns(df, load_id, row_id_key(disposition, hints)).drop(frames.INPUT_ORDER)


def _without_ties(staged: DataFrame, ties_in_pass: bool) -> DataFrame:
    """The staged batch without its tie counts, where it carries them. Where it does not, the same
    DataFrame: on Spark Connect a new one would ask the server for its schema again."""
    return staged.drop(cdc.TIES) if ties_in_pass else staged


def row_id_key(disposition: WriteDisposition, hints: TableHints) -> tuple[str, ...]:
    """The columns `_dlt_id` is a hash of (the primary key, for the strategies that key rows by it), or
    none: then it is unique per row and load."""
    return hints.primary_key if disposition.strategy in ID_FROM_PRIMARY_KEY else ()


def _empty(df: DataFrame, load_id: str) -> StagedBatch:
    """An empty batch: nothing to dedup or check, and maybe not even the key columns."""
    return StagedBatch(frames.add_system_columns(df, load_id).drop(frames.INPUT_ORDER), 0, 0)


def shape_source(staged: DataFrame, plan: MergePlan, target_keys: DataFrame | None = None) -> DataFrame:
    """The DataFrame the writer commits for `plan`."""
    if plan.operation is not Operation.MERGE or plan.source is SourceShape.ROWS:
        return unflagged_rows(staged)
    if plan.source is SourceShape.ROWS_WITH_FLAG:
        return staged
    if plan.source is SourceShape.SCD2_ROWS_AND_RETIRES:
        return rows_and_retires(staged, target_keys, plan.retire)
    if plan.source is SourceShape.SCD2_EVENTS:
        return versions_and_closes(staged, target_keys, plan.retire)
    rows = unflagged_rows(staged).withColumn(ACTION, F.lit("insert"))
    if plan.source is SourceShape.DELETE_KEYS_AND_ROWS:
        keys = staged.select(*cols(plan.delete_keys)).distinct()
    else:
        keys = target_rows_to_delete(staged, target_keys, plan)
    helpers = key_helpers(plan.delete_keys)
    delete_rows = keys.select(
        *(col(c).alias(h) for c, h in zip(plan.delete_keys, helpers, strict=True)),
        F.lit("delete").alias(ACTION),
    )
    for helper, column in zip(helpers, plan.delete_keys, strict=True):
        rows = rows.withColumn(helper, F.lit(None).cast(staged.schema[column].dataType))
    return rows.unionByName(delete_rows, allowMissingColumns=True)


def unflagged_rows(staged: DataFrame) -> DataFrame:
    """Staged rows that are not hard deletes, without the flag."""
    if HARD_DELETE_FLAG not in staged.columns:
        return staged
    return staged.filter(~F.col(HARD_DELETE_FLAG)).drop(HARD_DELETE_FLAG)


def target_rows_to_delete(staged: DataFrame, target_keys: DataFrame, plan: MergePlan) -> DataFrame:
    """Distinct target key tuples (primary key + merge key) that match a staged row on either key.

    Joining the MERGE on these exact tuples keeps it an equi-join; an OR join runs as a nested loop.
    """
    matches = [
        target_keys.join(staged.select(*cols(key)).distinct(), on=list(key), how="left_semi")
        for key in plan.match_any_of
    ]
    union = matches[0]
    for more in matches[1:]:
        union = union.unionByName(more)
    return union.distinct()
