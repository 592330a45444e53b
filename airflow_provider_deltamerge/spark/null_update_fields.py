"""Partial updates (`ignore_null_updates`) of a struct column field by field, in Spark.

Staging keeps, per key, each leaf field's newest non-null value and its sequence, and each struct's (the
column's, a nested one's) the newest event that carried it (`newest_fields`); a struct no event carried
stays null, whatever its fields. Against tombstones and truncates, a field whose sequence is not newer
than the cut is no value (`without_stale_fields`). `struct_shapes` reads a schema's struct columns, of
Spark or of Arrow, for the plan (plan/null_update_fields.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ConfigError
from ..model.null_updates import NODE_SEQUENCE, Shape


def struct_shapes(schema) -> dict[str, Shape]:
    """The fields of each struct column (with at least one field) of a Spark StructType or an Arrow
    schema; arrays and maps of structs are values, not structs."""
    fields = schema.fields if isinstance(schema, T.StructType) else list(schema)
    shapes = {f.name: _shape(f.dataType if isinstance(schema, T.StructType) else f.type) for f in fields}
    return {name: shape for name, shape in shapes.items() if shape}


def _shape(kind) -> Shape | None:
    if isinstance(kind, T.StructType) and kind.fields:
        return tuple((f.name, _shape(f.dataType)) for f in kind.fields)
    if isinstance(kind, pa.StructType) and kind.num_fields:
        return tuple((kind.field(i).name, _shape(kind.field(i).type)) for i in range(kind.num_fields))
    return None


def check_fields(column: str, kind: T.StructType, path: str = "") -> None:
    """Refuse a nested struct of `column` with a field named as the sequence its field sequences keep
    beside its fields (NODE_SEQUENCE): the two would clash."""
    for field in kind.fields:
        nested = isinstance(field.dataType, T.StructType) and field.dataType.fields
        if not nested:
            continue
        named = f"{path}{field.name}"
        if any(f.name.lower() == NODE_SEQUENCE for f in field.dataType.fields):
            raise ConfigError(
                "ignore_null_updates",
                f"struct column {column!r}: its struct field {named!r} holds a field {NODE_SEQUENCE!r}, "
                "the name its field sequences keep that struct's own sequence under. Nothing was loaded. "
                "Rename that field in the source, or name the column in "
                "ignore_null_updates_except_column_list (its nulls are then values)",
            )
        check_fields(column, field.dataType, named + ".")


@dataclass(frozen=True)
class Events:
    """How staging finds the values of one key (spark/null_updates.py)."""

    since: Column  # whether an event counts: after its key's newest delete in the batch
    sequence: Column  # an event's sequence, one struct of its parts (part1, part2, ...)
    key: Window  # the key's events
    newest_first: Window  # the key's events, newest first


@dataclass(frozen=True)
class _Node:
    value: Column  # the newest value (a struct's: field by field)
    carried: Column  # the sequence of the newest event that carried a value
    fields: tuple[tuple[str, _Node], ...] | None  # a struct's; None: a leaf


def newest_fields(value: Column, kind: T.StructType, events: Events, parts: int):
    """The struct column with each field's newest non-null value since the key's newest delete, the
    sequence of the newest event that carried the struct, and, per part, its fields' sequences."""
    node = _newest(value, kind, events)
    shaped = [F.when(node.carried.isNull(), F.lit(None)).otherwise(_sequences(node, i)) for i in range(parts)]
    return node.value, node.carried, shaped


def _newest(value: Column, kind, events: Events) -> _Node:
    carried = F.max(F.when(events.since & value.isNotNull(), events.sequence)).over(events.key)
    if not isinstance(kind, T.StructType) or not kind.fields:
        newest = F.first(F.when(events.since, value), ignorenulls=True).over(events.newest_first)
        return _Node(newest, carried, None)
    fields = tuple((f.name, _newest(value.getField(f.name), f.dataType, events)) for f in kind.fields)
    built = F.struct(*(node.value.alias(name) for name, node in fields)).cast(kind)
    return _Node(F.when(carried.isNull(), F.lit(None).cast(kind)).otherwise(built), carried, fields)


def _sequences(node: _Node, i: int) -> Column:
    """Part `i` (from 0) of the sequences of a struct's fields (model/null_updates.sequences_shape)."""
    return F.struct(*(_sequences_field(name, field, i) for name, field in node.fields))


def _sequences_field(name: str, field: _Node, i: int) -> Column:
    part = field.carried.getField(f"part{i + 1}")
    if field.fields is None:
        return part.alias(name)
    nested = F.struct(part.alias(NODE_SEQUENCE), *(_sequences_field(n, f, i) for n, f in field.fields))
    return F.when(field.carried.isNull(), F.lit(None)).otherwise(nested).alias(name)


def without_stale_fields(
    value: Column, sequences: list[Column], kind: T.StructType, stale: Callable[[list[Column]], Column]
) -> tuple[Column, list[Column]]:
    """The staged struct `value` and its fields' `sequences` (one per part) with each field whose
    sequence is `stale` (a condition over its parts) null, its sequence too; a nested struct by its
    own sequence, whole, else field by field."""
    fields, per_part = _fresh(value, sequences, kind, stale)
    return F.struct(*fields).cast(kind), [F.struct(*part) for part in per_part]


def _fresh(value: Column, sequences: list[Column], kind: T.StructType, stale):
    fields: list[Column] = []
    per_part: list[list[Column]] = [[] for _ in sequences]
    for field in kind.fields:
        parts = [s.getField(field.name) for s in sequences]
        nested = isinstance(field.dataType, T.StructType) and bool(field.dataType.fields)
        own = [p.getField(NODE_SEQUENCE) for p in parts] if nested else parts
        gone = F.coalesce(stale(own), F.lit(False))
        held, held_parts = value.getField(field.name), parts
        if nested:
            inner, inner_parts = _fresh(held, parts, field.dataType, stale)
            built = F.struct(*inner).cast(field.dataType)
            held = F.when(held.isNull(), F.lit(None).cast(field.dataType)).otherwise(built)
            held_parts = [
                F.when(p.isNull(), F.lit(None)).otherwise(
                    F.struct(p.getField(NODE_SEQUENCE).alias(NODE_SEQUENCE), *inner_part)
                )
                for p, inner_part in zip(parts, inner_parts, strict=True)
            ]
        fields.append(F.when(gone, F.lit(None)).otherwise(held).alias(field.name))
        for target, part in zip(per_part, held_parts, strict=True):
            target.append(F.when(gone, F.lit(None)).otherwise(part).alias(field.name))
    return fields, per_part
