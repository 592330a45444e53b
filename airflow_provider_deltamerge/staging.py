"""Stage one extracted batch for a disposition: the order of the preparation rules, in one place."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import DataFrame

from . import prepare
from .errors import ConfigError
from .planning import HARD_DELETE_FLAG
from .shaping import unflagged_rows
from .specs import TableHints, WriteDisposition

log = logging.getLogger(__name__)

ID_FROM_PRIMARY_KEY = ("upsert", "insert-only")


@dataclass(frozen=True)
class StagedBatch:
    df: DataFrame  # materialised; data columns, system columns, and __hd where hard deletes apply
    rows_extracted: int
    rows_staged: int

    @property
    def empty(self) -> bool:
        return self.rows_staged == 0

    @property
    def hard_delete(self) -> bool:
        return HARD_DELETE_FLAG in self.df.columns


def effective_hints(disposition: WriteDisposition, hints: TableHints) -> TableHints:
    """The hints this disposition uses; the ones it ignores are dropped with a warning (dlt's rules)."""
    if disposition.disposition != "merge":
        _warn_ignored(hints, ("hard_delete", "dedup_sort"), f"write disposition {disposition.disposition!r}")
        return TableHints(primary_key=hints.primary_key)
    strategy = disposition.strategy
    if strategy == "scd2":
        _warn_ignored(hints, ("primary_key", "hard_delete", "dedup_sort"), "merge strategy 'scd2'")
        return TableHints(merge_key=hints.merge_key)
    if strategy in ID_FROM_PRIMARY_KEY:
        if not hints.primary_key:
            raise ConfigError(
                "primary_key", f"merge strategy {strategy!r} needs a primary key; none was given"
            )
        _warn_ignored(hints, ("merge_key", "dedup_sort"), f"merge strategy {strategy!r}")
        return TableHints(primary_key=hints.primary_key, hard_delete=hints.hard_delete)
    if not hints.primary_key or disposition.deduplicated:
        _warn_ignored(hints, ("dedup_sort",), "delete-insert without a primary key or with deduplicated=True")
        hints = TableHints(hints.primary_key, hints.merge_key, hints.hard_delete)
    if not hints.primary_key and not hints.merge_key:
        log.warning("merge without primary_key or merge_key: rows are appended, nothing is replaced")
    return hints


def _warn_ignored(hints: TableHints, names: tuple[str, ...], where: str) -> None:
    for name in names:
        if getattr(hints, name):
            log.warning("%s hint %r is ignored by %s", name, getattr(hints, name), where)


def stage_batch(df: DataFrame, disposition: WriteDisposition, hints: TableHints, load_id: str) -> StagedBatch:
    """Key checks, dedup, hard-delete flags, unique-key checks and system columns, then materialise."""
    keys = {"primary_key": hints.primary_key, "merge_key": hints.merge_key}
    rows_extracted = prepare.check_key_columns(df, {k: v for k, v in keys.items() if v})
    if rows_extracted == 0:  # nothing to dedup or check, and maybe not even the key columns
        return StagedBatch(prepare.add_system_columns(df, load_id).drop(prepare.INPUT_ORDER), 0, 0)
    strategy = disposition.strategy
    if strategy == "delete-insert" and hints.primary_key and not disposition.deduplicated:
        df = prepare.keep_one_row_per_key(df, hints.primary_key, hints.dedup_sort)
    if hints.hard_delete:
        df = prepare.flag_hard_deletes(df, hints.hard_delete)
    if strategy == "upsert":
        prepare.check_unique_keys(df, hints.primary_key, strategy)
    elif strategy == "insert-only":
        prepare.check_unique_keys(unflagged_rows(df), hints.primary_key, strategy)
    id_key = hints.primary_key if strategy in ID_FROM_PRIMARY_KEY else ()
    df = prepare.add_system_columns(df, load_id, id_key).drop(prepare.INPUT_ORDER)
    staged = prepare.materialize(df)
    return StagedBatch(staged, rows_extracted, staged.count())
