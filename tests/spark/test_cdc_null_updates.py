"""Partial updates (`ignore_null_updates`), through run_load, read back with delta-rs.

The reference model applies the events one by one in sequence order, in plain Python: each column keeps
the newest value an event carried for it (a null carries none) since its key's last delete or the last
truncate; the table must equal it whatever the batching and arrival order of the events (docs/CDC.md).
"""

from __future__ import annotations

import random

import pytest
from deltalake.exceptions import TableNotFoundError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError, MissingKeyColumnError
from airflow_provider_deltamerge.load import staged_arrow
from tests.arrivals import delivered
from tests.budget import examples
from tests.helpers import read_rows
from tests.spark.test_cdc import load as load_events

TEXT = {"id": {"data_type": "bigint"}, "a": {"data_type": "text"}, "b": {"data_type": "text"}}
DELETES = "op = 'D'"
TRUNCATES = "op = 'T'"


def load(spark, dataset, events, **arguments):
    if not any(a.startswith("ignore_null_updates") for a in arguments):
        arguments["ignore_null_updates"] = True
    arguments.setdefault("columns", TEXT)
    return load_events(spark, dataset, events, **arguments)


def event(key, seq, a=None, b=None):
    return {"id": key, "seq": seq, "a": a, "b": b}


def rows(dataset, table="accounts") -> dict:
    try:
        found = read_rows(f"{dataset}/{table}", drop=())
    except TableNotFoundError:  # only deletes were loaded, into no table
        return {}
    return {r["id"]: {k: v for k, v in r.items() if not k.startswith("_dlt_")} for r in found}


def filled(carried, stored):
    """A chosen column's value after an event carrying `carried`: the stored one where it carries null;
    a struct (a dict) field by field, as AUTO CDC keeps nested fields: each null field keeps the stored
    field, a nested struct likewise."""
    if carried is None:
        return stored
    if not isinstance(carried, dict) or stored is None:
        return carried
    return {field: filled(value, stored.get(field)) for field, value in carried.items()}


def model(events, columns=("a", "b")) -> dict:
    """In-order arrival: the newest event sets the row; a null in a chosen column keeps the value (a
    struct's null field the field's, `filled`); a delete removes the row (op 'D'), a truncate every row
    (op 'T'); the op is not stored."""
    table: dict = {}
    for e in sorted(events, key=lambda e: e["seq"]):
        if e.get("op") == "T":
            table.clear()
            continue
        if e.get("op") == "D":
            table.pop(e["id"], None)
            continue
        row = {k: v for k, v in e.items() if k != "op"}
        for column in columns:
            if e["id"] in table:
                row[column] = filled(row[column], table[e["id"]][column])
        table[e["id"]] = row
    return table


FULL, PARTIAL = event(1, 1, "x", "y"), event(1, 2, None, "z")


@pytest.mark.parametrize(
    "batches", [[[FULL], [PARTIAL]], [[PARTIAL], [FULL]], [[FULL, PARTIAL]], [[PARTIAL, FULL]]]
)
def test_a_partial_update_keeps_the_stored_value_in_any_order_and_batching(spark, dataset, batches):
    for batch in batches:
        load(spark, dataset, batch)
    assert rows(dataset) == {1: event(1, 2, "x", "z")}


def test_each_column_keeps_the_newest_value_carried_and_a_late_event_fills_only_older_columns(spark, dataset):
    load(spark, dataset, [event(1, 5, None, "b5"), event(2, 1, "a1", None)])
    assert rows(dataset) == {1: event(1, 5, None, "b5"), 2: event(2, 1, "a1", None)}
    late = load(spark, dataset, [event(1, 3, "a3", "b3"), event(1, 4, "a4", None), event(2, 2, None, None)])
    # key 1: a from the newest event carrying it (4); b stays b5 (5 is newer than 3); the row's seq stays 5
    assert rows(dataset) == {1: event(1, 5, "a4", "b5"), 2: event(2, 2, "a1", None)}
    assert late.metrics["numEventsApplied"] == 2  # one updated row per key
    stored = {r["id"]: r for r in read_rows(f"{dataset}/accounts")}
    assert (stored[1]["_dlt_sequence"], stored[1]["_dlt_sequence_of_a"], stored[1]["_dlt_sequence_of_b"]) == (
        5,
        4,
        5,
    )
    stale = load(spark, dataset, [event(1, 2, "old", "old")])  # older than every value of key 1
    assert rows(dataset)[1] == event(1, 5, "a4", "b5")
    assert (stale.metrics["numEventsApplied"], stale.metrics["numEventsSkippedStale"]) == (0, 1)


