"""Delete events (`apply_as_deletes`) and their tombstones, through run_load, read back with delta-rs.

The reference model applies the events one by one in sequence order, in plain Python (a delete removes
its key); the table must equal it whatever the batching, arrival order, duplicates and replays of the
events, a load stopped between its tombstones and its commit, or a load racing another (docs/CDC.md).
"""

from __future__ import annotations

import json
import time

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError
from airflow_provider_deltamerge.load import staged_arrow
from tests.arrivals import arrival_batches, delivered
from tests.budget import examples
from tests.cli.test_cli import as_json
from tests.faults import FAIL_AT, InjectedFault
from tests.helpers import read_rows, table_version
from tests.races import another_load_commits_first
from tests.spark.test_cdc import load as load_events
from tests.spark.test_cdc import rows

DELETES = "op = 'D'"
TEXT = {"name": {"data_type": "text"}, "op": {"data_type": "text"}}


def load(spark, dataset, events, **arguments):
    arguments.setdefault("apply_as_deletes", DELETES)
    arguments.setdefault("columns", TEXT)
    return load_events(spark, dataset, events, **arguments)


def event(key, seq, name=None, op="U"):
    return {"id": key, "seq": seq, "name": name, "op": op}


def tombstones(dataset, table="accounts") -> dict:
    """The companion table's tombstones: key -> [(sequence, load id)]."""
    found: dict = {}
    for row in DeltaTable(f"{dataset}/_dlt_tombstones_{table}").to_pyarrow_table().to_pylist():
        found.setdefault(row["id"], []).append((row["_dlt_sequence"], row["_dlt_load_id"]))
    return found


def model(events) -> dict:
    """The table as in-order arrival builds it: each key's newest event, absent where it is a delete."""
    table = {}
    for e in sorted(events, key=lambda e: e["seq"]):
        if e["op"] == "D":
            table.pop(e["id"], None)
        else:
            table[e["id"]] = e
    return table


def test_a_delete_removes_the_row_and_an_older_event_arriving_later_does_not_bring_it_back(spark, dataset):
    load(spark, dataset, [event(1, 1, "ann"), event(2, 1, "bob")])
    before = table_version(f"{dataset}/accounts")
    deleted = load(spark, dataset, [event(1, 5, op="D"), event(2, 2, "bob2")])
    assert table_version(f"{dataset}/accounts") == before + 1  # the delete and the update: one commit
    assert rows(dataset) == {2: event(2, 2, "bob2")}
    assert {
        k: deleted.metrics[k] for k in ("numEventsApplied", "numEventsDeleted", "numTombstonesWritten")
    } == {
        "numEventsApplied": 2,
        "numEventsDeleted": 1,
        "numTombstonesWritten": 1,
    }
    assert tombstones(dataset) == {1: [(5, deleted.load_id)]}
    recorded = {r["load_id"]: json.loads(r["metrics"]) for r in read_rows(f"{dataset}/_dlt_loads")}
    assert recorded[deleted.load_id]["numTombstonesWritten"] == 1  # the load's record carries them
    assert recorded[deleted.load_id]["numEventsDeleted"] == 1
    late = load(spark, dataset, [event(1, 3, "late ann")])  # older than the delete: skipped
    assert rows(dataset) == {2: event(2, 2, "bob2")}
    assert (late.metrics["numEventsApplied"], late.metrics["numEventsSkippedStale"]) == (0, 1)
    load(spark, dataset, [event(1, 6, "ann again")])  # newer than the delete: the key is back
    assert rows(dataset) == {1: event(1, 6, "ann again"), 2: event(2, 2, "bob2")}
    assert "_dlt_load_id" in DeltaTable(f"{dataset}/accounts").schema().to_arrow().names
    assert set(DeltaTable(f"{dataset}/accounts").schema().to_arrow().names) == {
        "id", "seq", "name", "op", "_dlt_load_id", "_dlt_id", "_dlt_sequence"
    }  # fmt: skip


