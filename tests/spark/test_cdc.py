"""Change events applied by an upsert with sequence_by, through run_load, read back with delta-rs.

The reference model applies the events one by one in sequence order, in plain Python; the table must
equal it whatever the batching and arrival order of the events (docs/CDC.md).
"""

from __future__ import annotations

import pickle
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import (
    ConfigError,
    MissingKeyColumnError,
    NullKeyError,
    SequenceError,
    run_load,
)
from tests.budget import examples
from tests.helpers import read_rows, table_version

UPSERT = {"disposition": "merge", "strategy": "upsert"}


def load(spark, dataset, events, **arguments):
    arguments.setdefault("table_name", "accounts")
    arguments.setdefault("pipeline_name", "cdc")
    arguments.setdefault("primary_key", "id")
    arguments.setdefault("sequence_by", "seq")
    arguments.setdefault("write_disposition", UPSERT)
    return run_load(events, spark=spark, dataset=dataset, **arguments)


def model(events) -> dict:
    """The table as in-order arrival builds it: each key's newest event."""
    table = {}
    for event in sorted(events, key=lambda e: e["seq"]):
        table[event["id"]] = event
    return table


def rows(dataset, table="accounts") -> dict:
    return {
        r["id"]: r for r in read_rows(f"{dataset}/{table}", drop=("_dlt_load_id", "_dlt_id", "_dlt_sequence"))
    }


def test_newest_event_per_key_wins_within_a_batch_and_against_the_table(spark, dataset):
    first = load(
        spark,
        dataset,
        [
            {"id": 1, "seq": 2, "name": "ann2"},
            {"id": 1, "seq": 1, "name": "ann1"},
            {"id": 2, "seq": 5, "name": "bob5"},
            {"id": 2, "seq": 5, "name": "bob5"},  # the same event delivered twice
        ],
    )
    assert rows(dataset) == {1: {"id": 1, "seq": 2, "name": "ann2"}, 2: {"id": 2, "seq": 5, "name": "bob5"}}
    assert first.metrics["numEventsApplied"] == 2
    assert first.metrics["numEventsSkippedStale"] == 2
    second = load(
        spark,
        dataset,
        [
            {"id": 1, "seq": 1, "name": "late"},  # older than the row: skipped
            {"id": 2, "seq": 6, "name": "bob6"},  # newer: applied
            {"id": 3, "seq": 0, "name": "cid"},  # a new key: inserted
        ],
    )
    assert rows(dataset) == {
        1: {"id": 1, "seq": 2, "name": "ann2"},
        2: {"id": 2, "seq": 6, "name": "bob6"},
        3: {"id": 3, "seq": 0, "name": "cid"},
    }
    assert second.metrics["numEventsApplied"] == 2
    assert second.metrics["numEventsSkippedStale"] == 1
    stored = read_rows(f"{dataset}/accounts", drop=("_dlt_load_id", "_dlt_id"))
    assert {r["id"]: r["_dlt_sequence"] for r in stored} == {1: 2, 2: 6, 3: 0}


def test_a_sequence_of_several_columns_compares_them_in_order(spark, dataset):
    arguments = {"sequence_by": ["day", "pos"]}
    load(spark, dataset, [{"id": 1, "day": 2, "pos": 1, "v": "a"}], **arguments)
    load(
        spark,
        dataset,
        [{"id": 1, "day": 1, "pos": 9, "v": "older day"}, {"id": 2, "day": 1, "pos": 1, "v": "b"}],
        **arguments,
    )
    load(spark, dataset, [{"id": 1, "day": 2, "pos": 2, "v": "same day, later"}], **arguments)
    assert {k: r["v"] for k, r in rows(dataset).items()} == {1: "same day, later", 2: "b"}
    stored = read_rows(f"{dataset}/accounts", drop=("_dlt_load_id", "_dlt_id"))
    assert {r["id"]: (r["_dlt_sequence"], r["_dlt_sequence_2"]) for r in stored} == {1: (2, 2), 2: (1, 1)}


