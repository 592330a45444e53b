"""A column null in every event of a batch, on every path of change events, against each path's
reference model (the models of the CDC tests).

A delete with an empty payload (the most common CDC event) or a partial update leaves a column null in
every event of its batch: Spark then gives that column no type (NullType), though another batch, or the
table, or the kept events, have one. Whether a load succeeds, and what the table holds, must not depend
on how the events were batched: each arrangement of the same events, the typed ones first or the null
ones first (then the table is created from events without a type for the column), gives the model's
table.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.arrivals import arrival_batches, delivered
from tests.budget import examples
from tests.helpers import read_rows
from tests.spark import (
    test_cdc,
    test_cdc_deletes,
    test_cdc_null_updates,
    test_cdc_scd2_deletes,
    test_cdc_scd2_track_history,
    test_cdc_truncates,
)

pytestmark = pytest.mark.spark

UPSERT = {"disposition": "merge", "strategy": "upsert"}
SCD2 = {"disposition": "merge", "strategy": "scd2"}
# name and note: no declared type (id declared: a batch of truncates only has null keys, docs/CDC.md)
TYPES = {"id": {"data_type": "bigint"}, "op": {"data_type": "text"}, "seq": {"data_type": "double"}}
EVENTS = {"apply_as_deletes": "op = 'D'", "except_column_list": ["op"]}
TRUNCATES = {**EVENTS, "apply_as_truncates": "op = 'T'"}
PATHS = {
    "upsert": (UPSERT, {}, test_cdc.model),  # without apply_as_deletes a delete is an event: its row stays
    "deletes": (UPSERT, EVENTS, test_cdc_deletes.model),
    "truncates": (UPSERT, TRUNCATES, test_cdc_truncates.model),
    "ignore_null_updates": (
        UPSERT,
        {**TRUNCATES, "ignore_null_updates": True},
        lambda events: test_cdc_null_updates.model(events, columns=("name", "note")),
    ),
    "scd2": (SCD2, EVENTS, test_cdc_scd2_deletes.model),
    "scd2_tracked": (
        SCD2,
        {**EVENTS, "track_history_column_list": ["name"]},
        test_cdc_scd2_track_history.model,
    ),
}


def event(key, seq, name=None, note=None, op="U"):
    return {"id": key, "seq": float(seq), "name": name, "note": note, "op": op}


TYPED = [event(1, 10, "ann", "x"), event(2, 10, "bob", "y"), event(3, 15, "cid", "z")]
EMPTY = [event(1, 20, op="D"), event(2, 30)]  # a delete with an empty payload; a partial update
HALF = [event(3, 40, "cid2")]  # `note` null in every event of the batch
TRUNCATE = event(None, 25, op="T")
ARRANGEMENTS = {
    "typed first": [TYPED, EMPTY, HALF],
    "null first": [EMPTY, HALF, TYPED],
    "one batch": [[*EMPTY, *TYPED, *HALF]],
}


def load(spark, dataset, path, events):
    disposition, arguments, _ = PATHS[path]
    key = {"merge_key": "id"} if disposition is SCD2 else {"primary_key": "id"}
    if path not in ("truncates", "ignore_null_updates"):
        events = [e for e in events if e["op"] != "T"]
    return test_cdc.load(
        spark,
        dataset,
        events,
        table_name="events",
        write_disposition=disposition,
        columns=TYPES,
        **key,
        **arguments,
    )


def table(dataset, path) -> list[tuple]:
    """The table as (id, name, note) rows, or (id, name, note, valid_from, valid_to) versions for scd2;
    a column the table never got (null in every event loaded) reads as null."""
    if not DeltaTable.is_deltatable(f"{dataset}/events"):  # only deletes or truncates were loaded
        return []
    if PATHS[path][0] is SCD2:
        found = DeltaTable(f"{dataset}/events").to_pyarrow_table().to_pylist()
        columns = ("id", "name", "note", "_dlt_valid_from", "_dlt_valid_to")
        return sorted((tuple(r.get(c) for c in columns) for r in found), key=repr)
    return sorted(((r["id"], r.get("name"), r.get("note")) for r in read_rows(f"{dataset}/events")), key=repr)


def expected(path, events) -> list[tuple]:
    """The path's reference model, in `table`'s form."""
    disposition, _, model = PATHS[path]
    if path not in ("truncates", "ignore_null_updates"):
        events = [e for e in events if e["op"] != "T"]
    built = model(events)
    if path == "scd2":  # the model's versions: (id, name, valid_from, valid_to); note from its event
        at = {(e["id"], e["seq"]): e for e in events}
        return sorted(((k, n, at[(k, f)]["note"], f, t) for k, n, f, t in built), key=repr)
    if disposition is SCD2:
        return sorted(built, key=repr)
    return sorted(((k, e["name"], e["note"]) for k, e in built.items()), key=repr)


@pytest.mark.parametrize("arrangement", list(ARRANGEMENTS))
@pytest.mark.parametrize("path", list(PATHS))
def test_a_column_null_in_every_event_of_a_batch_loads_as_the_model_says(spark, dataset, path, arrangement):
    batches = [list(b) for b in ARRANGEMENTS[arrangement]]
    batches[[i for i, b in enumerate(batches) if EMPTY[0] in b][0]].append(TRUNCATE)
    for batch in batches:
        load(spark, dataset, path, batch)
    events = [e for batch in batches for e in batch]
    assert table(dataset, path) == expected(path, events)


NULLABLE_EVENTS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(1, 3),
            "seq": st.integers(1, 20).map(float),
            "name": st.sampled_from(["a", "b", None, None]),
            "note": st.sampled_from(["x", None, None]),
            "op": st.sampled_from(["U", "U", "U", "D", "T"]),
        }
    ),
    min_size=1,
    max_size=8,
).map(lambda events: list({e["seq"]: e for e in events}.values()))  # one event per sequence


@pytest.mark.property
@settings(max_examples=examples(3), deadline=None, suppress_health_check=list(HealthCheck))
@given(events=NULLABLE_EVENTS, batches=st.integers(1, 4), seed=st.integers(0, 2**16))
@pytest.mark.parametrize("path", ["truncates", "ignore_null_updates", "scd2_tracked"])
def test_the_table_is_the_models_whatever_columns_a_batch_leaves_null(
    spark, dataset, path, events, batches, seed
):
    """Events whose columns are often null, in random batches (so columns null in every event of some
    batch), delivered twice at times: the table is still the model's."""
    folder = f"{dataset}/{seed}-{len(events)}-{batches}"  # each example its own tables
    events = [{**e, "id": None} if e["op"] == "T" else e for e in events]
    if path == "scd2_tracked":  # a history keeps no truncates
        events = [e for e in events if e["op"] != "T"]
    if not events:
        return
    delivered(lambda batch: load(spark, folder, path, batch), arrival_batches(events, batches, seed), seed)
    assert table(folder, path) == expected(path, events)
