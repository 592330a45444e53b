"""The child tables planned from a batch's shape (dlt's K-1), and max_table_nesting."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.model.arguments import check_max_table_nesting
from airflow_provider_deltamerge.model.naming import snake_case
from airflow_provider_deltamerge.plan.expressions import TARGET, Col, In, Lit, keys_equal
from airflow_provider_deltamerge.plan.merge import Operation, SourceShape
from airflow_provider_deltamerge.plan.nested import (
    Column,
    Shape,
    check_not_adopted,
    check_root_table,
    is_child_table_of,
    plan_child_commit,
    plan_nested,
    takes_root_key,
)

S = Shape.scalar()
PET = Shape.struct(
    ("Name", S),
    ("Vet", Shape.struct(("City", S), ("Visits", Shape.array(S)))),
    ("Toys", Shape.array(Shape.struct(("kind", S)))),
)
USERS = (
    ("id", S),
    ("address", Shape.struct(("zip", S))),
    ("pets", Shape.array(PET)),
    ("tags", Shape.array(S)),
)


def test_arrays_become_child_tables_recursively_and_structs_inside_are_flattened():
    plan = plan_nested("users", USERS, snake_case)
    assert plan.child_columns == ("pets", "tags")
    assert plan.json_columns == ()
    assert plan.names == ("users__pets", "users__pets__vet__visits", "users__pets__toys", "users__tags")
    pets = plan.table("users__pets")
    assert (pets.parent, pets.source, pets.element, pets.depth) == ("users", ("pets",), "struct", 1)
    assert pets.columns == (Column(("Name",), "name"), Column(("Vet", "City"), "vet__city"))
    visits = plan.table("users__pets__vet__visits")
    assert (visits.parent, visits.source, visits.depth) == ("users__pets", ("Vet", "Visits"), 2)
    assert visits.columns == (Column((), "value"),)
    toys = plan.table("users__pets__toys")
    assert toys.columns == (Column(("kind",), "kind"),)
    assert plan.table("users__tags").columns == (Column((), "value"),)


def test_a_list_of_lists_gets_a_table_per_level_with_the_inner_list_in_list():
    plan = plan_nested("t", (("m", Shape.array(Shape.array(S))),), snake_case)
    assert plan.names == ("t__m", "t__m__list")
    assert plan.table("t__m").element == "array"
    assert plan.table("t__m").columns == ()
    assert plan.table("t__m__list").source == ("list",)


@pytest.mark.parametrize(
    ("nesting", "tables", "json"),
    [
        (0, (), {}),
        (1, ("users__pets", "users__tags"), {"users__pets": ["vet", "toys"]}),
        (2, ("users__pets", "users__pets__toys", "users__tags"), {"users__pets": ["vet__visits"]}),
        (3, ("users__pets", "users__pets__vet__visits", "users__pets__toys", "users__tags"), {}),
    ],
)
def test_max_table_nesting_stops_at_its_depth_and_keeps_the_rest_as_json(nesting, tables, json):
    plan = plan_nested("users", USERS, snake_case, nesting)
    assert plan.names == tables
    assert plan.json_columns == (() if nesting else ("pets", "tags"))
    for name, columns in json.items():
        assert [c.name for c in plan.table(name).columns if c.as_json] == columns


def test_arguments_and_names():
    assert check_max_table_nesting(None) is None
    assert check_max_table_nesting(2) == 2
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ConfigError) as error:
            check_max_table_nesting(bad)
        assert error.value.argument == "max_table_nesting"
    assert is_child_table_of("users", "users__pets")
    assert not is_child_table_of("users", "users_pets")
    assert not is_child_table_of("users", "users__")
    assert [takes_root_key("merge", s) for s in ("delete-insert", "upsert", "insert-only", "scd2")] == [
        True,
        True,
        True,
        False,
    ]
    assert not takes_root_key("append", None)
    assert not takes_root_key("replace", None)


def test_child_commits_apply_the_roots_strategy_on_the_childs_own_keys():
    def plan(mode, exists=True, empty=False, flagged=False):
        return plan_child_commit(mode, table_exists=exists, batch_empty=empty, flagged=flagged)

    assert plan("append").operation is Operation.WRITE
    assert plan("append", empty=True).operation is Operation.NOTHING
    assert plan("replace", empty=True).operation is Operation.OVERWRITE  # WD-3: emptied
    assert plan("replace", exists=False, empty=True).operation is Operation.NOTHING
    delete_insert = plan("delete-insert", flagged=True)
    assert (delete_insert.source, delete_insert.delete_keys) == (
        SourceShape.DELETE_KEYS_AND_ROWS,
        ("_dlt_root_id",),
    )
    upsert = plan("upsert", flagged=True)
    assert (upsert.source, upsert.on) == (SourceShape.ROWS_WITH_FLAG, keys_equal(("_dlt_id",), ("_dlt_id",)))
    insert_only = plan("insert-only")
    assert [(c.when, c.action) for c in insert_only.clauses] == [("not_matched", "insert_all")]
    assert plan("upsert", exists=False, flagged=True).operation is Operation.WRITE
    # the rows an interrupted attempt left take the batch's values or go; other rows stay as they are
    retried = plan_child_commit(
        "insert-only", table_exists=True, batch_empty=False, flagged=True, superseded=("7",)
    )
    assert [(c.when, c.action) for c in retried.clauses] == [
        ("matched", "delete"),
        ("matched", "update_all"),
        ("not_matched", "insert_all"),
    ]
    assert retried.clauses[1].condition == In(Col("_dlt_load_id", TARGET), (Lit("7"),))


def test_a_child_table_is_written_only_where_no_other_table_is():
    plan = plan_nested("u", (("tags", Shape.array(S)),), snake_case)
    check_not_adopted("u", plan, (), {})  # no table there yet
    check_not_adopted("u", plan, ("u__tags",), {"u__tags": {None}})  # found as u's child table
    check_not_adopted("u", plan, (), {"u__tags": {"u"}})  # made by a concurrent load of u
    for owners, what in [({None}, "a table of its own"), (set(), "a table of its own"), ({"a"}, "of 'a'")]:
        with pytest.raises(ConfigError, match=what):
            check_not_adopted("u", plan, (), {"u__tags": owners})


def test_a_child_table_is_loaded_only_by_its_root_table():
    check_root_table("u__tags", [None, "u__tags"])
    with pytest.raises(ConfigError, match="'u__tags' is a child table of 'u'"):
        check_root_table("u__tags", [None, "u"])
