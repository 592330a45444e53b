"""scd2 of change events (sequence_by): every event a version of its merge key, bounded by the sequence.

The reference model applies the events one by one in sequence order, in plain Python; the whole
history (every version with its validity bounds) must equal it whatever the batching and arrival
order of the events (docs/CDC.md).
"""

from __future__ import annotations

import random

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError, NullKeyError, SequenceError, run_load
from tests.budget import examples
from tests.helpers import table_version

pytestmark = pytest.mark.spark

SCD2 = {"disposition": "merge", "strategy": "scd2"}


def load(spark, dataset, events, **arguments):
    arguments.setdefault("table_name", "customers")
    arguments.setdefault("pipeline_name", "feed")
    arguments.setdefault("merge_key", "id")
    arguments.setdefault("sequence_by", "seq")
    arguments.setdefault("write_disposition", SCD2)
    return run_load(events, spark=spark, dataset=dataset, **arguments)


def history(dataset, table="customers", columns=("id", "name", "_dlt_valid_from", "_dlt_valid_to")):
    rows = DeltaTable(f"{dataset}/{table}").to_pyarrow_table(columns=list(columns)).to_pylist()
    return sorted((tuple(r[c] for c in columns) for r in rows), key=repr)


def model(events) -> list[tuple]:
    """The history in-order arrival builds: each event opens a version of its key, which the key's
    next event closes at its sequence."""
    history, current = [], {}
    for event in sorted(events, key=lambda e: (e["id"], e["seq"])):
        key = event["id"]
        if key in current:
            history.append((*current[key][:3], event["seq"]))
        current[key] = (key, event["name"], event["seq"])
    history += [(*version, None) for version in current.values()]
    return sorted(history, key=repr)


def test_events_in_order_become_versions_bounded_by_their_sequences(spark, dataset):
    first = load(
        spark,
        dataset,
        [
            {"id": 1, "seq": 10, "name": "ann"},
            {"id": 1, "seq": 20, "name": "anna"},
            {"id": 2, "seq": 15, "name": "bob"},
            {"id": 2, "seq": 15, "name": "bob"},  # the same event delivered twice: one event
        ],
    )
    assert history(dataset) == [(1, "ann", 10, 20), (1, "anna", 20, None), (2, "bob", 15, None)]
    assert first.metrics["numEventsApplied"] == 3
    assert first.metrics["numEventsSkippedStale"] == 1
    assert first.metrics["numVersionsSplit"] == 0
    second = load(spark, dataset, [{"id": 1, "seq": 30, "name": "annie"}, {"id": 3, "seq": 1, "name": "cy"}])
    assert history(dataset) == [
        (1, "ann", 10, 20),
        (1, "anna", 20, 30),
        (1, "annie", 30, None),
        (2, "bob", 15, None),
        (3, "cy", 1, None),
    ]
    assert second.metrics["numTargetRowsInserted"] == 2
    assert second.metrics["numTargetRowsUpdated"] == 1  # the current version of 1 closed
    assert second.metrics["numVersionsSplit"] == 0


def test_a_late_event_splits_the_version_it_falls_into(spark, dataset):
    load(spark, dataset, [{"id": 1, "seq": 10, "name": "a"}, {"id": 1, "seq": 30, "name": "c"}])
    late = load(
        spark,
        dataset,
        [
            {"id": 1, "seq": 20, "name": "b"},  # inside [10, 30): splits it
            {"id": 1, "seq": 5, "name": "first"},  # before the first version: ends where it opens
            {"id": 1, "seq": 10, "name": "a"},  # a version the table holds: changes nothing
        ],
    )
    assert history(dataset) == [
        (1, "a", 10, 20),
        (1, "b", 20, 30),
        (1, "c", 30, None),
        (1, "first", 5, 10),
    ]
    assert late.metrics["numVersionsSplit"] == 1
    assert late.metrics["numEventsApplied"] == 2
    assert late.metrics["numEventsSkippedStale"] == 1
    assert (late.metrics["numTargetRowsInserted"], late.metrics["numTargetRowsUpdated"]) == (2, 1)


