"""Truncate events (`apply_as_truncates`), through run_load, read back with delta-rs.

A truncate at a sequence removes every row older than it (and those without a sequence) in the load's
one MERGE commit, and is remembered as a tombstone of the whole table, so that events older than it are
stale whatever their key and whenever they arrive. The reference model applies the events one by one in
sequence order (a truncate after the other events of its sequence); the table must equal it whatever
the batching, arrival order, duplicates and replays (docs/CDC.md).
"""

from __future__ import annotations

import json
import os

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError, NullKeyError
from airflow_provider_deltamerge.load import staged_arrow
from tests.arrivals import arrival_batches, delivered
from tests.budget import examples
from tests.faults import FAIL_AT, InjectedFault
from tests.helpers import read_rows, table_version
from tests.races import another_load_commits_first
from tests.spark.test_cdc import load as load_events
from tests.spark.test_cdc import rows
from tests.spark.test_cdc_deletes import DELETES, event

TRUNCATES = "op = 'T'"
COLUMNS = {"id": {"data_type": "bigint"}, "name": {"data_type": "text"}, "op": {"data_type": "text"}}
TRUNCATE_METRICS = (
    "numEventsTruncated",
    "numTargetRowsTruncated",
    "numEventsApplied",
    "numEventsSkippedStale",
)


def load(spark, dataset, events, **arguments):
    arguments.setdefault("apply_as_truncates", TRUNCATES)
    arguments.setdefault("columns", COLUMNS)
    return load_events(spark, dataset, events, **arguments)


def truncate(seq, key=None):
    return {"id": key, "seq": seq, "name": None, "op": "T"}


def remembered(dataset, table="accounts") -> list:
    """The tombstone table's truncates (rows with a null key): [(sequence, load id)]."""
    found = DeltaTable(f"{dataset}/_dlt_tombstones_{table}").to_pyarrow_table().to_pylist()
    return sorted((r["_dlt_sequence"], r["_dlt_load_id"]) for r in found if r["id"] is None)


def model(events) -> dict:
    """The table as in-order arrival builds it: a truncate (after the other events of its sequence)
    empties it, a delete removes its key, any other event sets its key's row."""
    table = {}
    for e in sorted(events, key=lambda e: (e["seq"], e["op"] == "T")):
        if e["op"] == "T":
            table.clear()
        elif e["op"] == "D":
            table.pop(e["id"], None)
        else:
            table[e["id"]] = e
    return table


def test_a_truncate_removes_the_older_rows_keeps_the_newer_and_later_older_events_are_skipped(spark, dataset):
    load(spark, dataset, [event(1, 1, "ann"), event(2, 5, "bob"), event(3, 2, "cid")])
    before = table_version(f"{dataset}/accounts")
    truncated = load(spark, dataset, [event(4, 2, "dan, older"), truncate(3), event(5, 4, "eve")])
    assert table_version(f"{dataset}/accounts") == before + 1  # the truncate and the insert: one commit
    assert rows(dataset) == {2: event(2, 5, "bob"), 5: event(5, 4, "eve")}
    assert [truncated.metrics[k] for k in TRUNCATE_METRICS] == [1, 2, 2, 1]
    recorded = {r["load_id"]: json.loads(r["metrics"]) for r in read_rows(f"{dataset}/_dlt_loads")}
    assert recorded[truncated.load_id]["numTargetRowsTruncated"] == 2  # the load's record carries them
    assert recorded[truncated.load_id]["numEventsTruncated"] == 1
    assert remembered(dataset) == [(3, truncated.load_id)]
    late = load(spark, dataset, [event(1, 2, "late ann"), event(6, 3, "at the truncate")])
    assert rows(dataset) == {2: event(2, 5, "bob"), 5: event(5, 4, "eve")}
    assert [late.metrics[k] for k in TRUNCATE_METRICS] == [0, 0, 0, 2]
    load(spark, dataset, [event(1, 4, "ann again")], apply_as_truncates=None)  # newer: applies
    assert rows(dataset) == {1: event(1, 4, "ann again"), 2: event(2, 5, "bob"), 5: event(5, 4, "eve")}
    assert set(DeltaTable(f"{dataset}/accounts").schema().to_arrow().names) == {
        "id", "seq", "name", "op", "_dlt_load_id", "_dlt_id", "_dlt_sequence"
    }  # fmt: skip


