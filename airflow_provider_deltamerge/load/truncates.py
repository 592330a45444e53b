"""Truncate events (`apply_as_truncates`, docs/CDC.md) against the table's remembered truncates, in a
load's commit step.

A truncate is remembered as a tombstone of the whole table: a row of the tombstone table
(delta/tombstones.py) whose key columns are null, at the truncate's sequence, written, honoured and
expired as the keys' tombstones are (load/tombstones.py). Staging keeps the batch's newest truncate, its
key nulled and flagged as a delete (spark/cdc.py), so a flagged row with a null key is the truncate. In
each attempt of a load's commit:
- `against_truncates`: the newest truncate, remembered or the batch's own, makes every event not newer
  than it stale (dropped); the batch's truncate is itself stale where a remembered one is as new;
- the batch's truncate left is planned as a delete of the rows not newer than it that no event of the
  batch matches (plan/merge.py), in the load's one MERGE commit, and is written with the tombstones
  before it; `truncate_metrics` counts those rows on the snapshot the commit is planned on.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc

from ..delta.delta_rs import spark_to_arrow
from ..errors import ConfigError
from ..model.cdc import EVENTS_TRUNCATED, ROWS_TRUNCATED, sequence_columns
from ..model.request import LoadRequest
from ..plan.merge import HARD_DELETE_FLAG
from ..spark import cdc
from ..spark.extract import arrow_to_spark
from ..spark.names import col, cols


def with_typed_key(staged, read, key):
    """The staged batch with each key column it lacks, or holds without a type, as typed nulls, typed as
    the tombstone table types it. A batch of truncates only carries null keys, which have no type where
    the table does not exist yet (its columns would type them): the truncate is remembered with its key
    typed as the tombstones' are, and is refused, naming the column, where there are none yet."""
    untyped = [k for k in key if _untyped(staged, k)]
    if not untyped:
        return staged
    remembered = read.rows.schema if read.rows is not None else None
    for column in untyped:
        if remembered is None or column not in remembered.names:
            raise ConfigError(
                "columns",
                f"gives no type for primary key column {column!r}, and this batch's events carry none "
                "(they are truncates only, their keys null), so the truncate cannot be remembered: "
                f"declare it, e.g. columns={{{column!r}: {{'data_type': 'bigint'}}}}, or load the "
                "truncate together with events of the table's keys",
            )
    if staged.arrow is not None:
        arrow = staged.arrow
        for column in untyped:
            nulls = pa.nulls(arrow.num_rows, remembered.field(column).type)
            if column in arrow.column_names:
                arrow = arrow.drop_columns([column])
            arrow = arrow.append_column(column, nulls)
        return dataclasses.replace(staged, arrow=arrow)
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    df = staged.df
    for column in untyped:
        df = df.withColumn(column, F.lit(None).cast(from_arrow_type(remembered.field(column).type)))
    return dataclasses.replace(staged, df=df)


def _untyped(staged, column: str) -> bool:
    """Whether the staged batch lacks `column`, or holds it without a type (its values all null)."""
    if staged.arrow is not None:
        names = staged.arrow.column_names
        return column not in names or pa.types.is_null(staged.arrow.schema.field(column).type)
    if column not in staged.df.columns:
        return True
    from pyspark.sql.types import NullType

    return isinstance(staged.df.schema[column].dataType, NullType)


def split(tombstones: list[dict], key, sequence) -> tuple[list[dict], tuple | None]:
    """The keys' tombstones, and the sequence of the newest truncate among them (None: none)."""
    keyed = [t for t in tombstones if t[key[0]] is not None]
    truncates = (tuple(t[c] for c in sequence) for t in tombstones if t[key[0]] is None)
    return keyed, max((t for t in truncates if None not in t), default=None)


def against_truncates(staged, remembered: tuple | None, key, sequence) -> tuple[object, tuple | None]:
    """The staged batch less the events not newer than the newest truncate (the remembered one or the
    batch's), and the sequence of the batch's truncate where it is newer than the remembered (None
    where it has none, or none that applies)."""
    batch = _batch_truncate(staged, key, sequence)
    applies = batch if batch is not None and (remembered is None or batch > remembered) else None
    newest = applies if applies is not None else remembered
    if newest is None:
        return staged, None
    if staged.arrow is not None:
        truncate = _truncate_mask(staged.arrow, key).to_pylist()
        events = staged.arrow.select(list(sequence)).to_pylist()
        keep = [
            (is_truncate and applies is not None) or tuple(e[c] for c in sequence) > newest
            for e, is_truncate in zip(events, truncate, strict=True)
        ]
        return dataclasses.replace(staged, arrow=staged.arrow.filter(pa.array(keep, pa.bool_()))), applies
    kept = cdc.newer_than(sequence, newest)
    if applies is not None:
        kept = kept | _is_truncate(staged.df, key)
    return dataclasses.replace(staged, df=staged.df.where(kept)), applies


def truncate_metrics(spark, writer, table, staged, truncate: tuple | None, request: LoadRequest) -> dict:
    """With apply_as_truncates: the truncate events applied (0 or 1) and the rows of the table the
    truncate removes, those not newer than it (or without a sequence) that no event of the batch
    matches, counted on the snapshot the commit is planned on (it lands on that version or is planned
    again: plan/merge.py's on_snapshot)."""
    if not request.hints.apply_as_truncates:
        return {}
    if truncate is None or table is None:
        return {EVENTS_TRUNCATED: int(truncate is not None), ROWS_TRUNCATED: 0}
    key = request.hints.primary_key
    names = table.schema.fieldNames()
    sequence = sequence_columns(len(request.hints.sequence_by))
    present = [c in names for c in sequence] + [False]
    sequence = sequence[: present.index(False)]
    older = cdc.not_newer_rows(
        writer.read_columns(spark, table, [*key, *sequence]), sequence, truncate[: len(sequence)]
    )
    if staged.arrow is not None:
        keys = arrow_to_spark(spark, staged.arrow.select(list(key)))
    else:
        keys = staged.df.select(*cols(key))
    removed = older.join(keys, on=list(key), how="left_anti").count()
    return {EVENTS_TRUNCATED: 1, ROWS_TRUNCATED: removed}


def _batch_truncate(staged, key, sequence) -> tuple | None:
    """The sequence of the staged truncate (None: the batch has none)."""
    if staged.arrow is not None:
        if HARD_DELETE_FLAG not in staged.arrow.column_names:
            return None
        found = staged.arrow.filter(_truncate_mask(staged.arrow, key)).select(list(sequence))
    else:
        if HARD_DELETE_FLAG not in staged.df.columns:
            return None  # as Arrow: timestamps keep their time zone, as the tombstones' do
        found = spark_to_arrow(staged.df.where(_is_truncate(staged.df, key)).select(*cols(sequence)))
    rows = found.to_pylist()
    return max((tuple(r[c] for c in sequence) for r in rows), default=None)


def _truncate_mask(arrow: pa.Table, key) -> pa.ChunkedArray:
    if HARD_DELETE_FLAG not in arrow.column_names:
        return pa.chunked_array([pa.array([False] * arrow.num_rows, pa.bool_())])
    flagged = pc.fill_null(arrow[HARD_DELETE_FLAG], False)
    return pc.and_(flagged, pc.is_null(arrow[key[0]]))


def _is_truncate(df, key):
    from pyspark.sql import functions as F

    if HARD_DELETE_FLAG not in df.columns:
        return F.lit(False)
    return F.col(HARD_DELETE_FLAG) & col(key[0]).isNull()
