"""Partial updates (`ignore_null_updates`) of struct columns in an upsert: field by field, as AUTO CDC keeps
nested fields (docs/CDC.md), on each writer.

A struct column comes from a Spark source (Python dicts are flattened into a column per field). The
reference model is test_cdc_null_updates.model, whose `filled` keeps a struct's null fields: the table
must equal in-order application whatever the batching and arrival order of the events.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError
from airflow_provider_deltamerge.load import staged_arrow
from tests.arrivals import arrival_batches, delivered
from tests.budget import examples
from tests.helpers import read_rows, table_version
from tests.spark.test_cdc import load as load_events
from tests.spark.test_cdc_null_updates import DELETES, TRUNCATES, filled, joined, model, split

ADDRESS = "struct<street: string, geo: struct<lat: string, lon: string>>"
SCHEMA = f"id long, seq long, op string, address {ADDRESS}, note string"
SPLIT = f"id long, lsn long, pos long, op string, address {ADDRESS}, note string"
COLUMNS = ("address", "note")


def event(key, seq, address=None, note=None, op="U"):
    return {"id": key, "seq": seq, "op": op, "address": address, "note": note}


def address(street=None, lat=None, lon=None, geo=True):
    return {"street": street, "geo": {"lat": lat, "lon": lon} if geo else None}


def load(spark, dataset, events, parts=1, **arguments):
    """The events as a Spark source with a struct column, deletes (op 'D') and truncates (op 'T')."""
    schema, events = (SCHEMA, events) if parts == 1 else (SPLIT, split(events))
    names = ["id", "seq", "op", *COLUMNS] if parts == 1 else ["id", "lsn", "pos", "op", *COLUMNS]
    frame = spark.createDataFrame([tuple(e[c] for c in names) for e in events], schema)
    arguments.setdefault("ignore_null_updates", True)
    arguments.setdefault("sequence_by", "seq" if parts == 1 else ["lsn", "pos"])
    return load_events(
        spark,
        dataset,
        frame,
        apply_as_deletes=DELETES,
        apply_as_truncates=TRUNCATES,
        except_column_list=["op"],
        columns=None,
        **arguments,
    )


def rows(dataset, parts=1) -> dict:
    found = read_rows(f"{dataset}/accounts", drop=())
    table = {r["id"]: {k: v for k, v in r.items() if not k.startswith("_dlt_")} for r in found}
    return table if parts == 1 else joined(table)


def expected(events) -> dict:
    return {k: {c: v for c, v in r.items() if c != "op"} for k, r in model(events, COLUMNS).items()}


def stored(dataset) -> dict:
    return {r["id"]: r for r in read_rows(f"{dataset}/accounts", drop=())}


FULL = event(1, 1, address("main st", "1.0", "2.0"), "n1")
PARTIAL = event(1, 2, address(None, "5.0", None))  # a new latitude, nothing else


@pytest.mark.parametrize("batches", [[[FULL], [PARTIAL]], [[PARTIAL], [FULL]], [[FULL, PARTIAL]]])
def test_a_null_field_keeps_the_stored_field_in_any_order_and_batching(spark, dataset, batches):
    for batch in batches:
        load(spark, dataset, batch)
    filled_in = address("main st", "5.0", "2.0")
    assert rows(dataset) == {1: {"id": 1, "seq": 2, "address": filled_in, "note": "n1"}}
    kept = stored(dataset)[1]
    assert kept["_dlt_sequence_of_address"] == 2  # the newest event that carried the struct
    assert kept["_dlt_field_sequences_of_address"] == {
        "street": 1,
        "geo": {"_dlt_sequence": 2, "lat": 2, "lon": 1},
    }


def test_a_null_struct_updates_nothing_and_a_late_event_fills_only_older_fields(spark, dataset):
    load(spark, dataset, [event(1, 5, address("new st", geo=False)), event(1, 6, None, "n6")])
    assert rows(dataset)[1]["address"] == {"street": "new st", "geo": None}  # no event carried geo
    late = load(spark, dataset, [event(1, 3, address("old st", "3.0", "4.0"))])
    assert rows(dataset)[1] == {"id": 1, "seq": 6, "address": address("new st", "3.0", "4.0"), "note": "n6"}
    assert late.metrics["numEventsApplied"] == 1  # only its geo was newer than the stored one
    stale = load(spark, dataset, [event(1, 2, address("older st", "0.0", "0.0"))])
    assert (rows(dataset)[1]["address"], stale.metrics["numEventsSkippedStale"]) == (
        address("new st", "3.0", "4.0"),
        1,
    )


@pytest.mark.parametrize("staged_in", ["arrow", "spark"])
def test_a_delete_and_a_truncate_reset_fields_older_than_them(spark, dataset, monkeypatch, staged_in):
    if staged_in == "spark":  # staged in Spark, not collected to the driver: the tombstones applied there
        monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", 0)
    first = [event(1, 1, address("a st", "1", "1")), event(1, 4, address(None, "4", None)), event(2, 6)]
    load(spark, dataset, first)
    late = [event(1, 3, op="D"), event(1, 2, address("b st", "2", "2"))]  # the street and lon are older
    load(spark, dataset, late)
    assert rows(dataset)[1]["address"] == address(None, "4", None)
    after = [{**event(None, 5), "op": "T"}, event(2, 0, address("c st"))]  # key 1 is older: truncated
    load(spark, dataset, after)
    events = [*first, *late, *after]
    assert rows(dataset) == expected(events) == {2: {"id": 2, "seq": 6, "address": None, "note": None}}
    again = [event(2, 7, address(None, "7", None)), event(1, 8, address(geo=False))]
    load(spark, dataset, again)
    assert rows(dataset) == expected([*events, *again])


@pytest.mark.parametrize("staged_in", ["arrow", "spark"])
def test_a_late_truncate_empties_the_fields_older_than_it_in_the_rows_that_outlive_it(
    spark, dataset, monkeypatch, staged_in
):
    if staged_in == "spark":
        monkeypatch.setattr(staged_arrow, "COLLECT_ESTIMATE_BYTES", 0)
    first = [event(1, 1, address("a st", "1", "1")), event(1, 4, address(None, "4", None))]
    load(spark, dataset, first)
    late = [{**event(None, 3), "op": "T"}]  # key 1 outlives it (4), its street and lon do not
    load(spark, dataset, late)
    assert rows(dataset) == expected([*first, *late])
    assert rows(dataset)[1]["address"] == address(None, "4", None)
    assert stored(dataset)[1]["_dlt_field_sequences_of_address"] == {
        "street": None,
        "geo": {"_dlt_sequence": 4, "lat": 4, "lon": None},
    }


def test_the_column_lists_choose_a_struct_column_whole(spark, dataset):
    load(spark, dataset, [FULL], ignore_null_updates_column_list=["note"])
    load(spark, dataset, [PARTIAL], ignore_null_updates_column_list=["note"])
    assert rows(dataset)[1] == {"id": 1, "seq": 2, "address": PARTIAL["address"], "note": "n1"}
    assert "_dlt_field_sequences_of_address" not in stored(dataset)[1]  # its nulls are values
    load(spark, dataset, [FULL], ignore_null_updates_except_column_list=["note"], table_name="kept")
    load(spark, dataset, [PARTIAL], ignore_null_updates_except_column_list=["note"], table_name="kept")
    kept = read_rows(f"{dataset}/kept")[0]
    assert (kept["address"], kept["note"]) == (address("main st", "5.0", "2.0"), None)


def test_a_table_loaded_before_keeps_its_structs_as_of_their_sequence(
    spark, dataset, writer_backend, request
):
    if writer_backend == "delta-rs":  # a merge adding a column stores the source's value, not the update's
        why = "delta-rs 1.6 fills a column a merge adds from the source, whatever the update assigns"
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=why))
    old = event(1, 10, address("main st", "1.0", "2.0"), "n1")
    load(spark, dataset, [old], ignore_null_updates=False)  # whole values, no field sequences
    late = event(1, 0, address("zero st", "0", "0"))
    load(spark, dataset, [event(1, 30, address(None, "5.0", None)), late])
    assert rows(dataset)[1]["address"] == address("main st", "5.0", "2.0")  # fields as of sequence 10
    assert stored(dataset)[1]["_dlt_field_sequences_of_address"]["street"] == 10
    load(spark, dataset, [event(1, 5, address("five st"))])  # older than the street loaded at 10
    assert rows(dataset)[1]["address"] == address("main st", "5.0", "2.0")


def test_a_struct_gaining_a_field_later_is_kept_as_a_variant_column_of_its_own(spark, dataset):
    load(spark, dataset, [FULL])
    wider = "id long, seq long, op string, address struct<street: string, zip: string>, note string"
    frame = spark.createDataFrame([(1, 3, "U", (None, "75001"), None)], wider)
    load_events(spark, dataset, frame, ignore_null_updates=True, except_column_list=["op"], columns=None)
    kept = stored(dataset)[1]
    assert kept["address"] == FULL["address"]  # the event carried no struct of this type: nothing to update
    assert kept["address__v_json"] == {"street": None, "zip": "75001"}
    assert kept["_dlt_field_sequences_of_address__v_json"] == {"street": None, "zip": 3}
    assert (kept["seq"], kept["note"]) == (3, "n1")


def test_a_nested_field_named_as_its_structs_own_sequence_is_refused_before_anything_is_written(
    spark, dataset
):
    clash = "id long, seq long, op string, address struct<geo: struct<_dlt_sequence: long>>, note string"
    first = spark.createDataFrame([(1, 1, "U", ((4,),), None)], clash)
    load_events(spark, dataset, first, table_name="clash", columns=None)  # without ignore_null_updates
    version = table_version(f"{dataset}/clash")
    frame = spark.createDataFrame([(1, 2, "U", ((5,),), None)], clash)
    with pytest.raises(ConfigError, match="'geo' holds a field '_dlt_sequence'") as refused:
        load_events(spark, dataset, frame, ignore_null_updates=True, table_name="clash", columns=None)
    assert refused.value.argument == "ignore_null_updates"
    assert table_version(f"{dataset}/clash") == version


def test_the_reference_model_fills_a_struct_field_by_field():
    assert filled({"a": None, "b": {"c": None, "d": 2}}, {"a": 1, "b": {"c": 3, "d": 4}}) == {
        "a": 1,
        "b": {"c": 3, "d": 2},
    }
    assert filled(None, {"a": 1}) == {"a": 1}
    assert filled({"a": None}, None) == {"a": None}


TEXT = st.sampled_from([None, None, "p", "q"])
GEO = st.one_of(st.none(), st.fixed_dictionaries({"lat": TEXT, "lon": TEXT}))
ADDRESSES = st.one_of(st.none(), st.fixed_dictionaries({"street": TEXT, "geo": GEO}))
OPS = st.sampled_from(["U", "U", "U", "U", "D", "T"])


def numbered(drawn) -> list[dict]:
    """Events of distinct sequences (their position), in the order drawn; a truncate has no key."""
    return [
        event(None if op == "T" else key, seq, value, note, op)
        for seq, (key, value, note, op) in enumerate(drawn)
    ]


EVENTS = st.lists(st.tuples(st.integers(1, 3), ADDRESSES, TEXT, OPS), min_size=1, max_size=8).map(numbered)
AFTER_DELETE = [FULL, event(1, 2, op="D"), event(1, 3, address(None, "3", None))]


@pytest.mark.property
@settings(max_examples=examples(4), deadline=None, suppress_health_check=list(HealthCheck))
@given(events=EVENTS, batches=st.integers(1, 3), seed=st.integers(0, 2**16), parts=st.sampled_from([1, 2]))
@example(events=[FULL, PARTIAL], batches=2, seed=1, parts=1)
@example(events=AFTER_DELETE, batches=3, seed=3, parts=2)
def test_the_table_equals_in_order_application_whatever_the_batching_and_order(
    spark, tmp_path_factory, events, batches, seed, parts
):
    """`parts`: the events sequenced by one column, or by two (`split`: ties on the first)."""
    dataset = str(tmp_path_factory.mktemp("structs"))
    arrivals = arrival_batches(events, batches, seed)  # some sent twice, shuffled, cut
    delivered(lambda batch: load(spark, dataset, batch, parts), arrivals, seed)
    found = rows(dataset, parts) if _loaded(dataset) else {}
    assert found == expected(events)


def _loaded(dataset) -> bool:
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(f"{dataset}/accounts")