def test_a_delete_of_a_key_the_table_lacks_is_remembered_within_a_batch_and_across_loads(spark, dataset):
    first = load(spark, dataset, [event(1, 1, "ann"), event(1, 2, op="D"), event(9, 5, op="D")])
    assert rows(dataset) == {}
    assert first.metrics["numTombstonesWritten"] == 2
    load(spark, dataset, [event(9, 4, "older"), event(1, 1, "ann replayed")])
    assert rows(dataset) == {}
    load(spark, dataset, [event(9, 7, "newer")])
    assert rows(dataset) == {9: event(9, 7, "newer")}


def test_the_tables_command_lists_the_tombstone_table_as_the_datasets_own(spark, dataset):
    load(spark, dataset, [event(1, 1, "ann"), event(2, 2, op="D")])
    tables = {t["table"]: t["system"] for t in as_json("tables", dataset)}
    assert tables == {
        "accounts": False,
        "_dlt_loads": True,
        "_dlt_tombstones_accounts": True,
    }


def test_a_load_without_apply_as_deletes_still_honours_the_tables_tombstones(spark, dataset):
    load(spark, dataset, [event(1, 1, "ann")])
    load(spark, dataset, [event(1, 4, op="D")])
    load(spark, dataset, [event(1, 3, "late")], apply_as_deletes=None)
    assert rows(dataset) == {}


def test_events_that_do_not_fit_on_the_driver_are_filtered_in_spark(spark, dataset, monkeypatch):
    monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", 0)  # staged in Spark, not collected
    load(spark, dataset, [event(1, 1, "ann"), event(2, 1, "bob")])
    load(spark, dataset, [event(1, 5, op="D"), event(2, 3, op="D")])
    load(spark, dataset, [event(1, 4, "late"), event(2, 4, "newer"), event(3, 1, "cid")])
    assert rows(dataset) == {2: event(2, 4, "newer"), 3: event(3, 1, "cid")}


def test_tombstones_expire_after_the_retention_and_the_expired_are_removed(spark, dataset):
    load(spark, dataset, [event(1, 1, "ann"), event(2, 1, "bob")], tombstone_retention=2)
    load(spark, dataset, [event(1, 5, op="D")], tombstone_retention=2)
    time.sleep(2.5)
    expiring = load(spark, dataset, [event(2, 9, op="D")], tombstone_retention=2)
    assert expiring.metrics["numTombstonesExpired"] == 1
    assert set(tombstones(dataset)) == {2}
    load(spark, dataset, [event(1, 3, "older than the expired delete")], tombstone_retention=2)
    assert rows(dataset) == {1: event(1, 3, "older than the expired delete")}


def test_tombstones_compacted_by_maintenance_still_keep_a_deleted_key_from_coming_back(spark, dataset):
    from airflow_provider_deltamerge import maintain_table

    load(spark, dataset, [event(1, 1, "ann"), event(2, 1, "bob")])
    first, second = (load(spark, dataset, [event(key, 5, op="D")]) for key in (1, 2))  # a file each
    compacted = maintain_table(dataset, "_dlt_tombstones_accounts", optimize=True, vacuum=True)
    assert (compacted["numRemovedFiles"], compacted["numAddedFiles"]) == (2, 1)
    assert tombstones(dataset) == {1: [(5, first.load_id)], 2: [(5, second.load_id)]}
    load(spark, dataset, [event(1, 3, "older than the delete"), event(2, 4, "older too")])
    assert rows(dataset) == {}


def test_a_load_stopped_between_its_tombstones_and_its_commit_leaves_tombstones_nobody_honours(
    spark, dataset, monkeypatch
):
    load(spark, dataset, [event(1, 1, "ann")])
    version = table_version(f"{dataset}/accounts")
    monkeypatch.setenv(FAIL_AT, "after_tombstones")
    with pytest.raises(InjectedFault):
        load(spark, dataset, [event(1, 5, op="D")])
    monkeypatch.delenv(FAIL_AT)
    assert table_version(f"{dataset}/accounts") == version
    assert [seq for seq, _ in tombstones(dataset)[1]] == [5]  # committed, but its load never completed
    load(spark, dataset, [event(1, 4, "applies: the delete never happened")])
    assert rows(dataset) == {1: event(1, 4, "applies: the delete never happened")}
    retried = load(spark, dataset, [event(1, 5, op="D")])  # the retry: a new load id, its own tombstone
    assert rows(dataset) == {}
    assert (retried.metrics["numEventsDeleted"], retried.metrics["numTombstonesWritten"]) == (1, 1)
    load(spark, dataset, [event(1, 4, "applies: the delete never happened")])
    assert rows(dataset) == {}


