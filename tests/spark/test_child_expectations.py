"""A child table's own expectations (`expectations={"orders__items": {...}}`, docs/EXPECTATIONS.md)
through run_load, read back with delta-rs: a child row failing a `drop` or `quarantine` expectation
never reaches its table and takes its own child rows with it, its parent stays; quarantined child rows
sit in `_dlt_quarantine_orders__items`; a `fail` commits nothing; the counts are in the load's metrics;
every refusal typed before anything is written.
"""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import ConfigError, ExpectationError, run_load
from tests.cli.test_cli import deltamerge
from tests.faults import killed_child
from tests.helpers import table_version
from tests.spark.test_expectations import KILLED_CHILD

CHILD = "orders__items"
OWN = {
    CHILD: {
        "warn": {"has_sku": "sku IS NOT NULL"},
        "drop": {"positive_qty": "qty > 0"},
        "quarantine": {"known_sku": "sku IN ('a', 'b')"},
    }
}


def item(sku, qty=1, tags=("t",)):
    return {"sku": sku, "qty": qty, "tags": list(tags)}


BATCH = [
    {"id": 1, "amount": 10, "items": [item("a"), item("b", qty=0, tags=("gone",)), item(None)]},
    {"id": 2, "amount": -1, "items": [item("x", qty=2)]},  # root row kept: its only item quarantined
]


def load(spark, dataset, rows, expectations=None):
    return run_load(
        rows,
        spark=spark,
        dataset=dataset,
        table_name="orders",
        pipeline_name="shop",
        write_disposition="merge",
        primary_key="id",
        expectations=OWN if expectations is None else expectations,
    )


def rows_of(dataset, table):
    path = f"{dataset}/{table}"
    return DeltaTable(path).to_pyarrow_table().to_pylist() if DeltaTable.is_deltatable(path) else []


def test_child_rows_are_checked_by_their_own_expectations_and_their_parents_stay(spark, dataset):
    info = load(spark, dataset, BATCH)
    assert sorted(r["id"] for r in rows_of(dataset, "orders")) == [1, 2]
    assert sorted((r["sku"], r["qty"]) for r in rows_of(dataset, CHILD) if r["sku"]) == [("a", 1)]
    assert [r["sku"] for r in rows_of(dataset, CHILD)].count(None) == 0  # sku null: fails known_sku too
    assert sorted(r["value"] for r in rows_of(dataset, f"{CHILD}__tags")) == ["t"]  # the dropped item's go
    aside = rows_of(dataset, f"_dlt_quarantine_{CHILD}")
    assert sorted((str(r["sku"]), tuple(r["_dlt_expectations"]), r["_dlt_load_id"]) for r in aside) == [
        ("None", ("has_sku", "known_sku"), info.load_id),
        ("x", ("known_sku",), info.load_id),
    ]
    expected = {
        CHILD: {
            "expectations": {
                "has_sku": {"action": "warn", "passed": 3, "failed": 1},
                "positive_qty": {"action": "drop", "passed": 3, "failed": 1},
                "known_sku": {"action": "quarantine", "passed": 2, "failed": 2},
            },
            "rows_dropped": 1,
            "rows_quarantined": 2,
        }
    }
    assert info.metrics["child_expectations"] == expected
    recorded = DeltaTable(f"{dataset}/_dlt_loads").to_pyarrow_table().to_pylist()
    assert [json.loads(r["metrics"])["child_expectations"] for r in recorded] == [expected]
    assert "expectations" not in info.metrics  # the root table has none of its own
    shown = deltamerge("loads", dataset)  # the command, as a user runs it
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "orders__items: 1 dropped, 2 quarantined" in shown.stdout


def test_a_retried_load_replaces_its_quarantined_child_rows(spark, dataset):
    first = load(spark, dataset, BATCH)
    second = load(spark, dataset, BATCH)  # the same rows again: a new load, its own quarantined rows
    loads = sorted(r["_dlt_load_id"] for r in rows_of(dataset, f"_dlt_quarantine_{CHILD}"))
    assert loads == sorted([first.load_id] * 2 + [second.load_id] * 2)
    assert sorted(r["sku"] for r in rows_of(dataset, CHILD)) == ["a"]  # the upsert keeps one


