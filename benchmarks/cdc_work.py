"""The CDC case's workload: change events applied with `sequence_by` and `apply_as_deletes`, beside a
plain upsert of the same keys (bench_cold.py runs both, each in a fresh process).

The target holds P1's rows, each at sequence 1000 (loaded with sequence_by, so the table keeps its
sequence). The events are P1's change set (one event per key: 90% of the keys in the table, 10% new),
with a log position `lsn` and an op code: 10% are older than the table's rows (out of order: skipped
where the key is in the table), 5% are deletes. The plain upsert writes the same rows, op code and
position included, without either argument.
"""

from __future__ import annotations

from pyspark.sql import functions as F
from workload import Size, existing_id, new_id, updates

TABLE_SEQUENCE, LATE_SEQUENCE, NEW_SEQUENCE = 1000, 500, 2_000_000
CDC = {"sequence_by": "lsn", "apply_as_deletes": "op = 'd'"}


def late(i: int) -> bool:
    """10% of the events: older than the table's rows."""
    return (i // 2) % 10 == 3


def deleted(i: int) -> bool:
    """5% of the events (none of them late): deletes."""
    return (i // 2) % 20 == 7


def with_event_columns(rows, target: bool):
    """`lsn` and `op` of each row: the target's at TABLE_SEQUENCE, an event's by late() and deleted()."""
    half = F.floor(F.col("id") / 2)
    if target:
        return rows.withColumn("lsn", F.lit(TABLE_SEQUENCE).cast("long")).withColumn("op", F.lit("c"))
    lsn = F.when(half % 10 == 3, F.lit(LATE_SEQUENCE)).otherwise(F.lit(NEW_SEQUENCE) + F.col("id"))
    op = F.when(half % 20 == 7, F.lit("d")).otherwise(F.lit("u"))
    return rows.withColumn("lsn", lsn.cast("long")).withColumn("op", op)


def expected_rows(size: Size) -> int:
    """The table's rows after the events: a delete of a key in the table removes it, a late event of one
    is skipped, and every event of a new key but a delete inserts it."""
    removed = sum(1 for j in range(updates(size)) if deleted(existing_id(size, j)))
    inserted = sum(1 for j in range(size.changed_rows - updates(size)) if not deleted(new_id(size, j)))
    return size.target_rows - removed + inserted