def test_a_truncate_with_a_null_key_alone_in_its_batch_and_one_with_a_key(spark, dataset):
    load(spark, dataset, [truncate(5)])  # into a table that does not exist yet: remembered
    load(spark, dataset, [event(1, 3, "older than the truncate"), event(2, 6, "bob")])
    assert rows(dataset) == {2: event(2, 6, "bob")}
    alone = load(spark, dataset, [truncate(8)])
    assert rows(dataset) == {}
    assert [alone.metrics[k] for k in TRUNCATE_METRICS] == [1, 1, 1, 0]
    load(spark, dataset, [event(3, 9, "cid"), event(4, 12, "dan")])
    keyed = load(spark, dataset, [truncate(10, key=4)])  # its key names no row: it truncates all
    assert rows(dataset) == {4: event(4, 12, "dan")}
    assert keyed.metrics["numTargetRowsTruncated"] == 1
    assert [seq for seq, _ in remembered(dataset)] == [5, 8, 10]
    refused = [event(1, 20, "a"), {"id": None, "seq": 21, "name": "b", "op": "U"}]
    with pytest.raises(NullKeyError, match="primary_key column 'id' is null in 1 row"):
        load(spark, dataset, refused)  # only a truncate's key may be null
    with pytest.raises(NullKeyError, match="sequence_by column 'seq' is null in 1 row"):
        load(spark, dataset, [event(1, 22, "a"), truncate(None)])


def test_a_truncate_deletes_and_upserts_in_one_batch(spark, dataset):
    arguments = {"apply_as_deletes": DELETES}
    load(spark, dataset, [event(1, 1, "ann"), event(2, 1, "bob"), event(3, 8, "cid")], **arguments)
    batch = [
        event(1, 2, op="D"),  # older than the truncate: stale
        truncate(5),
        event(3, 9, op="D"),  # newer: deletes its row
        event(2, 6, "bob6"),  # newer: updates its row, which the truncate would have removed
        event(4, 7, "dan"),
        event(4, 3, "dan3"),  # older than the truncate (and than its key's newest)
    ]
    mixed = load(spark, dataset, batch, **arguments)
    assert rows(dataset) == {2: event(2, 6, "bob6"), 4: event(4, 7, "dan")}
    assert [mixed.metrics[k] for k in TRUNCATE_METRICS] == [1, 1, 4, 2]
    assert (mixed.metrics["numEventsDeleted"], mixed.metrics["numTombstonesWritten"]) == (1, 2)
    load(spark, dataset, [event(3, 8, "older than its delete"), event(1, 4, "older")], **arguments)
    assert rows(dataset) == {2: event(2, 6, "bob6"), 4: event(4, 7, "dan")}


def test_a_sequence_of_several_columns_is_compared_in_order(spark, dataset):
    arguments = {"sequence_by": ["day", "pos"]}

    def at(key, day, pos, op="U"):
        return {"id": key, "day": day, "pos": pos, "name": None, "op": op}

    load(spark, dataset, [at(1, 1, 9), at(2, 2, 1), at(3, 2, 3)], **arguments)
    load(spark, dataset, [at(None, 2, 2, op="T")], **arguments)
    load(spark, dataset, [at(4, 2, 1), at(5, 1, 9), at(6, 2, 3)], **arguments)
    assert sorted(r["id"] for r in read_rows(f"{dataset}/accounts")) == [3, 6]


def test_events_that_do_not_fit_on_the_driver_are_filtered_in_spark(spark, dataset, monkeypatch):
    monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", 0)  # staged in Spark, not collected
    load(spark, dataset, [event(1, 1, "ann"), event(2, 6, "bob")])
    truncated = load(spark, dataset, [truncate(5), event(3, 4, "older"), event(4, 7, "dan")])
    assert [truncated.metrics[k] for k in TRUNCATE_METRICS] == [1, 1, 2, 1]
    load(spark, dataset, [event(1, 3, "late"), truncate(4), event(5, 8, "eve")])
    assert rows(dataset) == {2: event(2, 6, "bob"), 4: event(4, 7, "dan"), 5: event(5, 8, "eve")}


def test_a_load_stopped_between_its_truncate_and_its_commit_leaves_a_truncate_nobody_honours(
    spark, dataset, monkeypatch
):
    load(spark, dataset, [event(1, 1, "ann"), event(2, 6, "bob")])
    version = table_version(f"{dataset}/accounts")
    monkeypatch.setenv(FAIL_AT, "after_tombstones")
    with pytest.raises(InjectedFault):
        load(spark, dataset, [truncate(5)])
    monkeypatch.delenv(FAIL_AT)
    assert table_version(f"{dataset}/accounts") == version
    assert [seq for seq, _ in remembered(dataset)] == [5]  # committed, but its load never completed
    load(spark, dataset, [event(3, 2, "applies: the truncate never happened")])
    assert rows(dataset) == {
        1: event(1, 1, "ann"),
        2: event(2, 6, "bob"),
        3: event(3, 2, "applies: the truncate never happened"),
    }
    retried = load(spark, dataset, [truncate(5)])  # the retry: a new load id, its own truncate
    assert rows(dataset) == {2: event(2, 6, "bob")}
    assert retried.metrics["numTargetRowsTruncated"] == 2
    load(spark, dataset, [event(3, 2, "applies: the truncate never happened")])
    assert rows(dataset) == {2: event(2, 6, "bob")}