def test_null_sequences_and_ties_are_refused_before_anything_is_committed(spark, dataset):
    load(spark, dataset, [{"id": 1, "seq": 1, "name": "a"}])
    version = table_version(f"{dataset}/accounts")
    with pytest.raises(NullKeyError, match="sequence_by column 'seq' is null in 1 row"):
        load(spark, dataset, [{"id": 1, "seq": None, "name": "b"}, {"id": 2, "seq": 3, "name": "c"}])
    with pytest.raises(
        SequenceError, match=r"1 key\(s\) with different events at one sequence, e.g. \(1, 4\)"
    ) as tie:
        load(spark, dataset, [{"id": 1, "seq": 4, "name": "b"}, {"id": 1, "seq": 4, "name": "c"}])
    assert pickle.loads(pickle.dumps(tie.value)).examples == [(1, 4)]
    assert table_version(f"{dataset}/accounts") == version
    assert rows(dataset) == {1: {"id": 1, "seq": 1, "name": "a"}}


@pytest.fixture(params=["driver", "spark"])
def ranking(request, monkeypatch):
    """Where each key's newest event is chosen: by pyarrow in the rows staging collected (small batches
    with flat columns), or by a Spark window where staging materialises the batch in Spark."""
    if request.param == "spark":
        from airflow_provider_deltamerge.load import staged_arrow

        monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", -1)
    return request.param


def test_both_rankings_keep_one_of_identical_events_and_refuse_a_tie_in_a_column_left_out(
    spark, dataset, ranking
):
    """Identical events (NaN and null alike) are one event; two events of a key at one sequence that
    differ only in a column the table does not take (`op`) still tie, and are refused, naming them."""
    nan = float("nan")
    events = [
        {"id": 1, "seq": 3, "op": "u", "name": "x", "score": nan},
        {"id": 1, "seq": 2, "op": "u", "name": "y", "score": 1.0},
        {"id": 1, "seq": 3, "op": "u", "name": "x", "score": nan},  # delivered twice
        {"id": 2, "seq": 5, "op": "c", "name": None, "score": 2.5},
        {"id": 2, "seq": 5, "op": "c", "name": None, "score": 2.5},
    ]
    info = load(spark, dataset, events, except_column_list=["op"])
    assert (info.metrics["rows_extracted"], info.metrics["rows_staged"]) == (5, 2)
    stored = rows(dataset)
    assert stored[1]["name"] == "x" and stored[1]["score"] != stored[1]["score"]  # NaN
    assert stored[2] == {"id": 2, "seq": 5, "name": None, "score": 2.5}
    version = table_version(f"{dataset}/accounts")
    tie = [{"id": 3, "seq": 1, "op": "c", "name": "z", "score": 0.0}]
    tie.append({**tie[0], "op": "u"})
    with pytest.raises(
        SequenceError, match=r"1 key\(s\) with different events at one sequence, e.g. \(3, 1\)"
    ):
        load(
            spark,
            dataset,
            [*tie, {"id": 1, "seq": 9, "op": "u", "name": "new", "score": 1.0}],
            except_column_list=["op"],
        )
    assert table_version(f"{dataset}/accounts") == version