def test_an_event_loaded_again_changes_nothing(spark, dataset):
    events = [{"id": 1, "seq": 1, "name": "a"}, {"id": 1, "seq": 2, "name": "b"}]
    load(spark, dataset, events)
    before = history(dataset)
    again = load(spark, dataset, events)
    assert history(dataset) == before
    assert again.metrics["numEventsApplied"] == 0
    assert again.metrics["numEventsSkippedStale"] == 2
    assert (again.metrics["numTargetRowsInserted"], again.metrics["numTargetRowsUpdated"]) == (0, 0)


def test_column_lists_and_the_active_flag(spark, dataset):
    scd2 = {**SCD2, "active_column_name": "is_current"}
    events = [
        {"id": 1, "seq": 1, "op": "c", "name": "a"},
        {"id": 1, "seq": 3, "op": "u", "name": "c"},
    ]
    load(spark, dataset, events, except_column_list=["op", "seq"], write_disposition=scd2)
    load(
        spark,
        dataset,
        [{"id": 1, "seq": 2, "op": "u", "name": "b"}],
        except_column_list=["op", "seq"],
        write_disposition=scd2,
    )
    columns = ("id", "name", "_dlt_valid_from", "_dlt_valid_to", "is_current")
    assert history(dataset, columns=columns) == [
        (1, "a", 1, 2, False),
        (1, "b", 2, 3, False),
        (1, "c", 3, None, True),
    ]
    stored = DeltaTable(f"{dataset}/customers").schema().to_arrow().names
    assert "op" not in stored and "seq" not in stored


def test_null_sequences_and_ties_are_refused_before_anything_is_committed(spark, dataset):
    load(spark, dataset, [{"id": 1, "seq": 1, "name": "a"}])
    version = table_version(f"{dataset}/customers")
    with pytest.raises(NullKeyError, match="sequence_by column 'seq' is null in 1 row"):
        load(spark, dataset, [{"id": 1, "seq": None, "name": "b"}])
    with pytest.raises(
        SequenceError, match=r"1 key\(s\) with different events at one sequence, e.g. \(1, 4\)"
    ):
        load(spark, dataset, [{"id": 1, "seq": 4, "name": "b"}, {"id": 1, "seq": 4, "name": "c"}])
    assert table_version(f"{dataset}/customers") == version


@pytest.mark.parametrize(
    ("arguments", "argument", "why"),
    [
        ({"merge_key": None, "primary_key": "id"}, "merge_key", "versions of their merge key"),
        ({"sequence_by": "id"}, "sequence_by", "in the merge key"),
        ({"write_disposition": {**SCD2, "boundary_column": "seq"}}, "boundary_column", "with sequence_by"),
        (
            {"write_disposition": {**SCD2, "active_record_timestamp": "9999-12-31"}},
            "active_record_timestamp",
            "null",
        ),
        ({"column_list": ["seq"]}, "column_list", "lacks the merge key column"),
        ({"except_column_list": ["id"]}, "except_column_list", "names merge key column"),
    ],
)
def test_combinations_that_make_no_sense_are_refused(spark, dataset, arguments, argument, why):
    with pytest.raises(ConfigError, match=why) as refused:
        load(spark, dataset, [{"id": 1, "seq": 1, "pos": 1}], **arguments)
    assert refused.value.argument == argument


EVENTS = st.lists(
    st.fixed_dictionaries(
        {"id": st.integers(0, 1), "seq": st.integers(0, 20), "name": st.sampled_from(["a", "b", "c", None])}
    ),
    min_size=4,
    max_size=8,
).map(lambda events: list({(e["id"], e["seq"]): e for e in events}.values()))  # one event per key and seq


@pytest.mark.property
@settings(max_examples=examples(5), deadline=None, suppress_health_check=list(HealthCheck))
@given(events=EVENTS, batches=st.integers(2, 3), seed=st.integers(0, 2**16))
def test_the_history_depends_only_on_the_events_not_on_arrival_or_batching(
    spark, tmp_path_factory, events, batches, seed
):
    dataset = str(tmp_path_factory.mktemp("scd2feed"))
    repeated = events[: seed % 3]  # some events delivered twice
    shuffled = random.Random(seed).sample(events + repeated, k=len(events) + len(repeated))
    cuts = sorted(
        random.Random(seed + 1).sample(range(1, len(shuffled)), k=min(batches - 1, len(shuffled) - 1))
    )
    for start, end in zip([0, *cuts], [*cuts, len(shuffled)], strict=True):
        load(spark, dataset, shuffled[start:end], columns={"name": {"data_type": "text"}})
    assert history(dataset) == model(events)


