"""DataFrames a load holds computed while it runs, released when the load ends, however it ends: those
kept in Spark's cache (memory, spilling to disk) and its local checkpoints (spark/frames.py).

A load's later jobs then read the rows its first pass read, even where the source would answer a second
read differently (a live query, a non-deterministic column): the quarantined rows of a load too large to
carry them out of its staging pass are the rows that pass set aside (spark/expectations.py).

Where the load has counted a checkpoint's rows, Spark's estimate of a batch that only filters and
projects it is bounded by them (`rows_under`): Spark sizes a checkpoint by the plan it came from, so a
week's rows cut from a year of files would be estimated as the year.

A local checkpoint's blocks stay in the executors' memory and local disk until Spark's cleaner finds the
checkpoint unreferenced after a garbage collection of the driver's JVM (by default every 30 minutes): a
task that runs many loads in one session (a backfill's windows) would otherwise keep every window's
batch, and filled a 39 GB disk within 20 windows of a 10M-row catchup.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame


@dataclass
class _Load:
    frames: list[DataFrame] = field(default_factory=list)  # released when the load ends
    rows: dict[int, int] = field(default_factory=dict)  # a checkpoint's RDD id -> the rows it holds


_HELD: ContextVar[_Load | None] = ContextVar("deltamerge_held_frames", default=None)
_BOUNDED_NODES = ("Project", "Filter")  # plan nodes that never return more rows than they read


@contextmanager
def held_for_load() -> Iterator[None]:
    """The scope of one load: what `hold` kept inside it is released at its end."""
    held = _Load()
    token = _HELD.set(held)
    try:
        yield
    finally:
        _HELD.reset(token)
        for df in held.frames:
            _release(df)


def hold(df: DataFrame) -> DataFrame:
    """`df`, cached by the first job that computes it and read from that cache by every later job of the
    load (lazily: the first pass fills it, no job of its own). Outside a load's scope, `df` as it is."""
    held = _HELD.get()
    if held is None:
        return df
    kept = df.persist(StorageLevel.MEMORY_AND_DISK)
    held.frames.append(kept)
    return kept


def checkpointed(df: DataFrame) -> DataFrame:
    """`df`, a local checkpoint, whose blocks are removed when the load ends (outside a load's scope,
    left to Spark's cleaner)."""
    held = _HELD.get()
    if held is not None:
        held.frames.append(df)
    return df


def counted(df: DataFrame, rows: int) -> None:
    """Record that `df`, a local checkpoint of this load, holds `rows` rows (a classic session's)."""
    held, leaf = _HELD.get(), _checkpoint_of(df)
    if held is not None and leaf is not None:
        held.rows[int(leaf.rdd().id())] = rows


def rows_under(plan: Any) -> int | None:
    """At most how many rows an optimized plan (a JVM object) returns, where it only filters and
    projects a checkpoint whose rows this load counted; None where that is not known."""
    held = _HELD.get()
    if held is None or not held.rows:
        return None
    node = plan
    while node.getClass().getSimpleName() in _BOUNDED_NODES:
        node = node.child()
    if node.getClass().getSimpleName() != "LogicalRDD":
        return None
    return held.rows.get(int(node.rdd().id()))


def _checkpoint_of(df: DataFrame) -> Any:
    """The checkpoint plan (LogicalRDD) `df` is, on a classic session; else None."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    plan = jdf.queryExecution().analyzed()
    return plan if plan.getClass().getSimpleName() == "LogicalRDD" else None


def _release(df: DataFrame) -> None:
    """Drop `df` from Spark's cache, and where it is a local checkpoint (a classic session's plan over
    the checkpointed RDD), that RDD's blocks; Spark Connect releases a checkpoint with its DataFrame."""
    df.unpersist()
    plan = _checkpoint_of(df)
    if plan is None:
        return
    rdd = plan.rdd()
    try:  # what RDD.unpersist does, without its warning that a checkpoint's rows cannot be computed again
        rdd.context().unpersistRDD(rdd.id(), False)
    except Exception:  # a Spark without that method
        rdd.unpersist(False)
