"""How much of a batch the Spark driver may pass to delta-rs as Arrow, and the refusal of a batch beyond it.

Spark's Arrow collection takes each partition of the batch whole into the driver's JVM heap on its way
to delta-rs. Where the executors run elsewhere, that is most of what a batch costs the heap:
DRIVER_SHARE of `spark.driver.memory`. On a local session the executors run in that same heap, which
then also holds the materialised batch, the key check's aggregation and the sort on the way, so a
batch may take LOCAL_SHARE of what Spark leaves of the heap after its own reserve. Measured on
local[2] (a batch materialised, key-checked and streamed into a new table, then merged again): with
2g, batches of 0.25 of that heap loaded in every run and 0.41 ran it out in every run; with 1g, a batch
of 0.25 loaded once its pieces were at most a quarter of the budget, and 0.35 stopped the JVM.
`spark.driver.maxResultSize` caps either.

A Spark job over the batch that runs the heap out anyway fails with Spark's error; `out_of_heap` tells
such an error, which the transfer and the writer's key check raise as the batch refused. A task thread
out of heap on a local session can stop the JVM itself, which nothing catches: the budget is kept well
below where that was seen.
"""

from __future__ import annotations

import dataclasses
import re

from ..errors import BatchTooLargeError

DRIVER_SHARE = 0.4  # of spark.driver.memory, where the executors run elsewhere
LOCAL_SHARE = 0.25  # of a local session's heap after Spark's reserve: its executors share that heap
SPARK_RESERVED_BYTES = 300 * 2**20  # the heap Spark keeps for itself before any of it is shared out
_UNITS = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_OUT_OF_HEAP = ("OutOfMemoryError", "maxResultSize", "TaskResultLost")  # the last: evicted under pressure


def parse_bytes(text: str | None, default: int) -> int:
    """Spark's size notation ("4g", "512m", "1073741824") in bytes; `default` where unset or unreadable."""
    match = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", (text or "").lower())
    if not match:
        return default
    return int(match.group(1)) * _UNITS.get(match.group(2), 1)


def budget_bytes(driver_memory: str, max_result_size: str, local: bool) -> int:
    """Bytes of Arrow a driver of `driver_memory` may take, at most `max_result_size` (0: no cap)."""
    heap = parse_bytes(driver_memory, 2**30)
    if local:
        budget = int(max(heap - SPARK_RESERVED_BYTES, 0) * LOCAL_SHARE)
    else:
        budget = int(heap * DRIVER_SHARE)
    cap = parse_bytes(max_result_size, 2**30)
    return min(budget, cap) if cap > 0 else budget


@dataclasses.dataclass(frozen=True)
class DriverBudget:
    """What the session's driver may take (`bytes`), with `spark.driver.memory` as set, and whether the
    session is local (its executors in the driver's heap)."""

    bytes: int
    driver_memory: str
    local: bool

    @classmethod
    def of(cls, spark) -> DriverBudget:
        memory = _conf(spark, "spark.driver.memory", "1g")
        local = _conf(spark, "spark.master", "").startswith("local")
        max_result = _conf(spark, "spark.driver.maxResultSize", "1g")
        return cls(budget_bytes(memory, max_result, local), memory, local)

    def refusal(self, table: str, batch_bytes: int, detail: str = "") -> BatchTooLargeError:
        if self.local:
            detail = f" on a local session, whose executors share the driver's heap{detail}"
        return BatchTooLargeError(table, batch_bytes, self.bytes, self.driver_memory, detail)


def out_of_heap(error: BaseException) -> str | None:
    """The line of a failed Spark job's error that says the driver's heap (or its result cap) ran out;
    None where it failed for another reason."""
    for line in str(error).splitlines():
        if any(sign in line for sign in _OUT_OF_HEAP):
            return line.strip()[:300]
    return None


def _conf(spark, key: str, default: str) -> str:
    try:
        return spark.conf.get(key, default) or default
    except Exception:  # a Connect server that hides a conf
        return default
