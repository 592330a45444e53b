"""Partial updates (`ignore_null_updates`) against tombstones (`apply_as_deletes`, tombstone_load.py).

A staged row of partial updates carries, in each chosen column, the newest value an event of its key
carried, and its sequence (`sequence_of`): that event may be older than the key's tombstone even where
the row's newest event is newer (the row is kept). A delete resets the row, so such a value is no value:
`older_values_dropped` makes it null, its sequence too. And since any event older than the key's newest
delete must be left out, not only an older row, the tombstone a load writes is each key's newest delete in
the batch (the DELETED_AT helper), also one older than the key's newest event: `newest_deletes`.
A truncate (`apply_as_truncates`) resets every row: the newest, remembered or the batch's, cuts every key's
values as a tombstone of the key does.
Both work on the Arrow table where staging collected the batch, else in Spark.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc

from .delta.delta_rs import spark_to_arrow
from .spark import cdc
from .spec.null_updates import DELETED_AT, SEQUENCE_OF_PREFIX


def newest_deletes(staged, key, sequence) -> pa.Table:
    """The key and, as its sequence, the newest delete of each key that has one in the batch."""
    (column,) = sequence
    if staged.arrow is not None:
        rows = staged.arrow.filter(pc.is_valid(staged.arrow[DELETED_AT])).select([*key, DELETED_AT])
        return rows.rename_columns([*key, column])
    df = staged.df
    return spark_to_arrow(df.where(df[DELETED_AT].isNotNull()).select(*key, df[DELETED_AT].alias(column)))


def older_values_dropped(spark, staged, tombstones: list[dict], key, sequence, truncated_at=None):
    """The staged rows with each chosen column's value (and its sequence) null where it is not newer than
    its key's newest tombstone, or than the newest truncate (`truncated_at`; None: none)."""
    (column,) = sequence
    newest: dict[tuple, object] = {}
    for tomb in tombstones:
        at, held = tomb[column], tuple(tomb[k] for k in key)
        if at is not None and (held not in newest or at > newest[held]):
            newest[held] = at
    columns = staged.arrow.column_names if staged.arrow is not None else staged.df.columns
    pairs = [(c[len(SEQUENCE_OF_PREFIX) :], c) for c in columns if c.startswith(SEQUENCE_OF_PREFIX)]
    pairs = [(value, at) for value, at in pairs if value in columns]
    if not (newest or truncated_at is not None) or not pairs:
        return staged
    if staged.arrow is not None:
        arrow = _in_arrow(staged.arrow, newest, truncated_at, key, pairs)
        return dataclasses.replace(staged, arrow=arrow)
    df = _in_spark(spark, staged.df, newest, truncated_at, key, column, pairs)
    return dataclasses.replace(staged, df=df)


def _in_arrow(arrow: pa.Table, newest: dict, truncated_at, key, pairs) -> pa.Table:
    keys = arrow.select(list(key)).to_pylist()
    cuts = [_newer(newest.get(tuple(r[k] for k in key)), truncated_at) for r in keys]
    for value, at in pairs:
        held = arrow[at].to_pylist()
        stale = [c is not None and s is not None and s <= c for s, c in zip(held, cuts, strict=True)]
        mask = pa.array(stale, pa.bool_())
        for name in (value, at):
            index = arrow.schema.get_field_index(name)
            data = arrow[name].combine_chunks()
            arrow = arrow.set_column(
                index, arrow.schema.field(index), pc.if_else(mask, pa.scalar(None, data.type), data)
            )
    return arrow


def _newer(first, second):
    """The newer of two sequences, either of which may be None (none)."""
    if first is None or second is None:
        return second if first is None else first
    return max(first, second)


def _in_spark(spark, df, newest: dict, truncated_at, key, column: str, pairs):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    source, cut = df.alias("e"), F.lit(None)
    if newest:  # the newest tombstone of each row's key, beside it
        fields = [df.schema[c] for c in (*key, column)]
        named = StructType([StructField(cdc.TOMBSTONE_PREFIX + f.name, f.dataType, True) for f in fields])
        frame = spark.createDataFrame([(*held, at) for held, at in newest.items()], named)
        condition = None
        for k in key:
            same = F.col(f"e.`{k}`").eqNullSafe(F.col(f"d.`{cdc.TOMBSTONE_PREFIX}{k}`"))
            condition = same if condition is None else condition & same
        source = source.join(F.broadcast(frame.alias("d")), condition, "left")
        cut = F.col(f"d.`{cdc.TOMBSTONE_PREFIX}{column}`")
    stale = {}
    for value, at in pairs:
        older = cut.isNotNull() & (F.col(f"e.`{at}`") <= cut)
        if truncated_at is not None:
            older = older | (F.col(f"e.`{at}`") <= F.lit(truncated_at))
        stale[value] = stale[at] = F.coalesce(older, F.lit(False))
    selected = [F.col(f"e.`{c}`") for c in df.columns]
    selected = [
        F.when(stale[c], F.lit(None)).otherwise(s).alias(c) if c in stale else s
        for c, s in zip(df.columns, selected, strict=True)
    ]
    return source.select(*selected)
