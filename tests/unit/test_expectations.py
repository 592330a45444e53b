"""`expectations=` checked into its canonical form, refused with the argument named, and a run's conf
only ever making it stricter (model/expectations.py); the OpenLineage assertions made of its counts."""

from __future__ import annotations

import pickle

import pytest

from airflow_provider_deltamerge import ConfigError, ExpectationError, LoadRequest
from airflow_provider_deltamerge.model.expectations import check_expectations, parse_expectations, tightened

THREE = {
    "fail": {"has_id": "id IS NOT NULL"},
    "drop": {"positive_amount": " amount > 0 "},
    "quarantine": {"known_country": "country IN ('DE', 'FR')"},
}


def test_the_canonical_form_groups_by_action_loosest_first_and_strips_conditions():
    assert list(check_expectations(THREE).items()) == [
        ("drop", {"positive_amount": "amount > 0"}),
        ("quarantine", {"known_country": "country IN ('DE', 'FR')"}),
        ("fail", {"has_id": "id IS NOT NULL"}),
    ]
    assert check_expectations(None) is None and check_expectations({}) is None
    assert [(e.name, e.action) for e in parse_expectations(THREE)] == [
        ("positive_amount", "drop"),
        ("known_country", "quarantine"),
        ("has_id", "fail"),
    ]


@pytest.mark.parametrize(
    ("value", "argument", "part"),
    [
        ("amount > 0", "expectations", "must be a dict of actions"),
        ({"expect_or_drop": {"a": "x > 0"}}, "expectations", "unknown action(s) ['expect_or_drop']"),
        ({"drop": {"a": "x > 0"}, "fail": {"a": "y > 0"}}, "expectations.fail.a", "unique per table"),
        ({"drop": {"a": "x > 0"}, "warn": {"A": "y > 0"}}, "expectations.drop.a", "unique per table"),
        ({"drop": {"a": "x IN (SELECT x FROM t)"}}, "expectations.drop.a", "SELECT"),
        ({"drop": {"a": "reflect('java.lang.Runtime', 'exec', 'rm')"}}, "expectations.drop.a", "reflect"),
        ({"drop": {"a": "rand() > 0.5"}}, "expectations.drop.a", "rand"),
        ({"drop": {"a": None}}, "expectations.drop.a", "needs a condition"),
        ({"drop": {"": "x > 0"}}, "expectations.drop", "is not a name"),
    ],
)
def test_a_bad_expectation_is_refused_naming_it(value, argument, part):
    with pytest.raises(ConfigError) as refused:
        LoadRequest.create(dataset="/tmp/lake", table_name="orders", expectations=value)
    assert refused.value.argument == argument
    assert part in str(refused.value)


def test_a_runs_conf_makes_an_expectation_stricter_or_adds_one_never_looser():
    task = {"warn": {"a": "x > 0"}, "drop": {"b": "y > 0"}}
    assert tightened(task, {"fail": {"a": "x > 0"}, "warn": {"b": "y > 0"}}) == {
        "drop": {"b": "y > 0"},
        "fail": {"a": "x > 0"},
    }
    assert tightened(task, {"quarantine": {"c": "z > 0"}}) == {**task, "quarantine": {"c": "z > 0"}}
    assert tightened(None, {"drop": {"c": "z > 0"}}) == {"drop": {"c": "z > 0"}}
    with pytest.raises(ConfigError, match="never change its condition"):
        tightened(task, {"fail": {"a": "x > -100"}})


def test_the_expectation_error_pickles_with_what_it_names():
    error = ExpectationError("orders", {"has_id": 2}, [{"id": None}])
    again = pickle.loads(pickle.dumps(error))
    assert (again.table, again.failed, again.examples, str(again)) == (
        "orders",
        {"has_id": 2},
        [{"id": None}],
        str(error),
    )


def test_the_counts_become_openlineage_data_quality_assertions():
    pytest.importorskip("openlineage.client")
    from airflow_provider_deltamerge.operators.lineage import _quality_assertions

    loads = [
        {"expectations": {"a": {"action": "drop", "passed": 3, "failed": 0}}},
        {"expectations": {"a": {"action": "drop", "passed": 2, "failed": 1}, "b": {"failed": 0}}},
        {"load_id": None},
    ]
    facet = _quality_assertions(loads)
    assert [(a.assertion, a.success) for a in facet.assertions] == [("a", False), ("b", True)]
    assert _quality_assertions([{"numSourceRows": 1}]) is None


CHILD = {"drop": {"positive_amount": "amount > 0"}, "orders__items": {"warn": {"q": " qty > 0 "}}}


def test_a_child_table_takes_its_own_expectations_under_its_name():
    from airflow_provider_deltamerge.model.expectations import child_expectations

    assert check_expectations(CHILD) == {
        "drop": {"positive_amount": "amount > 0"},
        "orders__items": {"warn": {"q": "qty > 0"}},
    }
    assert [e.name for e in parse_expectations(CHILD)] == ["positive_amount"]  # the root's only
    assert [(e.name, e.action) for e in child_expectations(CHILD)["orders__items"]] == [("q", "warn")]
    both = {"drop": {"q": "amount > 0"}, "orders__items": {"drop": {"q": "qty > 0"}}}
    assert check_expectations(both) == both  # names are unique per table, not across tables


@pytest.mark.parametrize(
    ("value", "argument"),
    [
        ({"items": {"drop": {"q": "qty > 0"}}}, "expectations"),  # neither an action nor a child table
        ({"orders__items": {"often": {"q": "qty > 0"}}}, "expectations.orders__items"),
        ({"orders__items": {"drop": {"q": "qty > 0", "Q": "qty < 9"}}}, "expectations.orders__items.drop.Q"),
        ({"orders__items": {"drop": {"q": "(SELECT 1) > 0"}}}, "expectations.orders__items.drop.q"),
        ({"orders__items": ["qty > 0"]}, "expectations.orders__items"),
    ],
)
def test_a_child_tables_expectations_are_refused_naming_the_child_table(value, argument):
    with pytest.raises(ConfigError) as refused:
        check_expectations(value)
    assert str(refused.value).startswith(argument + ":")


def test_a_runs_conf_tightens_a_child_tables_expectations_never_loosens_them():
    conf = {"orders__items": {"fail": {"q": "qty > 0"}, "drop": {"sku": "sku IS NOT NULL"}}}
    assert tightened(CHILD, conf)["orders__items"] == {
        "drop": {"sku": "sku IS NOT NULL"},
        "fail": {"q": "qty > 0"},
    }
    assert tightened(
        {"orders__items": {"fail": {"q": "qty > 0"}}}, {"orders__items": {"warn": {"q": "qty > 0"}}}
    ) == {"orders__items": {"fail": {"q": "qty > 0"}}}
    with pytest.raises(ConfigError, match=r"^expectations\.orders__items\.warn\.q:"):
        tightened(CHILD, {"orders__items": {"warn": {"q": "qty >= 0"}}})
