"""Arrays become child tables (dlt's nested tables), and every disposition treats them as dlt does.

Each test runs once per writer (conftest). Contents are read back with delta-rs.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.errors import ConfigError, SchemaError
from tests.helpers import ordered

PARENT = ("parent", "parent__child", "parent__child__grandchild")


def load(spark, dataset, rows, disposition, **arguments):
    arguments.setdefault("table_name", "parent")
    return run_load(rows, spark=spark, dataset=dataset, write_disposition=disposition, **arguments)


def table(dataset, name):
    path = f"{dataset}/{name}"
    return DeltaTable(path).to_pyarrow_table().to_pylist() if DeltaTable.is_deltatable(path) else []


def data(dataset, name):
    """The rows of a table without dlt's columns, in a fixed order."""
    return ordered([{k: v for k, v in r.items() if not k.startswith("_dlt")} for r in table(dataset, name)])


def counts(dataset, names=PARENT):
    return {n: len(table(dataset, n)) for n in names}


def nested_id(parent_id: str, name: str, index: int) -> str:
    digest = hashlib.sha256(f"{parent_id}_{name}_{index}".encode()).digest()
    return base64.b64encode(digest).decode()[:14]


def merge(strategy):
    return {"disposition": "merge", "strategy": strategy}


FAMILY = [
    {"id": 1, "name": "Alice", "pets": [{"name": "Fluffy", "vet": {"city": "Oslo"}, "toys": ["ball"]}]},
    {"id": 2, "name": "Bob", "pets": [{"name": "Spot", "toys": ["bone", "rope"]}, {"name": "Fido"}]},
]


def test_arrays_become_child_tables_linked_by_ids(spark, dataset):
    info = load(spark, dataset, FAMILY, "append", table_name="users", max_table_nesting=None)
    users = {r["id"]: r for r in table(dataset, "users")}
    assert set(users[1]) == {"id", "name", "_dlt_id", "_dlt_load_id"}
    pets = table(dataset, "users__pets")
    assert ordered([{k: r[k] for k in ("name", "vet__city", "_dlt_list_idx")} for r in pets]) == ordered(
        [
            {"name": "Fluffy", "vet__city": "Oslo", "_dlt_list_idx": 0},
            {"name": "Spot", "vet__city": None, "_dlt_list_idx": 0},
            {"name": "Fido", "vet__city": None, "_dlt_list_idx": 1},
        ]
    )
    for pet in pets:  # K-2: the id follows from the parent id, the table and the position
        assert pet["_dlt_id"] == nested_id(pet["_dlt_parent_id"], "users__pets", pet["_dlt_list_idx"])
        assert pet["_dlt_load_id"] == info.load_id
        assert "_dlt_root_id" not in pet  # K-3: not for append
    by_id = {p["_dlt_id"]: p for p in pets}
    assert {
        by_id_parent["name"] for by_id_parent in pets if by_id_parent["_dlt_parent_id"] == users[2]["_dlt_id"]
    } == {
        "Spot",
        "Fido",
    }
    toys = table(dataset, "users__pets__toys")
    assert sorted((by_id[t["_dlt_parent_id"]]["name"], t["_dlt_list_idx"], t["value"]) for t in toys) == [
        ("Fluffy", 0, "ball"),
        ("Spot", 0, "bone"),
        ("Spot", 1, "rope"),
    ]
    assert set(info.metrics["tables"]) == {"users", "users__pets", "users__pets__toys"}
    assert info.metrics["tables"]["users__pets"]["numTargetRowsInserted"] == 3
    assert info.metrics["numTargetRowsInserted"] == 2  # the root table's keys as before
    (record,) = DeltaTable(f"{dataset}/_dlt_loads").to_pyarrow_table().to_pylist()
    assert json.loads(record["metrics"])["tables"]["users__pets__toys"]["numTargetRowsInserted"] == 3


