"""scd2 of change events with deletes (`apply_as_deletes`), through run_load, read back with delta-rs.

The reference model applies the events one by one in sequence order, in plain Python: an event opens a
version of its key, which the key's next event (a delete too) closes at its sequence; a delete opens
none. The whole history must equal it whatever the batching, arrival order, duplicates and replays of
the events, or a load stopped between its deletes' commit and its commit of the table (docs/CDC.md).
"""

from __future__ import annotations

import itertools
import json

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError
from tests.arrivals import arrival_batches, delivered
from tests.budget import examples
from tests.faults import FAIL_AT, InjectedFault
from tests.helpers import read_rows, table_version
from tests.races import another_load_commits_first
from tests.spark.test_cdc_scd2 import history
from tests.spark.test_cdc_scd2 import load as load_events

DELETES = "op = 'D'"
TEXT = {"name": {"data_type": "text"}, "op": {"data_type": "text"}, "seq": {"data_type": "double"}}


def load(spark, dataset, events, **arguments):
    arguments.setdefault("apply_as_deletes", DELETES)
    arguments.setdefault("columns", TEXT)
    return load_events(spark, dataset, events, **arguments)


def event(key, seq, name=None, op="U"):
    return {"id": key, "seq": float(seq), "name": name, "op": op}


def model(events) -> list[tuple]:
    """The history in-order arrival builds: each event closes its key's open version (if any) at its
    sequence, and opens one unless it is a delete."""
    versions, current = [], {}
    for e in sorted(events, key=lambda e: (e["id"], e["seq"])):
        if current.get(e["id"]) is not None:
            versions.append((*current[e["id"]], e["seq"]))
        current[e["id"]] = None if e["op"] == "D" else (e["id"], e["name"], e["seq"])
    versions += [(*version, None) for version in current.values() if version is not None]
    return sorted(versions, key=repr)


def remembered(dataset, table="customers") -> list[tuple]:
    """The deletes the companion table remembers: (key, sequence)."""
    rows = DeltaTable(f"{dataset}/_dlt_tombstones_{table}").to_pyarrow_table().to_pylist()
    return sorted((r["id"], r["_dlt_sequence"]) for r in rows)


def logged(key):
    """3: create, 5: delete, 5.5: update, 6: delete; in log order: versions [3, 5) and [5.5, 6)."""
    return [
        event(key, 3, "created"),
        event(key, 5, op="D"),
        event(key, 5.5, "updated"),
        event(key, 6, op="D"),
    ]


def test_the_example_gives_the_same_history_in_every_arrival_order(spark, dataset):
    """Each of the 24 arrival orders is one key's: load i holds the i-th event of every order."""
    orders = list(itertools.permutations(range(4)))
    for position in range(4):
        load(spark, dataset, [logged(key)[order[position]] for key, order in enumerate(orders)])
    expected = [(key, name, start, end) for key in range(len(orders)) for name, start, end in (
        ("created", 3.0, 5.0), ("updated", 5.5, 6.0)
    )]  # fmt: skip
    assert history(dataset) == sorted(expected, key=repr)


def test_deletes_in_one_batch_and_across_batches_and_their_metrics(spark, dataset):
    first = load(spark, dataset, [event(1, 3, "a"), event(1, 5, op="D"), event(2, 1, "b")])
    assert history(dataset) == [(1, "a", 3.0, 5.0), (2, "b", 1.0, None)]
    counts = ("numEventsApplied", "numEventsSkippedStale", "numEventsDeleted", "numVersionsClosedByDeletes")
    assert {k: first.metrics[k] for k in counts} == dict(zip(counts, (3, 0, 1, 1), strict=True))
    assert first.metrics["numTombstonesWritten"] == 1
    second = load(spark, dataset, [event(2, 4, op="D"), event(1, 5.5, "c"), event(1, 6, op="D")])
    assert history(dataset) == [(1, "a", 3.0, 5.0), (1, "c", 5.5, 6.0), (2, "b", 1.0, 4.0)]
    assert {k: second.metrics[k] for k in counts} == dict(zip(counts, (3, 0, 2, 2), strict=True))
    recorded = {r["load_id"]: json.loads(r["metrics"]) for r in read_rows(f"{dataset}/_dlt_loads")}
    assert {k: recorded[second.load_id][k] for k in counts} == dict(zip(counts, (3, 0, 2, 2), strict=True))
    replayed = load(spark, dataset, [event(1, 5, op="D"), event(1, 3, "a")])  # delivered again
    assert history(dataset) == [(1, "a", 3.0, 5.0), (1, "c", 5.5, 6.0), (2, "b", 1.0, 4.0)]
    assert {k: replayed.metrics[k] for k in counts} == dict(zip(counts, (0, 2, 0, 0), strict=True))
    assert remembered(dataset) == [(1, 5.0), (1, 6.0), (2, 4.0)]  # each delete once, at its place


def test_a_late_event_after_a_delete_of_a_key_without_versions_ends_at_the_delete(spark, dataset):
    load(spark, dataset, [event(1, 5, op="D")])  # nothing to close: the table starts empty
    assert history(dataset) == []
    late = load(spark, dataset, [event(1, 3, "older"), event(2, 2, op="D")])
    assert history(dataset) == [(1, "older", 3.0, 5.0)]
    assert (late.metrics["numEventsApplied"], late.metrics["numVersionsClosedByDeletes"]) == (2, 1)
    load(spark, dataset, [event(2, 1, "older"), event(1, 4, "between")])
    assert history(dataset) == [(1, "between", 4.0, 5.0), (1, "older", 3.0, 4.0), (2, "older", 1.0, 2.0)]


