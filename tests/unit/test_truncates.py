"""Truncate events without Spark: the remembered truncate among the tombstones, the batch's events
against the newest truncate (on the driver), the rows a truncate removes as a condition, and the event
metrics of a load with one."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from airflow_provider_deltamerge.delta.spark_sql import render_spark
from airflow_provider_deltamerge.load.truncates import against_truncates, split
from airflow_provider_deltamerge.model.cdc import event_metrics
from airflow_provider_deltamerge.model.options import TableHints
from airflow_provider_deltamerge.plan.cdc import not_newer_than

KEY, SEQUENCE = ("id",), ("_dlt_sequence", "_dlt_sequence_2")


@dataclass(frozen=True)
class Staged:
    arrow: pa.Table
    df: object = None


def staged(*rows: tuple) -> Staged:
    ids, days, positions, flags = (list(c) for c in zip(*rows, strict=True))
    return Staged(pa.table({"id": ids, "_dlt_sequence": days, "_dlt_sequence_2": positions, "__hd": flags}))


def test_a_tombstone_with_a_null_key_is_a_truncate_and_the_newest_one_is_remembered():
    tombstones = [
        {"id": 1, "_dlt_sequence": 9, "_dlt_sequence_2": 9},
        {"id": None, "_dlt_sequence": 2, "_dlt_sequence_2": 7},
        {"id": None, "_dlt_sequence": 3, "_dlt_sequence_2": 1},
        {"id": None, "_dlt_sequence": 4, "_dlt_sequence_2": None},  # written before the column existed
    ]
    keyed, remembered = split(tombstones, KEY, SEQUENCE)
    assert keyed == tombstones[:1]
    assert remembered == (3, 1)  # compared in order: the first column that differs decides
    assert split(tombstones[:1], KEY, SEQUENCE) == (tombstones[:1], None)


def test_events_not_newer_than_the_newest_truncate_are_dropped_and_the_batchs_truncate_kept():
    batch = staged(
        (1, 2, 5, False),  # older than the batch's truncate at (2, 6)
        (None, 2, 6, True),  # the truncate
        (2, 2, 6, True),  # a delete at the truncate's sequence: not newer
        (3, 2, 7, False),
    )
    kept, truncate = against_truncates(batch, None, KEY, SEQUENCE)
    assert truncate == (2, 6)
    assert kept.arrow["id"].to_pylist() == [None, 3]
    kept, truncate = against_truncates(batch, (2, 6), KEY, SEQUENCE)  # remembered already: stale
    assert (truncate, kept.arrow["id"].to_pylist()) == (None, [3])
    kept, truncate = against_truncates(batch, (1, 9), KEY, SEQUENCE)
    assert (truncate, kept.arrow["id"].to_pylist()) == ((2, 6), [None, 3])
    unflagged = Staged(pa.table({"id": [1, 2], "_dlt_sequence": [1, 3], "_dlt_sequence_2": [0, 0]}))
    kept, truncate = against_truncates(unflagged, (2, 0), KEY, SEQUENCE)  # a load without truncates
    assert (truncate, kept.arrow["id"].to_pylist()) == (None, [2])
    assert against_truncates(unflagged, None, KEY, SEQUENCE) == (unflagged, None)


def test_the_rows_a_truncate_removes_are_those_of_its_sequence_or_older_and_those_without_one():
    older = not_newer_than(SEQUENCE, (2, 6))
    assert render_spark(older) == (
        "(t.`_dlt_sequence` IS NULL) OR ((t.`_dlt_sequence` < 2) OR "
        "((t.`_dlt_sequence` = 2) AND (t.`_dlt_sequence_2` <= 6)))"
    )
    first_column_only = not_newer_than(SEQUENCE, (2, 6), ("id", "_dlt_sequence"))
    assert render_spark(first_column_only) == "(t.`_dlt_sequence` IS NULL) OR (t.`_dlt_sequence` <= 2)"
    assert not_newer_than(SEQUENCE, (2, 6), ("id",)) is None  # no sequence yet: every row


def test_the_rows_a_truncate_removes_are_no_events_deletes_and_the_truncate_is_an_applied_event():
    hints = TableHints(primary_key=("id",), sequence_by=("seq",), apply_as_deletes="op = 'D'")
    commit = {"numTargetRowsInserted": 1, "numTargetRowsUpdated": 1, "numTargetRowsDeleted": 3}
    truncated = {"numEventsTruncated": 1, "numTargetRowsTruncated": 2}
    assert event_metrics(hints, 6, commit, truncated=truncated) == {
        "numEventsApplied": 4,  # the insert, the update, one delete, the truncate
        "numEventsSkippedStale": 2,
        "numEventsDeleted": 1,
        "numEventsTruncated": 1,
        "numTargetRowsTruncated": 2,
    }
    assert "numEventsTruncated" not in event_metrics(hints, 6, commit)
