"""DataFrames a load holds computed while it runs, released when the load ends, however it ends: those
kept in Spark's cache (memory, spilling to disk) and its local checkpoints (spark/frames.py).

A load's later jobs then read the rows its first pass read, even where the source would answer a second
read differently (a live query, a non-deterministic column): the quarantined rows of a load are the rows
its staging pass set aside (spark/expectations.py).

A local checkpoint's blocks stay in the executors' memory and local disk until Spark's cleaner finds the
checkpoint unreferenced after a garbage collection of the driver's JVM (by default every 30 minutes): a
task that runs many loads in one session (a backfill's windows) would otherwise keep every window's
batch, and filled a 39 GB disk within 20 windows of a 10M-row catchup.
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
            _release(df)


def hold(df: DataFrame) -> DataFrame:
    """`df`, cached by the first job that computes it and read from that cache by every later job of the
    load (lazily: the first pass fills it, no job of its own). Outside a load's scope, `df` as it is."""
    held = _HELD.get()
    if held is None:
        return df
    kept = df.persist(StorageLevel.MEMORY_AND_DISK)
    held.append(kept)
    return kept


def checkpointed(df: DataFrame) -> DataFrame:
    """`df`, a local checkpoint, whose blocks are removed when the load ends (outside a load's scope,
    left to Spark's cleaner)."""
    held = _HELD.get()
    if held is not None:
        held.append(df)
    return df


def _release(df: DataFrame) -> None:
    """Drop `df` from Spark's cache, and where it is a local checkpoint (a classic session's plan over
    the checkpointed RDD), that RDD's blocks; Spark Connect releases a checkpoint with its DataFrame."""
    df.unpersist()
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return
    plan = jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() != "LogicalRDD":
        return
    rdd = plan.rdd()
    try:  # what RDD.unpersist does, without its warning that a checkpoint's rows cannot be computed again
        rdd.context().unpersistRDD(rdd.id(), False)
    except Exception:  # a Spark without that method
        rdd.unpersist(False)
