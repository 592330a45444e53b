"""Partial updates (`ignore_null_updates`) against tombstones (`apply_as_deletes`, load/tombstones.py).

A staged row of partial updates carries, in each chosen column, the newest value an event of its key
carried, and its sequence (`sequence_of`): that event may be older than the key's tombstone even where
the row's newest event is newer (the row is kept). A delete resets the row, so such a value is no value:
`older_values_dropped` makes it null, its sequence too. And since any event older than the key's newest
delete must be left out, not only an older row, the tombstone a load writes is each key's newest delete in
the batch (the `deleted_at` helpers), also one older than the key's newest event: `newest_deletes`.
A truncate (`apply_as_truncates`) resets every row: the newest, remembered or the batch's, cuts every key's
values as a tombstone of the key does.
Both work on the Arrow table where staging collected the batch, else in Spark.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc

from ..delta.delta_rs import spark_to_arrow
from ..model.null_updates import deleted_at, sequence_owner
from ..spark import cdc
from ..spark.names import col, cols


def newest_deletes(staged, key, sequence) -> pa.Table:
    """The key and, as its sequence, the newest delete of each key that has one in the batch."""
    helpers = list(deleted_at(len(sequence)))
    if staged.arrow is not None:
        rows = staged.arrow.filter(pc.is_valid(staged.arrow[helpers[0]])).select([*key, *helpers])
        return rows.rename_columns([*key, *sequence])
    df = staged.df
    named = [col(h).alias(c) for h, c in zip(helpers, sequence, strict=True)]
    return spark_to_arrow(df.where(col(helpers[0]).isNotNull()).select(*cols(key), *named))


def older_values_dropped(spark, staged, tombstones: list[dict], key, sequence, truncated_at=None):
    """The staged rows with each chosen column's value (and its sequence) null where it is not newer than
    its key's newest tombstone, or than the newest truncate (`truncated_at`, a sequence; None: none).
    Sequences of several columns compare in order."""
    newest: dict[tuple, tuple] = {}
    for tomb in tombstones:
        at, held = tuple(tomb[c] for c in sequence), tuple(tomb[k] for k in key)
        if at[0] is not None and (held not in newest or at > newest[held]):
            newest[held] = at
    columns = staged.arrow.column_names if staged.arrow is not None else staged.df.columns
    kept = _kept_values(columns, len(sequence))
    if not (newest or truncated_at is not None) or not kept:
        return staged
    if staged.arrow is not None:
        arrow = _in_arrow(staged.arrow, newest, truncated_at, key, kept)
        return dataclasses.replace(staged, arrow=arrow)
    df = _in_spark(spark, staged.df, newest, truncated_at, key, sequence, kept)
    return dataclasses.replace(staged, df=df)


def _kept_values(columns, parts: int) -> dict[str, tuple[str, ...]]:
    """Each staged value column that carries its sequence, and the columns of that sequence in order."""
    owned: dict[str, dict[int, str]] = {}
    for name in columns:
        owner = sequence_owner(name)
        if owner is not None and owner[0] in columns:
            owned.setdefault(owner[0], {})[owner[1]] = name
    complete = {value: at for value, at in owned.items() if len(at) == parts}
    return {value: tuple(at[p] for p in range(1, parts + 1)) for value, at in complete.items()}


def _in_arrow(arrow: pa.Table, newest: dict, truncated_at, key, kept) -> pa.Table:
    keys = arrow.select(list(key)).to_pylist()
    cuts = [_newer(newest.get(tuple(r[k] for k in key)), truncated_at) for r in keys]
    for value, at in kept.items():
        held = zip(*(arrow[c].to_pylist() for c in at), strict=True)
        stale = [c is not None and s[0] is not None and s <= c for s, c in zip(held, cuts, strict=True)]
        mask = pa.array(stale, pa.bool_())
        for name in (value, *at):
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


def _in_spark(spark, df, newest: dict, truncated_at, key, sequence, kept):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    source, cut = df.alias("e"), None
    if newest:  # the newest tombstone of each row's key, beside it
        fields = [df.schema[c] for c in (*key, *sequence)]
        named = StructType([StructField(cdc.TOMBSTONE_PREFIX + f.name, f.dataType, True) for f in fields])
        frame = spark.createDataFrame([(*held, *at) for held, at in newest.items()], named)
        condition = None
        for k in key:
            same = col(k, "e").eqNullSafe(col(cdc.TOMBSTONE_PREFIX + k, "d"))
            condition = same if condition is None else condition & same
        source = source.join(F.broadcast(frame.alias("d")), condition, "left")
        cut = [col(cdc.TOMBSTONE_PREFIX + c, "d") for c in sequence]
    stale = {}
    for value, at in kept.items():
        held = [col(c, "e") for c in at]
        older = F.lit(False)
        if cut is not None:
            older = cut[0].isNotNull() & cdc.not_newer(held, cut)
        if truncated_at is not None:
            older = older | cdc.not_newer(held, [F.lit(v) for v in truncated_at])
        for name in (value, *at):
            stale[name] = F.coalesce(older, F.lit(False))
    selected = [col(c, "e") for c in df.columns]
    selected = [
        F.when(stale[c], F.lit(None)).otherwise(s).alias(c) if c in stale else s
        for c, s in zip(df.columns, selected, strict=True)
    ]
    return source.select(*selected)