def test_max_table_nesting_keeps_deeper_arrays_as_json(spark, dataset):
    load(spark, dataset, FAMILY, "append", table_name="users", max_table_nesting=1)
    assert not DeltaTable.is_deltatable(f"{dataset}/users__pets__toys")
    pets = {r["name"]: r for r in table(dataset, "users__pets")}
    assert json.loads(pets["Spot"]["toys"]) == ["bone", "rope"]
    assert json.loads(pets["Fluffy"]["vet"]) == {"city": "Oslo"}
    load(spark, dataset, FAMILY, "append", table_name="flat", max_table_nesting=0)
    assert not DeltaTable.is_deltatable(f"{dataset}/flat__pets")
    assert json.loads({r["id"]: r for r in table(dataset, "flat")}[1]["pets"])[0]["name"] == "Fluffy"
    with pytest.raises(ConfigError) as error:
        load(spark, dataset, FAMILY, "append", max_table_nesting=-1)
    assert error.value.argument == "max_table_nesting"


def test_append_adds_child_rows_and_replace_leaves_only_the_batch(spark, dataset):
    """WD-3: replace empties child tables this batch has no rows for."""
    load(spark, dataset, FAMILY, "append", table_name="users")
    load(spark, dataset, FAMILY, "append", table_name="users")
    assert counts(dataset, ("users", "users__pets", "users__pets__toys")) == {
        "users": 4,
        "users__pets": 6,
        "users__pets__toys": 6,
    }
    load(spark, dataset, [{"id": 3, "name": "Cy", "pets": [{"name": "Rex"}]}], "replace", table_name="users")
    assert data(dataset, "users__pets") == [{"name": "Rex", "vet__city": None}]
    assert table(dataset, "users__pets__toys") == []  # no toys in the batch: emptied
    load(spark, dataset, [], "replace", table_name="users")
    assert counts(dataset, ("users", "users__pets", "users__pets__toys")) == {
        "users": 0,
        "users__pets": 0,
        "users__pets__toys": 0,
    }


# dlt's test_merge_nested_records_inserted_deleted, with the table contents dlt expects of SQL destinations
RUN_1 = [
    {"id": 1, "foo": 1, "child": [{"bar": 1, "grandchild": [{"baz": 1}]}]},
    {"id": 2, "foo": 1, "child": [{"bar": 1, "grandchild": [{"baz": 1}]}]},
    {"id": 3, "foo": 1, "child": [{"bar": 3, "grandchild": [{"baz": 1}]}]},
]
RUN_2 = [{"id": 1, "foo": 1, "child": [{"bar": 2}]}, {"id": 2, "foo": 1}]
RUN_3 = [
    {"id": 1, "foo": 1, "child": [{"bar": 1, "grandchild": [{"baz": 1}, {"baz": 4}]}]},
    {"id": 2, "foo": 1, "child": [{"bar": 2, "grandchild": [{"baz": 2}]}, {"bar": 4}]},
    {"id": 3, "foo": 1, "child": [{"bar": 3, "grandchild": [{"baz": 3}]}]},
]


@pytest.mark.parametrize("strategy", ["delete-insert", "upsert"])
def test_dlt_nested_records_inserted_deleted(spark, dataset, strategy):
    keys = {"primary_key": "id", "merge_key": "foo"} if strategy == "delete-insert" else {"primary_key": "id"}
    load(spark, dataset, RUN_1, merge(strategy), **keys)
    assert counts(dataset) == {"parent": 3, "parent__child": 3, "parent__child__grandchild": 3}
    load(spark, dataset, RUN_2, merge(strategy), **keys)
    if strategy == "upsert":  # id 3 is not in the batch and keeps its rows; id 2's list went
        assert counts(dataset) == {"parent": 3, "parent__child": 2, "parent__child__grandchild": 1}
        assert data(dataset, "parent__child") == [{"bar": 2}, {"bar": 3}]
    else:  # the merge key foo=1 replaces every root row and its children
        assert counts(dataset) == {"parent": 2, "parent__child": 1, "parent__child__grandchild": 0}
        assert data(dataset, "parent__child") == [{"bar": 2}]
    load(spark, dataset, RUN_3, merge(strategy), **keys)
    assert counts(dataset) == {"parent": 3, "parent__child": 4, "parent__child__grandchild": 4}
    assert data(dataset, "parent__child__grandchild") == [{"baz": 1}, {"baz": 2}, {"baz": 3}, {"baz": 4}]
    assert data(dataset, "parent__child") == [{"bar": 1}, {"bar": 2}, {"bar": 3}, {"bar": 4}]
    roots = {r["_dlt_id"]: r["id"] for r in table(dataset, "parent")}
    for name in PARENT[1:]:  # K-3: the root key at every depth
        assert {roots[r["_dlt_root_id"]] for r in table(dataset, name)} == {1, 2, 3}


