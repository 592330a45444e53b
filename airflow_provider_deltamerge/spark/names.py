"""Columns referred to by name in Spark, always quoted: a name given as a string to `F.col`,
`select`, `groupBy` or `Window.partitionBy` is parsed, so `a.b` would be field b of a struct a and
a name with a space, a backtick or a reserved word would not parse at all."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..model.naming import backticked


def col(name: str, alias: str | None = None) -> Column:
    """The column of that exact name (of the DataFrame aliased `alias`, where given)."""
    return F.col(f"{alias}.{backticked(name)}" if alias else backticked(name))


def cols(names: Iterable[str], alias: str | None = None) -> list[Column]:
    return [col(name, alias) for name in names]
