"""Partial updates (`ignore_null_updates`) against tombstones (`apply_as_deletes`, load/tombstones.py).

A staged row of partial updates carries, in each chosen column, the newest value an event of its key
carried, and its sequence (`sequence_of`): that event may be older than the key's tombstone even where
the row's newest event is newer (the row is kept). A delete resets the row, so such a value is no value:
`older_values_dropped` makes it null, its sequence too. And since any event older than the key's newest
delete must be left out, not only an older row, the tombstone a load writes is each key's newest delete in
the batch (the `deleted_at` helpers), also one older than the key's newest event: `newest_deletes`.
A truncate (`apply_as_truncates`) resets every row: the newest, remembered or the batch's, cuts every key's
values as a tombstone of the key does.
A struct column's fields are cut one by one, by their own sequences (model/null_updates.py).
Both work on the Arrow table where staging collected the batch, else in Spark.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc

from ..delta.delta_rs import spark_to_arrow
from ..model.null_updates import NODE_SEQUENCE, deleted_at, field_sequences_of, sequence_owner
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
        keys = staged.arrow.select(list(key)).to_pylist()
        cuts = [_newer(newest.get(tuple(r[k] for k in key)), truncated_at) for r in keys]
        arrow = _fields_in_arrow(_in_arrow(staged.arrow, cuts, kept), cuts, kept)
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


def _in_arrow(arrow: pa.Table, cuts: list, kept) -> pa.Table:
    """Each kept value (and its sequence) made null where it is not newer than its row's cut."""
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


def _fields_in_arrow(arrow: pa.Table, cuts: list, kept) -> pa.Table:
    """A struct value's fields (model/null_updates.py) each made null where its own sequence is not newer
    than its row's cut, its sequence too (the struct's own, older, made it null whole already)."""
    for value, at in kept.items():
        names = field_sequences_of(value, len(at))
        if not all(n in arrow.column_names for n in names) or not any(c is not None for c in cuts):
            continue
        values, shaped = arrow[value].to_pylist(), [arrow[n].to_pylist() for n in names]
        for row, cut in enumerate(cuts):
            if values[row] is None:
                for parts in shaped:
                    parts[row] = None
            elif cut is not None:
                _fresh(values[row], [parts[row] for parts in shaped], tuple(cut))
        for name, column in ((value, values), *zip(names, shaped, strict=True)):
            index = arrow.schema.get_field_index(name)
            field = arrow.schema.field(index)
            arrow = arrow.set_column(index, field, pa.array(column, field.type))
    return arrow


def _fresh(value: dict, sequences: list, cut: tuple) -> None:
    """The fields of a struct `value` whose own sequence (in `sequences`, one struct per part) is not
    newer than `cut`, and their sequences, made null in place; a nested struct by its own, whole."""
    for name in list(value):
        parts = [s.get(name) if s is not None else None for s in sequences]
        nested = isinstance(parts[0], dict)
        own = tuple(p.get(NODE_SEQUENCE) if isinstance(p, dict) else p for p in parts)
        if own[0] is not None and own <= cut:
            value[name] = None
            for s in sequences:
                if s is not None:
                    s[name] = None
        elif nested and value[name] is not None:
            _fresh(value[name], parts, cut)


def _newer(first, second):
    """The newer of two sequences, either of which may be None (none)."""
    if first is None or second is None:
        return second if first is None else first
    return max(first, second)


def _in_spark(spark, df, newest: dict, truncated_at, key, sequence, kept):
    from pyspark.sql import Column
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.types import StructField, StructType

    from ..spark.null_update_fields import without_stale_fields

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

    def older(held: list) -> Column:
        """Whether a sequence (its parts) is not newer than its key's tombstone or the truncate."""
        result = F.lit(False)
        if cut is not None:
            result = cut[0].isNotNull() & cdc.not_newer(held, cut)
        if truncated_at is not None:
            result = result | cdc.not_newer(held, [F.lit(v) for v in truncated_at])
        return F.coalesce(result, F.lit(False))

    replaced = {}
    for value, at in kept.items():
        gone = older([col(c, "e") for c in at])
        for name in (value, *at):
            replaced[name] = F.when(gone, F.lit(None)).otherwise(col(name, "e"))
        names = field_sequences_of(value, len(at))
        kind = df.schema[value].dataType
        if isinstance(kind, T.StructType) and kind.fields and all(n in df.columns for n in names):
            held = col(value, "e")
            rebuilt, shaped = without_stale_fields(held, [col(n, "e") for n in names], kind, older)
            replaced[value] = F.when(gone | held.isNull(), F.lit(None)).otherwise(rebuilt)
            for name, part in zip(names, shaped, strict=True):
                replaced[name] = F.when(gone | held.isNull(), F.lit(None)).otherwise(part)
    selected = [replaced[c].alias(c) if c in replaced else col(c, "e") for c in df.columns]
    return source.select(*selected)