def test_delete_insert_deletes_children_by_root_key_and_hard_deletes_at_every_depth(spark, dataset):
    hints = {"primary_key": "id", "columns": {"gone": {"hard_delete": True}}}
    load(spark, dataset, RUN_1, "merge", **hints)
    load(
        spark,
        dataset,
        [{"id": 1, "foo": 1, "child": [{"bar": 7}]}, {"id": 3, "gone": True}],
        "merge",
        **hints,
    )
    assert data(dataset, "parent") == [{"foo": 1, "gone": None, "id": 1}, {"foo": 1, "gone": None, "id": 2}]
    assert data(dataset, "parent__child") == [{"bar": 1}, {"bar": 7}]
    assert data(dataset, "parent__child__grandchild") == [{"baz": 1}]  # id 2's; id 1's and 3's went
    roots = {r["_dlt_id"]: r["id"] for r in table(dataset, "parent")}
    assert {roots[r["_dlt_root_id"]] for r in table(dataset, "parent__child__grandchild")} == {2}


def test_upsert_keeps_ids_drops_tails_and_children_of_deleted_roots(spark, dataset):
    """UP-5 and HD-5: a shorter list drops its tail, a missing list all of it, a hard delete everything."""
    hints = {"primary_key": "id", "columns": {"gone": {"hard_delete": True}}}
    first = [
        {"id": 1, "child": [{"bar": 1, "grandchild": [{"baz": 1}, {"baz": 2}]}, {"bar": 2}]},
        {"id": 2, "child": [{"bar": 3, "grandchild": [{"baz": 3}]}]},
        {"id": 3, "child": [{"bar": 4, "grandchild": [{"baz": 4}]}]},
    ]
    load(spark, dataset, first, merge("upsert"), **hints)
    before = {r["bar"]: r["_dlt_id"] for r in table(dataset, "parent__child")}
    second = [
        {"id": 1, "child": [{"bar": 10, "grandchild": [{"baz": 10}]}]},
        {"id": 2, "child": None},
        {"id": 3, "gone": True},
    ]
    info = load(spark, dataset, second, merge("upsert"), **hints)
    assert data(dataset, "parent") == [{"gone": None, "id": 1}, {"gone": None, "id": 2}]
    (child,) = table(dataset, "parent__child")
    assert (child["bar"], child["_dlt_id"]) == (10, before[1])  # updated in place: the id is the position's
    assert data(dataset, "parent__child__grandchild") == [{"baz": 10}]
    assert info.metrics["tables"]["parent__child"]["numTargetRowsDeleted"] == 3
    assert info.metrics["tables"]["parent__child__grandchild"]["numTargetRowsDeleted"] == 3


@pytest.mark.parametrize("strategy", ["delete-insert", "upsert"])
def test_a_merge_processes_child_tables_the_batch_has_no_column_for(spark, dataset, strategy):
    """WD-7: the batch has no `child` column at all; the roots it stages lose their children."""
    load(spark, dataset, RUN_1, merge(strategy), primary_key="id")
    load(spark, dataset, [{"id": 1, "foo": 5}], merge(strategy), primary_key="id")
    assert counts(dataset) == {"parent": 3, "parent__child": 2, "parent__child__grandchild": 2}
    roots = {r["_dlt_id"]: r["id"] for r in table(dataset, "parent")}
    assert {roots[r["_dlt_root_id"]] for r in table(dataset, "parent__child__grandchild")} == {2, 3}


