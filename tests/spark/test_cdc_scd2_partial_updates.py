"""scd2 of change events with AUTO CDC's remaining options: `ignore_null_updates` (and its lists), and a
`sequence_by` of several columns (AUTO CDC's `sequence_by=struct(...)`), with deletes, tracked columns,
late and repeated events, stopped and retried loads, on each writer.

The reference model applies the events one by one in sequence order, in plain Python: a sequence of
several columns compares as a tuple (the first that differs decides); an event closes its key's open
version at its sequence and, unless it is a delete, opens one whose chosen columns hold, where the event
carries null, the value of the version before it (none after a delete: a delete resets the row). The
whole history must equal it, read back after each load's arrival (docs/CDC.md).
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError, MissingKeyColumnError, SequenceError
from tests.arrivals import arrival_batches, delivered
from tests.budget import examples
from tests.helpers import table_version
from tests.spark.test_cdc_scd2 import load as load_events

pytestmark = pytest.mark.spark

DELETES = "op = 'D'"
TYPES = {
    "name": {"data_type": "text"},
    "city": {"data_type": "text"},
    "op": {"data_type": "text"},
    "seq": {"data_type": "bigint"},
    "pos": {"data_type": "bigint"},
}
TWO = ["seq", "pos"]


def load(spark, dataset, events, **arguments):
    arguments.setdefault("columns", TYPES)
    arguments.setdefault("except_column_list", ["op"])
    return load_events(spark, dataset, events, **arguments)


def event(key, seq, name=None, city=None, op="U", pos=0):
    return {"id": key, "seq": seq, "pos": pos, "name": name, "city": city, "op": op}


def at(e, sequence) -> tuple:
    return tuple(e[c] for c in sequence)


def bound(value):
    """A validity bound as read back: a struct's fields (a sequence of several columns) as a tuple."""
    return tuple(value.values()) if isinstance(value, dict) else (value,) if value is not None else None


def history(dataset, table="customers") -> list[tuple]:
    columns = ("id", "name", "city", "_dlt_valid_from", "_dlt_valid_to")
    rows = DeltaTable(f"{dataset}/{table}").to_pyarrow_table(columns=list(columns)).to_pylist()
    shaped = (
        (r["id"], r["name"], r["city"], bound(r["_dlt_valid_from"]), bound(r["_dlt_valid_to"])) for r in rows
    )
    return sorted(shaped, key=repr)


def versions(*rows) -> list[tuple]:
    return sorted(rows, key=repr)


def model(events, sequence=("seq",), filled=("name", "city"), tracked=None) -> list[tuple]:
    """In-order application: see the module's doc. `tracked`: only a change of these (after filling)
    opens a version; an event that changes none is absorbed into the version it falls into."""
    versions, current = [], {}
    for e in sorted(events, key=lambda e: (e["id"], at(e, sequence))):
        key, prev = e["id"], current.get(e["id"])
        if e["op"] == "D":
            if prev is not None:
                versions.append((*prev[:4], at(e, sequence)))
            current[key] = None
            continue
        stored = dict(zip(("name", "city"), prev[1:3], strict=True)) if prev is not None else {}
        values = tuple(
            stored[c] if c in filled and e[c] is None and stored else e[c] for c in ("name", "city")
        )
        if prev is not None and tracked is not None:
            same = all(values[i] == prev[1 + i] for i, c in enumerate(("name", "city")) if c in tracked)
            if same:  # absorbed: the version takes its values, keeping its start
                current[key] = (key, *values, prev[3])
                continue
        if prev is not None:
            versions.append((*prev[:4], at(e, sequence)))
        current[key] = (key, *values, at(e, sequence))
    versions += [(*v, None) for v in current.values() if v is not None]
    return sorted(versions, key=repr)


def test_a_partial_update_keeps_the_value_before_it_and_a_late_value_fills_the_versions_after_it(
    spark, dataset
):
    first = load(
        spark,
        dataset,
        [event(1, 10, "ann", "paris"), event(1, 30, None, "lyon"), event(1, 40, "anna", None)],
        ignore_null_updates=True,
    )
    assert history(dataset) == versions(
        (1, "ann", "lyon", (30,), (40,)),
        (1, "ann", "paris", (10,), (30,)),
        (1, "anna", "lyon", (40,), None),
    )
    assert (first.metrics["numEventsApplied"], first.metrics["numEventsSkippedStale"]) == (3, 0)
    assert "numEventsAbsorbed" not in first.metrics  # no tracked columns: every event is a version
    late = load(
        spark, dataset, [event(1, 20, "annie", None), event(1, 30, None, "lyon")], ignore_null_updates=True
    )
    assert history(dataset) == versions(  # 30 carried no name: it now holds the late 20's
        (1, "ann", "paris", (10,), (20,)),
        (1, "annie", "lyon", (30,), (40,)),
        (1, "annie", "paris", (20,), (30,)),
        (1, "anna", "lyon", (40,), None),
    )
    assert (late.metrics["numEventsApplied"], late.metrics["numEventsSkippedStale"]) == (1, 1)
    assert late.metrics["numVersionsSplit"] == 1
    stored = DeltaTable(f"{dataset}/customers").schema().to_arrow().names
    assert not [c for c in stored if c.startswith("_dlt_sequence")]  # the kept events carry authorship