def test_a_load_planned_before_another_deleted_its_key_does_not_bring_the_key_back(
    spark, dataset, monkeypatch
):
    """Load B reads the tombstones and plans; load A commits the delete of B's key (newer than B's
    event) before B commits: B's commit is planned again and skips its event."""
    load(spark, dataset, [event(1, 1, "ann")])
    with another_load_commits_first(
        monkeypatch, lambda: load(spark, dataset, [event(7, 5, op="D")])
    ) as raced:
        late = load(spark, dataset, [event(7, 3, "older than the delete"), event(1, 9, op="D")])
    assert raced["load"].metrics["numTombstonesWritten"] == 1
    assert rows(dataset) == {}
    assert (late.metrics["numEventsSkippedStale"], late.metrics["numEventsDeleted"]) == (1, 1)
    # its tombstone, written by both attempts of the load, is there once
    assert tombstones(dataset) == {1: [(9, late.load_id)], 7: [(5, raced["load"].load_id)]}
    load(spark, dataset, [event(7, 3, "older than the delete"), event(1, 2, "older than its delete")])
    assert rows(dataset) == {}


@pytest.mark.parametrize(
    ("arguments", "argument", "why"),
    [
        ({"sequence_by": None}, "apply_as_deletes", "give sequence_by too"),
        ({"sequence_by": None, "write_disposition": "append"}, "apply_as_deletes", "give sequence_by too"),
        ({"write_disposition": "append"}, "sequence_by", "does not apply events by key"),
        ({"columns": {**TEXT, "gone": {"hard_delete": True}}}, "apply_as_deletes", "both mark deletes"),
        ({"apply_as_deletes": "op = = 'D'"}, "apply_as_deletes", "is not a condition over the events"),
        ({"apply_as_deletes": "kind = 'D'"}, "apply_as_deletes", "is not a condition over the events"),
        ({"apply_as_deletes": "seq + 1"}, "apply_as_deletes", "not a condition"),
        ({"apply_as_deletes": "  "}, "apply_as_deletes", "is not a SQL condition"),
        ({"tombstone_retention": 0}, "tombstone_retention", "is not a duration"),
    ],
)
def test_deletes_that_cannot_be_applied_are_refused_before_anything_is_committed(
    spark, dataset, arguments, argument, why
):
    load(spark, dataset, [event(1, 1, "ann")])
    version = table_version(f"{dataset}/accounts")
    with pytest.raises(ConfigError, match=why) as refused:
        load(spark, dataset, [event(1, 2, op="D")], **arguments)
    assert refused.value.argument == argument
    assert table_version(f"{dataset}/accounts") == version
    assert rows(dataset) == {1: event(1, 1, "ann")}


EVENTS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(0, 3),
            "seq": st.integers(0, 30),
            "name": st.sampled_from(["a", "b", None]),
            "op": st.sampled_from(["U", "U", "D"]),
        }
    ),
    min_size=1,
    max_size=14,
).map(lambda events: list({(e["id"], e["seq"]): e for e in events}.values()))  # one event per key and seq


# Delivered as [U2 D5 D5 U3], [U1], [D4], [D4] (seed 1): the late U1 of a deleted key, a replay.
LATE_AFTER_DELETE = [
    event(1, 1, "a"),
    event(1, 5, op="D"),
    event(1, 3, "b"),
    event(2, 2, "c"),
    event(2, 4, op="D"),
]


@pytest.mark.property
@settings(max_examples=examples(6), deadline=None, suppress_health_check=list(HealthCheck))
@given(events=EVENTS, batches=st.integers(1, 4), seed=st.integers(0, 2**16))
@example(events=LATE_AFTER_DELETE, batches=3, seed=1)
def test_the_table_depends_only_on_the_events_deletes_among_them(
    spark, tmp_path_factory, events, batches, seed
):
    dataset = str(tmp_path_factory.mktemp("cdc_deletes"))
    delivered(
        lambda batch: load(spark, dataset, batch), arrival_batches(events, batches, seed, replay=True), seed
    )
    assert rows(dataset) == model(events)