def test_a_load_planned_before_another_truncated_the_table_skips_its_older_events(
    spark, dataset, monkeypatch
):
    """Load B reads the tombstones and plans; load A commits a truncate newer than B's event before B
    commits: B's commit is planned again and skips its event."""
    load(spark, dataset, [event(1, 1, "ann")])
    with another_load_commits_first(monkeypatch, lambda: load(spark, dataset, [truncate(5)])) as raced:
        late = load(spark, dataset, [event(7, 3, "older than the truncate"), event(2, 9, "bob")])
    assert raced["load"].metrics["numTargetRowsTruncated"] == 1
    assert rows(dataset) == {2: event(2, 9, "bob")}
    assert (late.metrics["numEventsApplied"], late.metrics["numEventsSkippedStale"]) == (1, 1)


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({"sequence_by": None}, "give sequence_by too"),
        ({"write_disposition": {"disposition": "merge", "strategy": "scd2"}, "merge_key": "id"}, "not scd2"),
        ({"apply_as_truncates": "op = = 'T'"}, "is not a condition over the events"),
        ({"apply_as_truncates": "kind = 'T'"}, "is not a condition over the events"),
        ({"apply_as_truncates": "seq + 1"}, "not a condition"),
    ],
)
def test_truncates_that_cannot_be_applied_are_refused_before_anything_is_committed(
    spark, dataset, arguments, why
):
    load(spark, dataset, [event(1, 1, "ann")])
    version = table_version(f"{dataset}/accounts")
    with pytest.raises(ConfigError, match=why) as refused:
        load(spark, dataset, [truncate(2)], **arguments)
    assert refused.value.argument == "apply_as_truncates"
    assert table_version(f"{dataset}/accounts") == version
    assert rows(dataset) == {1: event(1, 1, "ann")}


def test_a_batch_of_truncates_only_takes_its_keys_type_from_the_tombstones_or_is_refused(spark, dataset):
    untyped = {"name": {"data_type": "text"}}  # no type for id: a truncate's null key gives it none
    with pytest.raises(ConfigError, match="primary key column 'id'") as refused:
        load(spark, dataset, [truncate(5)], columns=untyped)
    assert refused.value.argument == "columns" and "declare it" in str(refused.value)
    assert not os.path.exists(f"{dataset}/_dlt_tombstones_accounts")
    assert not os.path.exists(f"{dataset}/accounts")
    load(spark, dataset, [event(1, 1, op="D")], apply_as_deletes=DELETES)  # remembered: id is bigint
    load(spark, dataset, [truncate(5)], columns=untyped)
    assert [seq for seq, _ in remembered(dataset)] == [5]
    load(spark, dataset, [event(2, 4, "older than the truncate"), event(3, 6, "cid")])
    assert rows(dataset) == {3: event(3, 6, "cid")}


def _one_truncate_per_sequence(events: list[dict]) -> list[dict]:
    """One event per key and sequence, a truncate's key drawn at random but its other values fixed, so
    that two truncates at one sequence are the same truncate."""
    events = [truncate(e["seq"], e["id"]) if e["op"] == "T" else e for e in events]
    return list({(e["id"], e["seq"], e["op"] == "T"): e for e in events}.values())


EVENTS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(0, 3),
            "seq": st.integers(0, 30),
            "name": st.sampled_from(["a", "b", None]),
            "op": st.sampled_from(["U", "U", "U", "D", "T"]),
        }
    ),
    min_size=1,
    max_size=14,
).map(_one_truncate_per_sequence)


# Cut into three batches and one replayed: events older than a truncate, a truncate older than another
# (with a key), a delete after the truncate.
LATE_AFTER_TRUNCATE = [
    event(1, 3, "a"),
    truncate(5),
    event(2, 7, "b"),
    event(2, 9, op="D"),
    truncate(2, key=1),
]


@pytest.mark.property
@settings(max_examples=examples(6), deadline=None, suppress_health_check=list(HealthCheck))
@given(events=EVENTS, batches=st.integers(1, 4), seed=st.integers(0, 2**16))
@example(events=LATE_AFTER_TRUNCATE, batches=3, seed=4)
def test_the_table_depends_only_on_the_events_truncates_and_deletes_among_them(
    spark, tmp_path_factory, events, batches, seed
):
    dataset = str(tmp_path_factory.mktemp("cdc_truncates"))
    arrivals = arrival_batches(events, batches, seed, replay=True)
    delivered(lambda batch: load(spark, dataset, batch, apply_as_deletes=DELETES), arrivals, seed)
    assert rows(dataset) == model(events)
