"""DataFrames a load holds computed while it runs: read once from their source, kept in Spark's cache
(memory, spilling to disk), and released when the load ends, however it ends.

A load's later jobs then read the rows its first pass read, even where the source would answer a second
read differently (a live query, a non-deterministic column): the quarantined rows of a load are the rows
its staging pass set aside (spark/expectations.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pyspark import StorageLevel
from pyspark.sql import DataFrame

_HELD: ContextVar[list[DataFrame] | None] = ContextVar("deltamerge_held_frames", default=None)


@contextmanager
def held_for_load() -> Iterator[None]:
    """The scope of one load: what `hold` kept inside it is released at its end."""
    held: list[DataFrame] = []
    token = _HELD.set(held)
    try:
        yield
    finally:
        _HELD.reset(token)
        for df in held:
            df.unpersist()


def hold(df: DataFrame) -> DataFrame:
    """`df`, cached by the first job that computes it and read from that cache by every later job of the
    load (lazily: the first pass fills it, no job of its own). Outside a load's scope, `df` as it is."""
    held = _HELD.get()
    if held is None:
        return df
    kept = df.persist(StorageLevel.MEMORY_AND_DISK)
    held.append(kept)
    return kept