def test_a_fail_expectation_of_a_child_table_commits_nothing(spark, dataset):
    load(spark, dataset, BATCH[:1])
    versions = [table_version(f"{dataset}/{t}") for t in ("orders", CHILD)]
    failing = {CHILD: {"fail": {"positive_qty": "qty > 0"}}}
    with pytest.raises(ExpectationError) as refused:
        load(spark, dataset, [{"id": 3, "amount": 1, "items": [item("a", qty=-4)]}], failing)
    assert refused.value.table == CHILD and refused.value.failed == {"positive_qty": 1}
    assert refused.value.examples[0]["qty"] == -4
    assert [table_version(f"{dataset}/{t}") for t in ("orders", CHILD)] == versions


@pytest.mark.parametrize(
    ("expectations", "argument"),
    [
        ({"orders__itemz": {"drop": {"q": "qty > 0"}}}, "expectations.orders__itemz"),
        ({CHILD: {"drop": {"q": "quantity > 0"}}}, "expectations.orders__items.drop.q"),
        ({CHILD: {"drop": {"q": "qty + 1"}}}, "expectations.orders__items.drop.q"),
        ({CHILD: {"often": {"q": "qty > 0"}}}, "expectations.orders__items"),
    ],
)
def test_every_child_refusal_is_typed_and_comes_before_anything_is_written(
    spark, dataset, expectations, argument
):
    load(spark, dataset, BATCH[:1])
    tables = ("orders", CHILD, f"_dlt_quarantine_{CHILD}")
    versions = [table_version(f"{dataset}/{t}") for t in tables]
    with pytest.raises(ConfigError) as refused:
        load(spark, dataset, BATCH, expectations)
    assert str(refused.value).startswith(argument)
    assert [table_version(f"{dataset}/{t}") for t in tables] == versions


def retry_context(try_number: int) -> dict:
    return {"dag_id": "shop", "task_id": "orders", "run_id": "manual__1", "try_number": try_number}


@pytest.mark.usefixtures("jvm_class_archive")
@pytest.mark.parametrize("step", ["after_quarantine", f"committed:{CHILD}"])
def test_a_process_killed_after_its_child_quarantine_commit_is_retried_exactly_once(
    spark, dataset, each_writer, step
):
    """Killed after the child quarantine table's commit (and then after the child table's own), before
    the table's: the retry of the same task run leaves each quarantined child row, each row and the
    load's record once."""
    arguments = {
        "dataset": dataset,
        "table_name": "orders",
        "pipeline_name": "shop",
        "write_disposition": "merge",
        "primary_key": "id",
        "expectations": OWN,
        "backend": each_writer,
    }
    child = killed_child(KILLED_CHILD, {**arguments, "run_context": retry_context(1), "rows": BATCH}, step)
    assert child.returncode == 137, child.stdout[-2000:] + child.stderr[-4000:]
    assert len(rows_of(dataset, f"_dlt_quarantine_{CHILD}")) == 2  # committed by the killed attempt ...
    assert rows_of(dataset, "orders") == []  # ... which never committed the table
    retried = run_load(BATCH, spark=spark, **arguments, run_context=retry_context(2))
    aside = rows_of(dataset, f"_dlt_quarantine_{CHILD}")
    assert sorted((str(r["sku"]), r["_dlt_load_id"]) for r in aside) == [
        ("None", retried.load_id),
        ("x", retried.load_id),
    ]
    assert sorted(r["id"] for r in rows_of(dataset, "orders")) == [1, 2]
    assert [(r["sku"], r["qty"]) for r in rows_of(dataset, CHILD)] == [("a", 1)]
    recorded = [r["load_id"] for r in rows_of(dataset, "_dlt_loads")]
    assert recorded == [retried.load_id]
    assert retried.metrics["child_expectations"][CHILD]["rows_quarantined"] == 2