def test_insert_only_inserts_new_child_ids_only(spark, dataset):
    """IO-2: an element appended to an existing parent's list is inserted; a changed one is not; a
    hard-deleted row inserts nothing and deletes nothing (HD-8)."""
    hints = {"primary_key": "id", "columns": {"gone": {"hard_delete": True}}}
    load(spark, dataset, [{"id": 1, "child": [{"bar": 1}]}], merge("insert-only"), **hints)
    second = [
        {"id": 1, "child": [{"bar": 9}, {"bar": 2}]},
        {"id": 2, "child": [{"bar": 3}]},
        {"id": 3, "gone": True, "child": [{"bar": 5}]},
    ]
    load(spark, dataset, second, merge("insert-only"), **hints)
    assert data(dataset, "parent__child") == [{"bar": 1}, {"bar": 2}, {"bar": 3}]
    assert counts(dataset, ("parent",)) == {"parent": 2}


def test_scd2_child_rows_follow_parent_versions(spark, dataset):
    """SCD-14..16: child rows are inserted with each new parent version only; retiring touches none; a
    version that comes back finds its child rows present; no root key."""
    scd2 = {"disposition": "merge", "strategy": "scd2"}
    first = [
        {"id": 1, "v": "a", "tags": [{"t": "x"}]},
        {"id": 2, "v": "b", "tags": [{"t": "y"}, {"t": "z"}]},
    ]
    load(spark, dataset, first, scd2, table_name="dim")
    assert data(dataset, "dim__tags") == [{"t": "x"}, {"t": "y"}, {"t": "z"}]
    load(spark, dataset, [first[0], {"id": 2, "v": "b", "tags": [{"t": "y"}]}], scd2, table_name="dim")
    versions = table(dataset, "dim")
    assert len(versions) == 3  # a changed list is a new version of id 2
    current = {r["id"]: r["_dlt_id"] for r in versions if r["_dlt_valid_to"] is None}
    tags = table(dataset, "dim__tags")
    assert len(tags) == 4  # the new version's one tag; the retired version keeps its two
    assert [t["t"] for t in tags if t["_dlt_parent_id"] == current[2]] == ["y"]
    assert all("_dlt_root_id" not in t for t in tags)
    for tag in tags:
        assert tag["_dlt_id"] == nested_id(tag["_dlt_parent_id"], "dim__tags", tag["_dlt_list_idx"])
    load(spark, dataset, [first[1]], scd2, table_name="dim")  # id 2's first version comes back; id 1 goes
    assert len(table(dataset, "dim")) == 4
    assert len(table(dataset, "dim__tags")) == 4  # its child rows were there already
    active = [r["id"] for r in table(dataset, "dim") if r["_dlt_valid_to"] is None]
    assert active == [2]


def test_max_table_nesting_zero_keeps_scd2_arrays_as_json(spark, dataset):
    scd2 = {"disposition": "merge", "strategy": "scd2"}
    load(spark, dataset, RUN_1, scd2, max_table_nesting=0)
    assert not DeltaTable.is_deltatable(f"{dataset}/parent__child")
    assert json.loads({r["id"]: r for r in table(dataset, "parent")}[3]["child"]) == [
        {"bar": 3, "grandchild": [{"baz": 1}]}
    ]


def test_a_table_of_its_own_named_like_a_child_table_is_left_alone(spark, dataset):
    archive = [{"id": 9, "items": [{"n": 1}]}]
    load(spark, dataset, archive, "append", table_name="parent__archive", naming="direct")
    load(spark, dataset, RUN_1, "replace")
    load(spark, dataset, [], "replace")  # empties parent and its child tables, nothing else
    assert counts(dataset) == dict.fromkeys(PARENT, 0)
    assert counts(dataset, ("parent__archive", "parent__archive__items")) == {
        "parent__archive": 1,
        "parent__archive__items": 1,
    }


def test_root_key_on_append_lets_a_later_merge_find_child_rows(spark, dataset):
    load(spark, dataset, RUN_1, "append", root_key=True)
    roots = {r["_dlt_id"]: r["id"] for r in table(dataset, "parent")}
    assert {roots[r["_dlt_root_id"]] for r in table(dataset, "parent__child__grandchild")} == {1, 2, 3}
    load(spark, dataset, RUN_2, "merge", primary_key="id")  # delete-insert: ids 1 and 2 replaced
    assert counts(dataset) == {"parent": 3, "parent__child": 2, "parent__child__grandchild": 1}