def test_a_load_without_apply_as_deletes_honours_the_remembered_deletes(spark, dataset):
    load(spark, dataset, [event(1, 1, "a"), event(1, 5, op="D")])
    load(spark, dataset, [event(1, 3, "late")], apply_as_deletes=None)
    assert history(dataset) == [(1, "a", 1.0, 3.0), (1, "late", 3.0, 5.0)]


def test_a_load_stopped_between_its_deletes_and_its_commit_leaves_deletes_nobody_honours(
    spark, dataset, monkeypatch
):
    load(spark, dataset, [event(1, 3, "a")])
    version = table_version(f"{dataset}/customers")
    monkeypatch.setenv(FAIL_AT, "after_tombstones")
    with pytest.raises(InjectedFault):
        load(spark, dataset, [event(1, 5, op="D")])
    monkeypatch.delenv(FAIL_AT)
    assert table_version(f"{dataset}/customers") == version
    assert remembered(dataset) == [(1, 5.0)]  # committed, but its load never completed
    load(spark, dataset, [event(1, 6, "the delete never happened")])
    assert history(dataset) == [(1, "a", 3.0, 6.0), (1, "the delete never happened", 6.0, None)]
    retried = load(spark, dataset, [event(1, 5, op="D")])  # the retry: its own record of the delete
    assert (retried.metrics["numEventsDeleted"], retried.metrics["numTombstonesWritten"]) == (1, 1)
    assert history(dataset) == [(1, "a", 3.0, 5.0), (1, "the delete never happened", 6.0, None)]
    load(spark, dataset, [event(1, 4, "late")])
    assert history(dataset) == [
        (1, "a", 3.0, 4.0),
        (1, "late", 4.0, 5.0),
        (1, "the delete never happened", 6.0, None),
    ]


def test_a_load_planned_before_another_deleted_does_not_run_past_the_delete(spark, dataset, monkeypatch):
    """Load B plans its late event; load A commits a delete before it, earlier in the history than B's
    event's next point: B is planned again, and its version ends at the delete."""
    load(spark, dataset, [event(7, 1, "a"), event(7, 9, "c")])
    with another_load_commits_first(
        monkeypatch, lambda: load(spark, dataset, [event(7, 5, op="D")])
    ) as raced:
        late = load(spark, dataset, [event(7, 3, "b")])
    assert raced["load"].metrics["numEventsDeleted"] == 1
    assert late.metrics["numVersionsClosedByDeletes"] == 1
    assert history(dataset) == [(7, "a", 1.0, 3.0), (7, "b", 3.0, 5.0), (7, "c", 9.0, None)]


def test_a_merge_bounded_by_the_batch_keys_leaves_the_other_keys_versions_as_they_were(spark, dataset):
    load(spark, dataset, [event(k, 1, "a") for k in range(10)])
    load(spark, dataset, [event(k, 1, "a") for k in range(10, 20)])  # a file of its own
    late = load(spark, dataset, [event(12, 0.5, "first"), event(15, 3, op="D"), event(12, 2, "b")])
    expected = [(k, "a", 1.0, None) for k in range(20) if k not in (12, 15)]
    expected += [(12, "first", 0.5, 1.0), (12, "a", 1.0, 2.0), (12, "b", 2.0, None), (15, "a", 1.0, 3.0)]
    assert history(dataset) == sorted(expected, key=repr)
    assert late.metrics["numTargetFilesRemoved"] <= 1  # the file holding keys 10-19 at most


@pytest.mark.parametrize(
    ("arguments", "argument", "why"),
    [
        ({"tombstone_retention": 3600}, "tombstone_retention", "kept as long as its history"),
        ({"sequence_by": None}, "apply_as_deletes", "give sequence_by too"),
        ({"columns": {**TEXT, "gone": {"hard_delete": True}}}, "apply_as_deletes", "both mark deletes"),
        ({"apply_as_deletes": "kind = 'D'"}, "apply_as_deletes", "is not a condition over the events"),
    ],
)
def test_deletes_that_cannot_be_applied_are_refused_before_anything_is_committed(
    spark, dataset, arguments, argument, why
):
    load(spark, dataset, [event(1, 1, "a")])
    version = table_version(f"{dataset}/customers")
    with pytest.raises(ConfigError, match=why) as refused:
        load(spark, dataset, [event(1, 2, op="D")], **arguments)
    assert refused.value.argument == argument
    assert table_version(f"{dataset}/customers") == version
    assert history(dataset) == [(1, "a", 1.0, None)]


EVENTS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(0, 1),
            "seq": st.integers(0, 20),
            "name": st.sampled_from(["a", "b", None]),
            "op": st.sampled_from(["U", "U", "D"]),
        }
    ),
    min_size=2,
    max_size=8,
).map(lambda events: [event(e["id"], e["seq"], e["name"], e["op"]) for e in events])


def _one_per_place(events):
    return list({(e["id"], e["seq"]): e for e in events}.values())  # one event per key and sequence


@pytest.mark.property
@settings(max_examples=examples(4), deadline=None, suppress_health_check=list(HealthCheck))
@given(events=EVENTS.map(_one_per_place), batches=st.integers(1, 3), seed=st.integers(0, 2**16))
@example(events=logged(0) + logged(1), batches=3, seed=2)
def test_the_history_depends_only_on_the_events_deletes_among_them(
    spark, tmp_path_factory, events, batches, seed
):
    dataset = str(tmp_path_factory.mktemp("scd2deletes"))
    delivered(lambda batch: load(spark, dataset, batch), arrival_batches(events, batches, seed), seed)
    assert history(dataset) == model(events)