def test_the_column_list_and_the_except_list_choose_the_columns_whose_nulls_keep_values(spark, dataset):
    load(spark, dataset, [FULL], ignore_null_updates_column_list=["a"], table_name="listed")
    load(spark, dataset, [event(1, 2)], ignore_null_updates_column_list=["a"], table_name="listed")
    assert rows(dataset, "listed") == {1: event(1, 2, "x", None)}  # b is not listed: its null is a value
    load(spark, dataset, [FULL], ignore_null_updates_except_column_list=["b"], table_name="excepted")
    load(spark, dataset, [event(1, 2)], ignore_null_updates_except_column_list=["b"], table_name="excepted")
    assert rows(dataset, "excepted") == {1: event(1, 2, "x", None)}


def test_rows_loaded_before_keep_their_values_as_of_their_rows_sequence(spark, dataset):
    load_events(spark, dataset, [FULL, event(2, 1, None, "y")], columns=TEXT)  # without ignore_null_updates
    load(spark, dataset, [event(1, 3, None, "z"), event(1, 0, "old", None), event(2, 0, "a0", None)])
    # key 1: a keeps x (loaded at seq 1, newer than 0); key 2: its a was null, the late a0 fills it
    assert rows(dataset) == {1: event(1, 3, "x", "z"), 2: event(2, 1, "a0", "y")}


def test_the_event_columns_left_out_of_the_table_are_not_kept(spark, dataset):
    events = [{**FULL, "op": "c"}, {**PARTIAL, "op": "u"}]
    load(spark, dataset, events, except_column_list=["op"])
    assert rows(dataset) == {1: event(1, 2, "x", "z")}


@pytest.mark.parametrize(
    ("arguments", "argument", "says"),
    [
        ({"sequence_by": None}, "ignore_null_updates", "give sequence_by"),
        ({"write_disposition": "append", "sequence_by": None}, "ignore_null_updates", "sequence_by"),
        (
            {"ignore_null_updates_column_list": ["a"], "ignore_null_updates_except_column_list": ["b"]},
            "ignore_null_updates_except_column_list",
            "not both",
        ),
        ({"ignore_null_updates_column_list": ["id", "a"]}, "ignore_null_updates_column_list", "primary key"),
        ({"ignore_null_updates_except_column_list": ["id"]}, "ignore_null_updates_except_column_list", "key"),
        ({"ignore_null_updates_column_list": ["seq"]}, "ignore_null_updates_column_list", "sequence_by"),
        (
            {"ignore_null_updates_column_list": ["a"], "except_column_list": ["a"]},
            "ignore_null_updates_column_list",
            "leave out",
        ),
        ({"ignore_null_updates": "yes"}, "ignore_null_updates", "true or false"),
    ],
)
def test_nonsense_is_refused_before_anything_is_read(spark, dataset, arguments, argument, says):
    with pytest.raises(ConfigError) as refused:
        load(spark, dataset, [{**FULL, "op": "u"}], **{"ignore_null_updates": True, **arguments})
    assert refused.value.argument == argument
    assert says in str(refused.value)


def test_a_listed_column_the_events_lack_is_refused(spark, dataset):
    with pytest.raises(MissingKeyColumnError):
        load(spark, dataset, [FULL], ignore_null_updates_column_list=["c"])


def deleting(spark, dataset, events, **arguments):
    """A load of events with deletes (op 'D'), the op left out of the table."""
    events = [{"op": "U", **e} for e in events]
    return load(spark, dataset, events, apply_as_deletes=DELETES, except_column_list=["op"], **arguments)


def changing(spark, dataset, events, **arguments):
    """A load of events with deletes (op 'D') and truncates (op 'T')."""
    return deleting(spark, dataset, events, apply_as_truncates=TRUNCATES, **arguments)


WIDTH = 3  # positions per log entry, in events of a sequence of two columns


def split(events) -> list[dict]:
    """The events ordered by a sequence of two columns, (lsn, pos): `seq`'s quotient and remainder by
    WIDTH, so in the same order, with ties on lsn that pos decides."""
    return [
        {**{k: v for k, v in e.items() if k != "seq"}, "lsn": e["seq"] // WIDTH, "pos": e["seq"] % WIDTH}
        for e in events
    ]


def changing_in_two(spark, dataset, events):
    """`changing`, the events sequenced by two columns (`split`)."""
    return changing(spark, dataset, split(events), sequence_by=["lsn", "pos"])


def joined(table: dict) -> dict:
    """The rows of a table of `split` events, with `seq` again in place of (lsn, pos)."""
    return {
        key: {
            **{k: v for k, v in row.items() if k not in ("lsn", "pos")},
            "seq": row["lsn"] * WIDTH + row["pos"],
        }
        for key, row in table.items()
    }


def delete(key, seq):
    return {**event(key, seq), "op": "D"}


def truncate(seq):
    return {**event(None, seq), "op": "T"}


AFTER_DELETE = [FULL, delete(1, 2), event(1, 3, None, "z")]


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0), (2, 0, 1)])
@pytest.mark.parametrize("batching", ["one", "each"])
def test_a_delete_resets_the_row_whatever_the_order_and_batching(spark, dataset, order, batching):
    events = [AFTER_DELETE[i] for i in order]
    for batch in [events] if batching == "one" else [[e] for e in events]:
        deleting(spark, dataset, batch)
    assert rows(dataset) == {1: event(1, 3, None, "z")}  # x and y are older than the delete