def test_upsert_refuses_child_tables_without_a_root_key(spark, dataset):
    load(spark, dataset, RUN_1, "append")
    with pytest.raises(SchemaError, match="root_key=True"):
        load(spark, dataset, RUN_2, merge("upsert"), primary_key="id")
    assert counts(dataset) == {"parent": 3, "parent__child": 3, "parent__child__grandchild": 3}
    load(spark, dataset, RUN_1, "replace", root_key=True)  # what the error advises
    load(spark, dataset, RUN_2, merge("upsert"), primary_key="id")
    assert counts(dataset) == {"parent": 3, "parent__child": 2, "parent__child__grandchild": 1}


def test_a_frozen_contract_takes_the_arrays_of_child_tables_and_refuses_a_new_column(spark, dataset):
    from airflow_provider_deltamerge import ContractError

    load(spark, dataset, FAMILY, merge("upsert"), table_name="users", primary_key="id")
    more = [{"id": 3, "name": "Cleo", "pets": [{"name": "Rex", "toys": ["stick"]}]}]
    load(
        spark, dataset, more, merge("upsert"), table_name="users", primary_key="id", schema_contract="freeze"
    )
    assert {r["name"] for r in table(dataset, "users__pets")} == {"Fluffy", "Spot", "Fido", "Rex"}
    assert "pets" not in {f.name for f in DeltaTable(f"{dataset}/users").schema().fields}

    new_column = [{"id": 4, "name": "Dan", "age": 40, "pets": []}]
    with pytest.raises(ContractError, match="new column 'age'"):
        load(
            spark,
            dataset,
            new_column,
            merge("upsert"),
            table_name="users",
            primary_key="id",
            schema_contract="freeze",
        )
    assert len(table(dataset, "users")) == 3


def test_the_contract_on_tables_covers_the_child_tables_a_batch_would_add(spark, dataset):
    from airflow_provider_deltamerge import ContractError

    upsert = {"table_name": "users", "primary_key": "id"}
    load(spark, dataset, [{"id": 1, "name": "Alice"}], merge("upsert"), **upsert)
    with pytest.raises(ContractError, match="new table 'users__pets'"):
        load(spark, dataset, FAMILY, merge("upsert"), schema_contract={"tables": "freeze"}, **upsert)
    assert data(dataset, "users") == [{"id": 1, "name": "Alice"}]
    assert not DeltaTable.is_deltatable(f"{dataset}/users__pets")

    load(spark, dataset, FAMILY, merge("upsert"), schema_contract={"tables": "discard_row"}, **upsert)
    assert data(dataset, "users") == [{"id": 1, "name": "Alice"}, {"id": 2, "name": "Bob"}]
    assert not DeltaTable.is_deltatable(f"{dataset}/users__pets")


def test_lists_of_lists_become_a_list_table_below_and_shrink_with_an_upsert(spark, dataset):
    grid = [{"id": 1, "grid": [[1, 2], [3]]}, {"id": 2, "grid": [[4]]}]
    load(spark, dataset, grid, merge("upsert"), table_name="m", primary_key="id")
    inner = {r["_dlt_id"]: r for r in table(dataset, "m__grid")}
    values = {
        (inner[r["_dlt_parent_id"]]["_dlt_list_idx"], r["_dlt_list_idx"], r["value"])
        for r in table(dataset, "m__grid__list")
    }
    assert values == {(0, 0, 1), (0, 1, 2), (1, 0, 3), (0, 0, 4)}
    assert len(inner) == 3

    load(spark, dataset, [{"id": 1, "grid": [[1]]}], merge("upsert"), table_name="m", primary_key="id")
    assert sorted(r["value"] for r in table(dataset, "m__grid__list")) == [1, 4]  # root 2's list untouched
    assert len(table(dataset, "m__grid")) == 2