def test_a_delete_resets_the_row_and_a_late_delete_stops_the_filling(spark, dataset):
    load(
        spark,
        dataset,
        [event(1, 1, "ann", "paris"), event(1, 5, None, "oslo"), event(2, 1, "bob", "rome")],
        ignore_null_updates_column_list=["name"],
        apply_as_deletes=DELETES,
    )
    late = load(
        spark,
        dataset,
        [event(1, 3, op="D"), event(1, 4, None, None), event(2, 2, None, None)],
        ignore_null_updates_column_list=["name"],
        apply_as_deletes=DELETES,
    )
    assert history(dataset) == versions(  # city is not chosen: its null is a value
        (1, None, None, (4,), (5,)),
        (1, None, "oslo", (5,), None),
        (1, "ann", "paris", (1,), (3,)),
        (2, "bob", None, (2,), None),
        (2, "bob", "rome", (1,), (2,)),
    )
    assert (late.metrics["numEventsDeleted"], late.metrics["numVersionsClosedByDeletes"]) == (1, 1)


def test_tracked_columns_compare_the_filled_values(spark, dataset):
    load(
        spark,
        dataset,
        [event(1, 1, "ann", "paris"), event(1, 2, "ann", None), event(1, 3, None, "oslo")],
        ignore_null_updates=True,
        track_history_column_list=["city"],
    )
    assert history(dataset) == versions((1, "ann", "oslo", (3,), None), (1, "ann", "paris", (1,), (3,)))


def test_several_sequence_columns_bound_the_versions_as_one_struct_compared_in_order(spark, dataset):
    load(spark, dataset, [event(1, 1, "a", pos=5), event(1, 2, "c", pos=0)], sequence_by=TWO)
    late = load(spark, dataset, [event(1, 1, "b", pos=7), event(1, 1, "a", pos=5)], sequence_by=TWO)
    assert history(dataset) == versions(
        (1, "a", None, (1, 5), (1, 7)),
        (1, "b", None, (1, 7), (2, 0)),
        (1, "c", None, (2, 0), None),
    )
    assert (late.metrics["numEventsApplied"], late.metrics["numVersionsSplit"]) == (1, 1)
    read = DeltaTable(f"{dataset}/customers").to_pyarrow_table(columns=["_dlt_valid_from"])
    fields = read.schema.field("_dlt_valid_from").type
    assert [fields.field(i).name for i in range(fields.num_fields)] == TWO  # AUTO CDC's struct(seq, pos)
    version = table_version(f"{dataset}/customers")
    with pytest.raises(SequenceError, match=r"e.g. \(1, \(3, 1\)\)"):
        load(spark, dataset, [event(1, 3, "x", pos=1), event(1, 3, "y", pos=1)], sequence_by=TWO)
    with pytest.raises(ConfigError, match="holds? '_dlt_valid_from' as struct") as refused:
        load(spark, dataset, [event(1, 9, "z")], sequence_by="seq")
    assert refused.value.argument == "sequence_by"
    assert table_version(f"{dataset}/customers") == version


def test_several_sequence_columns_with_deletes_and_partial_updates(spark, dataset):
    arguments = {"sequence_by": TWO, "apply_as_deletes": DELETES, "ignore_null_updates": True}
    load(spark, dataset, [event(1, 1, "a", "x", pos=0), event(1, 1, op="D", pos=9)], **arguments)
    load(spark, dataset, [event(1, 1, None, "y", pos=3), event(1, 2, "b", None, pos=0)], **arguments)
    assert history(dataset) == versions(
        (1, "a", "x", (1, 0), (1, 3)),
        (1, "a", "y", (1, 3), (1, 9)),
        (1, "b", None, (2, 0), None),  # after the delete: nothing to keep
    )


@pytest.mark.parametrize(
    ("arguments", "argument", "why"),
    [
        ({"ignore_null_updates_column_list": ["id"]}, "ignore_null_updates_column_list", "merge key"),
        (
            {"ignore_null_updates": True, "sequence_by": None, "except_column_list": None},
            "ignore_null_updates",
            "give sequence_by",
        ),
        ({"ignore_null_updates_column_list": ["op"]}, "ignore_null_updates_column_list", "leave out"),
    ],
)
def test_partial_updates_that_make_no_sense_are_refused_before_anything_is_committed(
    spark, dataset, arguments, argument, why
):
    load(spark, dataset, [event(1, 1, "a")])
    version = table_version(f"{dataset}/customers")
    with pytest.raises(ConfigError, match=why) as refused:
        load(spark, dataset, [event(1, 2, "b")], **arguments)
    assert refused.value.argument == argument
    assert table_version(f"{dataset}/customers") == version