@pytest.mark.parametrize("staged_in", ["arrow", "spark"])
def test_a_late_event_older_than_a_remembered_delete_brings_none_of_its_values_back(
    spark, dataset, monkeypatch, staged_in
):
    if staged_in == "spark":  # staged in Spark, not collected to the driver: the tombstones applied there
        monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", 0)
    deleting(spark, dataset, [event(1, 1, "x", "y"), delete(1, 3), event(1, 4, None, "z")])
    later = deleting(spark, dataset, [event(1, 2, "w", "w"), event(1, 5, None, None)])
    # the event at 2 is older than the delete at 3: its values are none, though the row's newest is newer
    assert rows(dataset) == {1: event(1, 5, None, "z")}
    assert later.metrics["numEventsApplied"] == 1
    deleting(spark, dataset, [event(1, 0, "old", "old")])  # older than the delete: skipped
    assert rows(dataset) == {1: event(1, 5, None, "z")}


@pytest.mark.parametrize("staged_in", ["arrow", "spark"])
def test_a_delete_newest_in_its_batch_deletes_the_row_and_one_older_than_the_row_only_resets(
    spark, dataset, monkeypatch, staged_in
):
    if staged_in == "spark":
        monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", 0)
    deleting(spark, dataset, [event(1, 1, "x", "y"), event(2, 1, "x", "y"), event(2, 4, None, "z")])
    result = deleting(spark, dataset, [delete(1, 2), delete(2, 3)])
    assert rows(dataset) == {2: event(2, 4, None, "z")}  # key 1 deleted; key 2's x was older than 3
    assert result.metrics["numEventsDeleted"] == 1


def test_a_delete_condition_on_a_column_whose_nulls_keep_values_still_marks_the_delete(spark, dataset):
    load(spark, dataset, [{**FULL, "op": "U"}], apply_as_deletes=DELETES)  # op is stored, and chosen
    load(spark, dataset, [{**event(1, 3, None, "z"), "op": None}, delete(1, 2)], apply_as_deletes=DELETES)
    assert rows(dataset) == {1: {**event(1, 3, None, "z"), "op": None}}  # op 'D' is older than the delete too
    load(spark, dataset, [delete(1, 4)], apply_as_deletes=DELETES)
    assert rows(dataset) == {}


BEFORE_TRUNCATE = [event(1, 1, "x", "y"), event(2, 2, "p", "q"), truncate(3), event(1, 4, None, "z")]


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 2, 1, 0), (2, 0, 3, 1), (3, 0, 1, 2)])
@pytest.mark.parametrize("batching", ["one", "each"])
def test_a_truncate_resets_every_row_whatever_the_order_and_batching(spark, dataset, order, batching):
    events = [BEFORE_TRUNCATE[i] for i in order]
    for batch in [events] if batching == "one" else [[e] for e in events]:
        changing(spark, dataset, batch)
    assert rows(dataset) == {1: event(1, 4, None, "z")}  # x, y and key 2 are older than the truncate


@pytest.mark.parametrize("staged_in", ["arrow", "spark"])
def test_a_late_truncate_empties_the_values_older_than_it_in_the_rows_that_outlive_it(
    spark, dataset, monkeypatch, staged_in
):
    if staged_in == "spark":
        monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", 0)
    changing(spark, dataset, [event(1, 1, "x", "y"), event(1, 4, None, "z"), event(2, 5, "p", None)])
    late = changing(spark, dataset, [truncate(3), event(3, 2, "older", "older")])
    # key 1 outlives the truncate (4 is newer), but its x was loaded at 1: in-order arrival never kept it
    assert rows(dataset) == {1: event(1, 4, None, "z"), 2: event(2, 5, "p", None)}
    stored = {r["id"]: r for r in read_rows(f"{dataset}/accounts")}
    assert (stored[1]["_dlt_sequence_of_a"], stored[1]["_dlt_sequence_of_b"]) == (None, 4)
    assert (late.metrics["numEventsTruncated"], late.metrics["numTargetRowsTruncated"]) == (1, 0)
    changing(spark, dataset, [event(1, 6, None, None), event(1, 0, "oldest", "oldest")])
    assert rows(dataset)[1] == event(1, 6, None, "z")  # b from 4 stays; the event at 0 brings nothing


