"""scd2 of change events with tracked columns (`track_history_column_list` /
`track_history_except_column_list`), through run_load, read back with delta-rs.

The reference model applies the events one by one in sequence order, in plain Python: an event whose
tracked column (`name`) differs from that of its key's open version (or that follows a delete, or is
its key's first) closes that version and opens one; an event that changes only `note` updates the open
version in place (absorbed); a delete closes the open version and opens none. The whole history must
equal it whatever the batching, arrival order, duplicates and replays of the events, or a load stopped
between its kept events' commit and its commit of the table (docs/CDC.md).
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError
from tests.arrivals import arrival_batches, delivered
from tests.budget import examples
from tests.faults import FAIL_AT, InjectedFault
from tests.helpers import table_version
from tests.races import another_load_commits_first
from tests.spark.test_cdc_scd2 import load as load_events

pytestmark = pytest.mark.spark

TYPES = {
    "name": {"data_type": "text"},
    "note": {"data_type": "text"},
    "op": {"data_type": "text"},
    "seq": {"data_type": "double"},
}
COLUMNS = ("id", "name", "note", "_dlt_valid_from", "_dlt_valid_to")


def load(spark, dataset, events, **arguments):
    arguments.setdefault("columns", TYPES)
    arguments.setdefault("except_column_list", ["op"])
    if "track_history_except_column_list" not in arguments:
        arguments.setdefault("track_history_column_list", ["name"])
    return load_events(spark, dataset, events, **arguments)


def event(key, seq, name=None, note=None, op="U"):
    return {"id": key, "seq": seq, "name": name, "note": note, "op": op}


def history(dataset, table="customers"):
    rows = DeltaTable(f"{dataset}/{table}").to_pyarrow_table(columns=list(COLUMNS)).to_pylist()
    return sorted((tuple(r[c] for c in COLUMNS) for r in rows), key=lambda v: (v[0], v[3]))


def model(events) -> list[tuple]:
    """The history in-order arrival builds, `name` tracked, `note` not."""
    versions, current = [], {}
    for e in sorted(events, key=lambda e: (e["id"], e["seq"])):
        key, open_version = e["id"], current.get(e["id"])
        if e["op"] == "D":
            if open_version is not None:
                versions.append((key, *open_version, e["seq"]))
            current[key] = None
        elif open_version is not None and open_version[0] == e["name"]:
            current[key] = (e["name"], e["note"], open_version[2])  # absorbed: valid_from kept
        else:
            if open_version is not None:
                versions.append((key, *open_version, e["seq"]))
            current[key] = (e["name"], e["note"], e["seq"])
    versions += [(key, *v, None) for key, v in current.items() if v is not None]
    return sorted(versions, key=lambda v: (v[0], v[3]))


def test_a_change_of_untracked_columns_only_updates_the_current_version_in_place(spark, dataset):
    first = load(spark, dataset, [event(1, 10, "A", "x"), event(1, 12, "A", "y"), event(2, 5, "B", "z")])
    assert history(dataset) == [(1, "A", "y", 10, None), (2, "B", "z", 5, None)]
    assert (first.metrics["numEventsApplied"], first.metrics["numEventsAbsorbed"]) == (3, 1)
    second = load(spark, dataset, [event(1, 15, "A", "w"), event(1, 20, "C", "w")])
    assert history(dataset) == [(1, "A", "w", 10, 20), (1, "C", "w", 20, None), (2, "B", "z", 5, None)]
    counts = ("numEventsApplied", "numEventsAbsorbed", "numEventsSkippedStale", "numVersionsSplit")
    assert {k: second.metrics[k] for k in counts} == dict(zip(counts, (2, 1, 0, 0), strict=True))
    assert (second.metrics["numTargetRowsInserted"], second.metrics["numTargetRowsUpdated"]) == (1, 1)
    replayed = load(spark, dataset, [event(1, 12, "A", "y"), event(2, 5, "B", "z")])  # delivered again
    assert history(dataset) == [(1, "A", "w", 10, 20), (1, "C", "w", 20, None), (2, "B", "z", 5, None)]
    assert {k: replayed.metrics[k] for k in counts} == dict(zip(counts, (0, 0, 2, 0), strict=True))


def test_a_late_event_splits_a_version_that_absorbed_events_at_their_place(spark, dataset):
    load(spark, dataset, [event(1, 10, "A", "x"), event(1, 12, "A", "p"), event(1, 15, "A", "q")])
    assert history(dataset) == [(1, "A", "q", 10, None)]
    late = load(spark, dataset, [event(1, 13, "B", "r")])
    assert history(dataset) == [(1, "A", "p", 10, 13), (1, "B", "r", 13, 15), (1, "A", "q", 15, None)]
    assert late.metrics["numVersionsSplit"] == 0  # the current version ends, it was not closed before
    assert (late.metrics["numTargetRowsInserted"], late.metrics["numTargetRowsUpdated"]) == (2, 1)
    absorbed_late = load(spark, dataset, [event(1, 11, "A", "o"), event(1, 14, "B", "s")])
    assert history(dataset) == [(1, "A", "p", 10, 13), (1, "B", "s", 13, 15), (1, "A", "q", 15, None)]
    assert absorbed_late.metrics["numEventsAbsorbed"] == 2
    assert absorbed_late.metrics["numTargetRowsUpdated"] == 1  # 11 is older than 12: no change
    back = load(spark, dataset, [event(1, 12.5, "C", "t")])  # splits the closed version [10, 13)
    assert history(dataset) == [
        (1, "A", "p", 10, 12.5),
        (1, "C", "t", 12.5, 13),
        (1, "B", "s", 13, 15),
        (1, "A", "q", 15, None),
    ]
    assert back.metrics["numVersionsSplit"] == 1


def test_the_kept_events_compacted_by_maintenance_still_split_a_late_events_version(spark, dataset):
    from airflow_provider_deltamerge import maintain_table

    for seq, note in ((10, "x"), (12, "p"), (15, "q")):  # one file of kept events each
        load(spark, dataset, [event(1, seq, "A", note)])
    kept = maintain_table(dataset, "_dlt_events_customers", optimize=True, checkpoint=True)
    assert (kept["numRemovedFiles"], kept["numAddedFiles"]) == (3, 1)
    load(spark, dataset, [event(1, 13, "B", "r")])
    assert history(dataset) == [(1, "A", "p", 10, 13), (1, "B", "r", 13, 15), (1, "A", "q", 15, None)]


def test_a_late_event_equal_to_its_neighbours_joins_them_into_one_version(spark, dataset):
    load(spark, dataset, [event(1, 10, "A", "x"), event(1, 20, "B", "y"), event(1, 30, "A", "z")])
    late = load(spark, dataset, [event(1, 15, "A", "w"), event(1, 25, "A", "v")])
    assert history(dataset) == [(1, "A", "w", 10, 20), (1, "B", "y", 20, 25), (1, "A", "z", 25, None)]
    assert (late.metrics["numTargetRowsDeleted"], late.metrics["numTargetRowsInserted"]) == (1, 1)


def test_deletes_close_versions_and_the_next_event_always_opens_one(spark, dataset):
    events = [event(1, 1, "A", "x"), event(1, 2, op="D"), event(1, 3, "A", "x"), event(1, 4, "A", "y")]
    load(spark, dataset, events[:1] + events[3:], apply_as_deletes="op = 'D'")
    load(spark, dataset, events[1:3], apply_as_deletes="op = 'D'")
    assert history(dataset) == [(1, "A", "x", 1, 2), (1, "A", "y", 3, None)]
    assert history(dataset) == model(events)


def test_the_except_list_tracks_every_other_stored_column(spark, dataset):
    events = [event(1, 1, "A", "x"), event(1, 2, "A", "y"), event(1, 3, "B", "y")]
    scd2 = {"disposition": "merge", "strategy": "scd2", "active_column_name": "is_current"}
    load(spark, dataset, events[::2], track_history_except_column_list=["note"], write_disposition=scd2)
    load(spark, dataset, events[1:2], track_history_except_column_list=["note"], write_disposition=scd2)
    assert history(dataset) == model(events) == [(1, "A", "y", 1, 3), (1, "B", "y", 3, None)]
    flags = DeltaTable(f"{dataset}/customers").to_pyarrow_table(columns=["_dlt_valid_from", "is_current"])
    assert sorted(flags.to_pylist(), key=repr) == [
        {"_dlt_valid_from": 1.0, "is_current": False},
        {"_dlt_valid_from": 3.0, "is_current": True},
    ]


def test_versions_loaded_before_the_lists_count_as_events(spark, dataset):
    load(spark, dataset, [event(1, 10, "A", "x"), event(1, 12, "A", "y")], track_history_column_list=None)
    assert history(dataset) == [(1, "A", "x", 10, 12), (1, "A", "y", 12, None)]
    load(spark, dataset, [event(1, 20, "A", "z")])
    assert history(dataset) == [(1, "A", "z", 10, None)]  # 12 and 20 change only the note
    load(spark, dataset, [event(1, 11, "B", "w")])  # 12, absorbed, still splits at its place
    assert history(dataset) == [(1, "A", "x", 10, 11), (1, "B", "w", 11, 12), (1, "A", "z", 12, None)]


def test_a_load_stopped_between_its_kept_events_and_its_commit_is_done_again_by_its_retry(
    spark, dataset, monkeypatch
):
    load(spark, dataset, [event(1, 10, "A", "x")])
    version = table_version(f"{dataset}/customers")
    monkeypatch.setenv(FAIL_AT, "after_events")
    with pytest.raises(InjectedFault):
        load(spark, dataset, [event(1, 12, "A", "y")])
    monkeypatch.delenv(FAIL_AT)
    assert table_version(f"{dataset}/customers") == version
    kept = DeltaTable(f"{dataset}/_dlt_events_customers").to_pyarrow_table().to_pylist()
    assert sorted(r["_dlt_sequence"] for r in kept) == [10, 12]  # 12 written, its load never completed
    load(spark, dataset, [event(1, 20, "B", "z")])  # 12 is not honoured: the version keeps x
    assert history(dataset) == [(1, "A", "x", 10, 20), (1, "B", "z", 20, None)]
    retried = load(spark, dataset, [event(1, 12, "A", "y")])
    assert (retried.metrics["numEventsApplied"], retried.metrics["numEventsAbsorbed"]) == (1, 1)
    assert history(dataset) == [(1, "A", "y", 10, 20), (1, "B", "z", 20, None)]
    load(spark, dataset, [event(1, 11, "C", "w")])
    assert history(dataset) == [
        (1, "A", "x", 10, 11),
        (1, "C", "w", 11, 12),
        (1, "A", "y", 12, 20),
        (1, "B", "z", 20, None),
    ]


@pytest.mark.parametrize(
    ("arguments", "argument", "why"),
    [
        (
            {"track_history_column_list": ["name"], "track_history_except_column_list": ["note"]},
            "track_history_except_column_list",
            "not both",
        ),
        ({"track_history_column_list": ["seq"]}, "track_history_column_list", "sequence_by column"),
        ({"track_history_column_list": ["colour"]}, "track_history_column_list", "the events lack"),
    ],
)
def test_lists_that_make_no_sense_are_refused_before_anything_is_committed(  # all cases: unit tests
    spark, dataset, arguments, argument, why
):
    load(spark, dataset, [event(1, 1, "A", "x")])
    version = table_version(f"{dataset}/customers")
    with pytest.raises(ConfigError, match=why) as refused:
        load(spark, dataset, [event(1, 2, "B", "y")], **arguments)
    assert refused.value.argument == argument
    assert table_version(f"{dataset}/customers") == version
    assert history(dataset) == [(1, "A", "x", 1, None)]


EVENTS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(0, 1),
            "seq": st.integers(0, 20),
            "name": st.sampled_from(["A", "B"]),
            "note": st.sampled_from(["x", "y", None]),
            "op": st.sampled_from(["U", "U", "U", "D"]),
        }
    ),
    min_size=2,
    max_size=9,
).map(lambda events: list({(e["id"], e["seq"]): e for e in events}.values()))  # one per key and seq

SPLIT_EXAMPLE = [
    event(0, 10, "A", "x"),
    event(0, 12, "A", "p"),
    event(0, 15, "A", "q"),
    event(0, 13, "B", "r"),
]


@pytest.mark.property
@settings(max_examples=examples(3), deadline=None, suppress_health_check=list(HealthCheck))
@given(events=EVENTS, batches=st.integers(1, 3), seed=st.integers(0, 2**16))
@example(events=SPLIT_EXAMPLE, batches=2, seed=47)  # 13 arrives after 10, 12 and 15, 10 and 15 again
def test_the_history_depends_only_on_the_events_not_on_arrival_or_batching(
    spark, tmp_path_factory, events, batches, seed
):
    dataset = str(tmp_path_factory.mktemp("scd2tracked"))
    arrivals = arrival_batches(events, batches, seed)
    delivered(lambda batch: load(spark, dataset, batch, apply_as_deletes="op = 'D'"), arrivals, seed)
    assert history(dataset) == model(events)


def test_timestamp_sequences_keep_their_events_as_timestamps(spark, dataset):
    from datetime import datetime, timezone

    day = [datetime(2024, 1, d, tzinfo=timezone.utc) for d in range(1, 4)]
    types = {**TYPES, "seq": {"data_type": "timestamp"}}
    load(spark, dataset, [event(1, day[0], "A", "x"), event(1, day[2], "A", "y")], columns=types)
    load(spark, dataset, [event(1, day[1], "B", "z")], columns=types)  # splits at the kept event of day 3
    assert history(dataset) == [
        (1, "A", "x", day[0], day[1]),
        (1, "B", "z", day[1], day[2]),
        (1, "A", "y", day[2], None),
    ]


def test_a_load_planned_before_another_kept_events_is_planned_again_over_them(spark, dataset, monkeypatch):
    """Load B plans its late event; load A commits an event B's version absorbs before B commits: B is
    planned again, so the version before B's keeps A's values."""

    load(spark, dataset, [event(7, 10, "A", "x"), event(7, 20, "A", "y")])
    with another_load_commits_first(
        monkeypatch, lambda: load(spark, dataset, [event(7, 12, "A", "p")])
    ) as raced:
        late = load(spark, dataset, [event(7, 15, "B", "b")])
    assert raced["load"].metrics["numEventsAbsorbed"] == 1
    assert late.metrics["numEventsApplied"] == 1
    assert history(dataset) == [(7, "A", "p", 10, 15), (7, "B", "b", 15, 20), (7, "A", "y", 20, None)]


def test_a_column_of_nulls_only_is_neither_stored_nor_kept_until_it_has_a_type(spark, dataset):
    untyped = {"name": {"data_type": "text"}, "op": {"data_type": "text"}, "seq": {"data_type": "double"}}
    load(spark, dataset, [event(1, 1, "A"), event(1, 2, "A")], columns=untyped)
    assert "note" not in DeltaTable(f"{dataset}/_dlt_events_customers").schema().to_arrow().names
    load(spark, dataset, [event(1, 3, "A", "x"), event(1, 1.5, "B")], columns=untyped)
    assert history(dataset) == [(1, "A", None, 1, 1.5), (1, "B", None, 1.5, 2), (1, "A", "x", 2, None)]