def test_a_table_upserted_before_takes_events_from_its_first_load_with_sequence_by(spark, dataset):
    load(spark, dataset, [{"id": 1, "seq": 9, "name": "plain"}], sequence_by=None)
    with pytest.raises(MissingKeyColumnError, match="sequence_by column 'seq' is not in the data"):
        load(spark, dataset, [{"id": 1, "name": "no sequence"}])
    load(spark, dataset, [{"id": 1, "seq": 3, "name": "event"}])  # the row has no sequence: it applies
    load(spark, dataset, [{"id": 1, "seq": 2, "name": "older"}])
    assert rows(dataset) == {1: {"id": 1, "seq": 3, "name": "event"}}


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({"write_disposition": "append"}, "does not apply events by key"),
        ({"write_disposition": {"disposition": "merge", "strategy": "delete-insert"}}, "merge/delete-insert"),
        ({"sequence_by": "id"}, "in the primary key"),
        ({"columns": {"gone": {"hard_delete": True}}}, "a deleted key would not be remembered"),
        ({"sequence_by": 7}, "not a column name"),
        ({"sequence_by": None, "column_list": ["id"]}, "column_list: selects the columns of change events"),
        ({"column_list": ["seq"]}, "column_list: lacks the primary key column"),
        ({"except_column_list": ["id"]}, "except_column_list: names primary key column"),
        ({"column_list": ["id"], "except_column_list": ["seq"]}, "except_column_list: give column_list or"),
    ],
)
def test_combinations_that_make_no_sense_are_refused(spark, dataset, arguments, why):
    with pytest.raises(ConfigError, match=why) as refused:
        load(spark, dataset, [{"id": 1, "seq": 1}], **arguments)
    named = why.split(":")[0] if ":" in why else "sequence_by"
    assert refused.value.argument == named


def test_events_holding_lists_are_refused_unless_lists_stay_json(spark, dataset):
    events = [{"id": 1, "seq": 1, "tags": [{"t": "a"}]}]
    with pytest.raises(ConfigError, match="children of an event skipped as stale") as refused:
        load(spark, dataset, events)
    assert refused.value.argument == "sequence_by"
    load(spark, dataset, events, max_table_nesting=0)
    assert set(rows(dataset)[1]) == {"id", "seq", "tags"}


def test_column_lists_choose_the_event_columns_that_become_table_columns(spark, dataset):
    events = [{"id": 1, "seq": 5, "op": "u", "name": "ann", "city": "oslo"}]
    load(spark, dataset, events, except_column_list=["op", "seq"])
    assert rows(dataset) == {1: {"id": 1, "name": "ann", "city": "oslo"}}
    late = [{"id": 1, "seq": 4, "op": "u", "name": "old", "city": "rome"}]
    assert load(spark, dataset, late, except_column_list=["op", "seq"]).metrics["numEventsSkippedStale"] == 1
    newer = [{"id": 1, "seq": 6, "op": "u", "name": "anna", "city": "bergen"}]
    load(spark, dataset, newer, column_list=["id", "name"])
    assert rows(dataset) == {1: {"id": 1, "name": "anna", "city": None}}
    with pytest.raises(MissingKeyColumnError, match="column_list column 'name' is not in the data"):
        load(spark, dataset, [{"id": 2, "seq": 1}], column_list=["id", "name"])


EVENTS = st.lists(
    st.fixed_dictionaries(
        {"id": st.integers(0, 3), "seq": st.integers(0, 30), "name": st.sampled_from(["a", "b", "c", None])}
    ),
    min_size=1,
    max_size=12,
).map(lambda events: list({(e["id"], e["seq"]): e for e in events}.values()))  # one event per key and seq


@pytest.mark.property
@settings(max_examples=examples(8), deadline=None, suppress_health_check=list(HealthCheck))
@given(events=EVENTS, batches=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_the_table_depends_only_on_the_events_not_on_arrival_or_batching(
    spark, tmp_path_factory, ranking, events, batches, seed
):
    dataset = str(tmp_path_factory.mktemp("cdc"))
    shuffled = random.Random(seed).sample(
        events + events[: seed % 3], k=len(events) + min(seed % 3, len(events))
    )
    cuts = sorted(
        random.Random(seed + 1).sample(range(1, len(shuffled)), k=min(batches - 1, len(shuffled) - 1))
    )
    for start, end in zip([0, *cuts], [*cuts, len(shuffled)], strict=True):
        load(spark, dataset, shuffled[start:end], columns={"name": {"data_type": "text"}})
    assert rows(dataset) == model(events)
