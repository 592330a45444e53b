"""Which tombstones count (delta/tombstones.py): their load completed, not the reading load, within the
retention; the expired counted."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pyarrow as pa

from airflow_provider_deltamerge.delta.tombstones import TombstoneRead

NOW = datetime(2026, 1, 10, tzinfo=timezone.utc)


def read(*rows: tuple[int, int, str, datetime]) -> TombstoneRead:
    ids, seqs, loads, times = (list(c) for c in zip(*rows, strict=True))
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "_dlt_sequence": pa.array(seqs, pa.int64()),
            "_dlt_load_id": pa.array(loads, pa.large_string()),
            "_dlt_written_at": pa.array(times, pa.timestamp("us", "UTC")),
        }
    )
    return TombstoneRead("/lake/_dlt_tombstones_t", table, 3)


def test_a_tombstone_counts_once_its_load_completed_and_until_it_expires():
    cutoff = NOW - timedelta(days=7)
    tombstones = read(
        (1, 5, "1.1", NOW),  # completed: counts
        (2, 6, "1.2", NOW),  # its load never completed (stopped before its table commit)
        (3, 7, "1.3", NOW),  # the reading load's own: the deletes it is applying
        (4, 8, "1.1", cutoff - timedelta(seconds=1)),  # expired
    )
    honoured = tombstones.honoured({"1.1", "1.3"}, "1.3", cutoff, ["id", "_dlt_sequence"])
    assert honoured == [{"id": 1, "_dlt_sequence": 5}]
    assert tombstones.expired(cutoff) == 1


def test_no_tombstone_table_has_none_that_count():
    nothing = TombstoneRead("/lake/_dlt_tombstones_t", None, None)
    assert nothing.honoured({"1.1"}, "1.2", NOW, ["id"]) == []
    assert nothing.expired(NOW) == 0