def test_a_listed_column_the_events_lack_is_refused_before_anything_is_committed(spark, dataset):
    load(spark, dataset, [event(1, 1, "a")])
    version = table_version(f"{dataset}/customers")
    with pytest.raises(MissingKeyColumnError, match="ignore_null_updates_column_list column 'nick'"):
        load(spark, dataset, [event(1, 2, "b")], ignore_null_updates_column_list=["nick"])
    assert table_version(f"{dataset}/customers") == version


EVENTS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(0, 1),
            "seq": st.integers(0, 6),
            "pos": st.integers(0, 1),
            "name": st.sampled_from(["a", "b", None]),
            "city": st.sampled_from(["x", None]),
            "op": st.sampled_from(["U", "U", "U", "D"]),
        }
    ),
    min_size=2,
    max_size=8,
)
OPTIONS = st.sampled_from(
    [
        {"ignore_null_updates": True},
        {"ignore_null_updates_column_list": ["name"]},
        {"ignore_null_updates_except_column_list": ["name"]},
        {"ignore_null_updates": True, "track_history_column_list": ["city"]},
        {},  # several sequence columns alone
    ]
)


def _one_per_place(events, sequence):
    return list({(e["id"], *at(e, sequence)): e for e in events}.values())


@pytest.mark.property
@settings(max_examples=examples(4), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    events=EVENTS,
    options=OPTIONS,
    two=st.booleans(),
    deletes=st.booleans(),
    batches=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
@example(
    events=[event(0, 1, "a", "x"), event(0, 3, None, None), event(0, 2, "b", None), event(0, 4, op="D")],
    options={"ignore_null_updates": True},
    two=False,
    deletes=True,
    batches=3,
    seed=1,
)
def test_the_history_depends_only_on_the_events_with_partial_updates_and_sequences_of_several_columns(
    spark, tmp_path_factory, events, options, two, deletes, batches, seed
):
    sequence = TWO if two else ["seq"]
    events = _one_per_place(events, sequence)
    if not deletes:
        events = [{**e, "op": "U"} for e in events]
    arguments = {**options, "sequence_by": sequence, "apply_as_deletes": DELETES if deletes else None}
    dataset = str(tmp_path_factory.mktemp("scd2partial"))
    delivered(
        lambda batch: load(spark, dataset, batch, **arguments), arrival_batches(events, batches, seed), seed
    )
    chosen = ("name", "city") if options.get("ignore_null_updates") else ()
    chosen = tuple(options.get("ignore_null_updates_column_list", chosen))
    if "ignore_null_updates_except_column_list" in options:
        chosen = ("city",)
    tracked = options.get("track_history_column_list")
    assert history(dataset) == model(events, tuple(sequence), chosen, tracked)


def test_a_null_field_of_a_struct_keeps_the_field_before_it_as_auto_cdc_does(spark, dataset):
    """A struct column (a Spark source's; Python dicts are flattened into a column per field): each
    field is filled on its own; a null struct keeps the whole struct before it."""
    schema = "id long, seq long, op string, address struct<street: string, zip: string>"
    events = [
        (1, 1, "U", ("main st", "111")),
        (1, 2, "U", (None, "222")),  # a partial update of zip
        (1, 3, "U", None),  # no address at all
        (1, 4, "D", None),
        (1, 5, "U", (None, "555")),  # after the delete: no street to keep
    ]
    arguments = {"ignore_null_updates": True, "apply_as_deletes": DELETES, "columns": None}
    load(spark, dataset, spark.createDataFrame(events[2:], schema), **arguments)
    load(spark, dataset, spark.createDataFrame(events[:2], schema), **arguments)  # late
    rows = DeltaTable(f"{dataset}/customers").to_pyarrow_table().to_pylist()
    shaped = sorted((r["_dlt_valid_from"], r["_dlt_valid_to"], r["address"]) for r in rows)
    assert shaped == [
        (1, 2, {"street": "main st", "zip": "111"}),
        (2, 3, {"street": "main st", "zip": "222"}),
        (3, 4, {"street": "main st", "zip": "222"}),
        (5, None, {"street": None, "zip": "555"}),
    ]


def test_a_history_loaded_before_takes_partial_updates_its_versions_counting_as_events(spark, dataset):
    load(spark, dataset, [event(1, 10, "ann", "paris"), event(1, 30, "bob", "oslo")])  # every event whole
    late = load(
        spark, dataset, [event(1, 20, None, "lyon"), event(1, 40, None, None)], ignore_null_updates=True
    )
    assert history(dataset) == versions(
        (1, "ann", "paris", (10,), (20,)),
        (1, "ann", "lyon", (20,), (30,)),
        (1, "bob", "oslo", (30,), (40,)),
        (1, "bob", "oslo", (40,), None),
    )
    assert (late.metrics["numEventsApplied"], late.metrics["numVersionsSplit"]) == (2, 1)