def test_a_delete_event_closes_the_version_it_falls_into_and_opens_none(spark):
    """Deletes are not taken from the arguments yet: staging flags them (HARD_DELETE_FLAG), and the
    source closes the version a delete falls into at its sequence; a version closed before the next
    one opens (the table's gap) ends at a delete that a late event cannot pass."""
    from airflow_provider_deltamerge.plan.merge import HARD_DELETE_FLAG
    from airflow_provider_deltamerge.plan.scd2_feed import FeedScope
    from airflow_provider_deltamerge.spark.scd2_feed import versions_and_closes, versions_split

    columns = "id long, name string, _dlt_valid_from long, _dlt_valid_to long"
    target = spark.createDataFrame(
        [(1, "a", 10, 20), (1, "b", 20, None), (2, "x", 10, 15)],  # 2 was deleted at 15
        columns,
    )
    rows = spark.createDataFrame(
        [
            (1, None, 15, None, True),  # a late delete inside [10, 20): splits it, opens nothing
            (1, "c", 25, None, False),  # closes b
            (1, None, 30, None, True),  # closes c
            (2, "y", 12, None, False),  # inside [10, 15): until the delete at 15
            (2, "z", 17, None, False),  # after the delete: the current version
        ],
        f"{columns}, {HARD_DELETE_FLAG} boolean",
    )
    source = versions_and_closes(rows, target, FeedScope(("id",), "_dlt_valid_from", "_dlt_valid_to"))
    shaped = {
        (r["__action"], r["id"], r["name"], r["_dlt_valid_from"], r["_dlt_valid_to"], r["__retire_at"])
        for r in source.collect()
    }
    assert shaped == {
        ("retire", 1, None, 10, None, 15),
        ("retire", 1, None, 20, None, 25),
        ("insert", 1, "c", 25, 30, None),
        ("retire", 2, None, 10, None, 12),
        ("insert", 2, "y", 12, 15, None),
        ("insert", 2, "z", 17, None, None),
    }
    assert versions_split(source) == 2


def test_a_late_event_load_failing_after_its_commit_is_finished_by_its_retry_not_applied_again(
    spark, dataset, monkeypatch
):
    from airflow_provider_deltamerge import load as load_module

    def run(try_number):
        return {
            "dag_id": "feed",
            "task_id": "load",
            "run_id": "r1",
            "try_number": try_number,
            "run_type": "manual",
        }

    load(spark, dataset, [{"id": 1, "seq": 10, "name": "a"}, {"id": 1, "seq": 30, "name": "c"}])
    version = table_version(f"{dataset}/customers")

    def fail_after_commit(step):
        if step == "after_commit":
            raise RuntimeError("the worker died")

    monkeypatch.setattr(load_module, "checkpoint", fail_after_commit)
    late = [{"id": 1, "seq": 20, "name": "b"}]
    with pytest.raises(RuntimeError, match="the worker died"):
        load(spark, dataset, late, run_context=run(1))
    monkeypatch.setattr(load_module, "checkpoint", lambda step: None)
    retried = load(spark, dataset, late, run_context=run(2))
    assert table_version(f"{dataset}/customers") == version + 1 == retried.table_version
    assert history(dataset) == [(1, "a", 10, 20), (1, "b", 20, 30), (1, "c", 30, None)]


def test_timestamp_sequences_bound_versions_as_timestamps_and_an_empty_batch_changes_nothing(spark, dataset):
    from datetime import datetime, timezone

    day = [datetime(2024, 1, d, tzinfo=timezone.utc) for d in range(1, 4)]
    load(spark, dataset, [{"id": 1, "seq": day[0], "name": "a"}, {"id": 1, "seq": day[2], "name": "c"}])
    load(spark, dataset, [{"id": 1, "seq": day[1], "name": "b"}])
    version = table_version(f"{dataset}/customers")
    empty = load(spark, dataset, [])
    assert table_version(f"{dataset}/customers") == version and empty.load_id is None
    assert history(dataset) == [(1, "a", day[0], day[1]), (1, "b", day[1], day[2]), (1, "c", day[2], None)]