@pytest.mark.parametrize("staged_in", ["arrow", "spark"])
def test_a_sequence_of_two_columns_orders_values_deletes_and_truncates_column_by_column(
    spark, dataset, monkeypatch, staged_in
):
    if staged_in == "spark":
        monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", 0)
    # seq 3, 4, 5 share lsn 1 (pos 0, 1, 2); 6, 7, 8 share lsn 2
    first = [event(1, 4, "x", "y"), event(1, 5, None, "z"), event(2, 4, "p", "q"), event(3, 4, "r", "s")]
    changing_in_two(spark, dataset, first)
    stored = {r["id"]: r for r in read_rows(f"{dataset}/accounts")}
    parts = [stored[1][f"_dlt_sequence{n}_of_{c}"] for c in "ab" for n in ("", "_2")]
    assert parts == [1, 1, 1, 2]  # a from (1, 1), b from (1, 2)
    assert (stored[1]["_dlt_sequence"], stored[1]["_dlt_sequence_2"]) == (1, 2)

    late = [event(1, 3, "old", "old"), event(2, 5, None, "q2"), delete(3, 5), event(3, 3, "t", "u")]
    changing_in_two(spark, dataset, late)  # (1, 0) is older than (1, 1) though its lsn ties
    assert joined(rows(dataset)) == model([*first, *late])
    assert joined(rows(dataset))[1] == event(1, 5, "x", "z")

    after = [truncate(6), event(1, 7, None, None), event(3, 8, "v", None)]
    changing_in_two(spark, dataset, after)  # key 1 outlives the truncate at (2, 0); its x and z do not
    assert (
        joined(rows(dataset))
        == model([*first, *late, *after])
        == {
            1: event(1, 7, None, None),
            3: event(3, 8, "v", None),
        }
    )
    stored = {r["id"]: r for r in read_rows(f"{dataset}/accounts")}
    assert (stored[1]["_dlt_sequence_of_a"], stored[1]["_dlt_sequence_2_of_a"]) == (None, None)


VALUES = st.sampled_from([None, None, "p", "q"])
OPS = st.sampled_from(["U", "U", "U", "U", "D", "T"])


def numbered(drawn) -> list[dict]:
    """Events of distinct sequences (their position), in the order drawn; a truncate has no key."""
    return [
        {**event(None if op == "T" else key, seq, a, b), "op": op}
        for seq, (key, a, b, op) in enumerate(drawn)
    ]


EVENTS = st.lists(st.tuples(st.integers(1, 3), VALUES, VALUES, OPS), min_size=1, max_size=10).map(numbered)


@pytest.mark.property
@settings(max_examples=examples(5), deadline=None, suppress_health_check=list(HealthCheck))
@given(events=EVENTS, batches=st.integers(1, 3), seed=st.integers(0, 2**16), parts=st.sampled_from([1, 2]))
@example(events=[{**e, "op": "U"} for e in (FULL, PARTIAL)], batches=2, seed=1, parts=1)
@example(events=[{"op": "U", **e} for e in AFTER_DELETE], batches=3, seed=3, parts=1)
@example(events=[{"op": "U", **e} for e in BEFORE_TRUNCATE], batches=4, seed=5, parts=1)
@example(events=[{"op": "U", **e} for e in BEFORE_TRUNCATE], batches=2, seed=7, parts=2)
def test_the_table_equals_in_order_application_whatever_the_batching_and_order(
    spark, tmp_path_factory, events, batches, seed, parts
):
    """`parts`: the events sequenced by one column, or by two (`split`: ties on the first)."""
    dataset = str(tmp_path_factory.mktemp("nulls"))
    shuffled = list(events)
    random.Random(seed).shuffle(shuffled)
    inner = random.Random(seed + 1).sample(range(1, len(shuffled)), min(batches, len(shuffled)) - 1)
    cuts = sorted({*inner, len(shuffled)})
    arrivals = [
        shuffled[start:cut] for start, cut in zip([0, *cuts], cuts, strict=False) if shuffled[start:cut]
    ]
    apply = changing if parts == 1 else changing_in_two
    delivered(lambda batch: apply(spark, dataset, batch), arrivals, seed)
    assert (rows(dataset) if parts == 1 else joined(rows(dataset))) == model(events)
