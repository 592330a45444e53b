"""Expectations (`expectations=`, docs/EXPECTATIONS.md) through run_load, read back with delta-rs: rows
that fail a `drop` or `quarantine` expectation never reach the table, quarantined ones sit in
`_dlt_quarantine_<table>` with their reasons, `fail` commits nothing, and the counts are in the load's
metrics; exactly once under failures at every step and retries; every refusal typed before anything
is written. A plain-Python model decides, for random rows and random expectation sets, which rows land,
which are quarantined, and the counts.
"""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError, ExpectationError, run_load
from tests.budget import examples
from tests.faults import FAIL_AT, STEPS, InjectedFault, killed_child
from tests.helpers import table_version

TABLE = "orders"
QUARANTINE = f"_dlt_quarantine_{TABLE}"
THREE = {
    "warn": {"has_note": "note IS NOT NULL"},
    "drop": {"positive_amount": "amount > 0"},
    "quarantine": {"known_country": "country IN ('DE', 'FR')"},
}
MERGE = {"write_disposition": "merge", "primary_key": "id"}
# decided in Spark (a delete-insert deduplicates) and on the driver (an upsert's staging collects every row)
BOTH_SIDES = pytest.mark.parametrize("strategy", ["delete-insert", "upsert"])


def merged_by(strategy: str) -> dict:
    return {"write_disposition": {"disposition": "merge", "strategy": strategy}}


def order(key, amount=10, country="DE", note="n", **more):
    return {"id": key, "amount": amount, "country": country, "note": note, **more}


def load(spark, dataset, rows, **arguments):
    arguments.setdefault("table_name", TABLE)
    arguments.setdefault("pipeline_name", "shop")
    arguments.setdefault("expectations", THREE)
    for name, value in MERGE.items():
        arguments.setdefault(name, value)
    return run_load(rows, spark=spark, dataset=dataset, **arguments)


def table_rows(dataset, table=TABLE) -> dict:
    rows = DeltaTable(f"{dataset}/{table}").to_pyarrow_table().to_pylist()
    return {r["id"]: {k: r[k] for k in ("amount", "country", "note")} for r in rows}


def quarantined(dataset) -> list[tuple]:
    """(id, failed expectations, load id) of each quarantined row, sorted."""
    path = f"{dataset}/{QUARANTINE}"
    if not DeltaTable.is_deltatable(path):
        return []
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted((r["id"], tuple(r["_dlt_expectations"]), r["_dlt_load_id"]) for r in rows)


def recorded_metrics(dataset) -> dict:
    rows = DeltaTable(f"{dataset}/_dlt_loads").to_pyarrow_table().to_pylist()
    return {r["load_id"]: json.loads(r["metrics"]) for r in rows}


BATCH = [
    order(1),
    order(2, amount=-5),  # dropped
    order(3, country="XX"),  # quarantined
    order(4, amount=-1, country="XX"),  # fails both: quarantined (the stricter action)
    order(5, note=None),  # warned: loaded
    order(6, amount=None),  # null fails: dropped
]


@BOTH_SIDES
def test_three_expectations_keep_bad_rows_out_quarantine_some_and_count_them(spark, dataset, strategy):
    info = load(spark, dataset, BATCH, **merged_by(strategy))
    assert table_rows(dataset) == {
        1: {"amount": 10, "country": "DE", "note": "n"},
        5: {"amount": 10, "country": "DE", "note": None},
    }
    assert quarantined(dataset) == [
        (3, ("known_country",), info.load_id),
        (4, ("positive_amount", "known_country"), info.load_id),
    ]
    quarantine = DeltaTable(f"{dataset}/{QUARANTINE}").to_pyarrow_table()
    assert quarantine.column("_dlt_quarantined_at").null_count == 0
    assert set(quarantine.column_names) >= {"amount", "country", "note"}  # the row as it came
    expected = {
        "expectations": {
            "has_note": {"action": "warn", "passed": 5, "failed": 1},
            "positive_amount": {"action": "drop", "passed": 3, "failed": 3},
            "known_country": {"action": "quarantine", "passed": 4, "failed": 2},
        },
        "rows_dropped": 2,
        "rows_quarantined": 2,
    }
    assert {k: info.metrics[k] for k in expected} == expected
    assert info.metrics["numTargetRowsInserted"] == 2
    assert {k: recorded_metrics(dataset)[info.load_id][k] for k in expected} == expected


@BOTH_SIDES
def test_a_fail_expectation_commits_nothing_and_names_the_expectation_its_count_and_rows(
    spark, dataset, strategy
):
    load(spark, dataset, [order(1)], **merged_by(strategy))
    version = table_version(f"{dataset}/{TABLE}")
    failing = {**THREE, "fail": {"has_id": "id < 100"}}
    rows = [order(2, country="XX"), order(100, password="hunter22"), order(101, password="hunter22")]
    with pytest.raises(ExpectationError) as refused:
        load(spark, dataset, rows, expectations=failing, **merged_by(strategy))
    error = refused.value
    assert error.failed == {"has_id": 2}
    assert "'has_id' (2 row(s))" in str(error) and "Nothing was loaded" in str(error)
    assert 1 <= len(error.examples) <= 3 and {e["id"] for e in error.examples} <= {100, 101}
    assert "hunter22" not in str(error)  # a credential column is masked
    assert table_version(f"{dataset}/{TABLE}") == version
    assert quarantined(dataset) == []  # the quarantine table is not written either
    assert len(recorded_metrics(dataset)) == 1


@pytest.mark.parametrize(
    ("expectations", "part"),
    [
        ({"reject": {"a": "amount > 0"}}, "unknown action"),
        ({"drop": {"a": "amount > 0"}, "warn": {"A": "note IS NOT NULL"}}, "names are unique"),
        ({"drop": {"a": "amount > (SELECT max(amount) FROM orders)"}}, "SELECT"),
        ({"drop": {"a": "java_method('java.lang.System', 'exit', 1) = 0"}}, "java_method"),
        ({"drop": {"a": "missing_column > 0"}}, "is not a condition over the batch's rows' columns"),
        ({"drop": {"a": "amount + 1"}}, "not a condition (true/false)"),
        ({"drop": ["amount > 0"]}, "must be a dict of names"),
    ],
)
def test_every_refusal_is_typed_and_comes_before_anything_is_written(spark, dataset, expectations, part):
    load(spark, dataset, [order(1)])
    version = table_version(f"{dataset}/{TABLE}")
    with pytest.raises(ConfigError, match="expectations") as refused:
        load(spark, dataset, [order(2, country="XX")], expectations=expectations)
    assert part in str(refused.value)
    assert table_version(f"{dataset}/{TABLE}") == version
    assert quarantined(dataset) == [] and len(recorded_metrics(dataset)) == 1


def test_a_dropped_row_never_wins_a_dedup(spark, dataset):
    rows = [order(1, amount=-1, rank=3), order(1, amount=7, rank=2), order(1, amount=5, rank=1)]
    info = load(
        spark,
        dataset,
        rows,
        write_disposition={"disposition": "merge", "strategy": "delete-insert"},
        columns={"rank": {"dedup_sort": "desc"}},
    )
    assert table_rows(dataset) == {1: {"amount": 7, "country": "DE", "note": "n"}}
    assert info.metrics["rows_dropped"] == 1


def test_a_change_event_is_checked_before_its_sequence_counts(spark, dataset):
    events = [order(1, seq=1, op="U"), order(1, amount=-3, seq=2, op="U"), order(2, seq=1, op="D")]
    info = load(
        spark,
        dataset,
        events,
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        sequence_by="seq",
        apply_as_deletes="op = 'D'",
        expectations={"drop": {"positive_amount": "amount > 0"}},
    )
    assert table_rows(dataset) == {1: {"amount": 10, "country": "DE", "note": "n"}}  # the older event
    assert info.metrics["rows_dropped"] == 1


def test_an_scd2_snapshot_without_a_dropped_row_retires_its_key_as_an_absent_one(spark, dataset):
    scd2 = {"write_disposition": {"disposition": "merge", "strategy": "scd2"}, "primary_key": None}
    load(spark, dataset, [order(1), order(2)], **scd2)
    info = load(spark, dataset, [order(1), order(2, amount=-1)], **scd2)
    rows = DeltaTable(f"{dataset}/{TABLE}").to_pyarrow_table().to_pylist()
    current = sorted(r["id"] for r in rows if r["_dlt_valid_to"] is None)
    assert current == [1] and len(rows) == 2  # key 2's version retired, no new version
    assert info.metrics["rows_dropped"] == 1


def test_a_source_that_reads_differently_twice_quarantines_the_rows_it_left_out(spark, dataset):
    """Each read of this source draws new amounts: the rows quarantined are those the load's one pass
    set aside, so every row lands exactly once, in the table or in quarantine."""
    import random

    from pyspark.sql import functions as F

    draw = F.udf(lambda key: random.choice((-1, 1)) * key, "long").asNondeterministic()
    source = spark.range(1, 201).select(
        F.col("id"), draw("id").alias("amount"), F.lit("DE").alias("country"), F.lit("n").alias("note")
    )
    info = load(spark, dataset, source, expectations={"quarantine": {"positive": "amount > 0"}})
    landed = table_rows(dataset)
    aside = quarantined(dataset)
    assert all(row["amount"] > 0 for row in landed.values())
    assert sorted([*landed, *(key for key, _, _ in aside)]) == list(range(1, 201))
    assert info.metrics["rows_quarantined"] == len(aside) == 200 - len(landed)


def retry_context(try_number: int) -> dict:
    return {"dag_id": "shop", "task_id": "orders", "run_id": "manual__1", "try_number": try_number}


@BOTH_SIDES
@pytest.mark.parametrize("step", [*STEPS, "after_quarantine"])
def test_a_retry_after_a_failure_at_any_step_quarantines_each_row_exactly_once(
    spark, dataset, monkeypatch, step, strategy
):
    merge = merged_by(strategy)
    load(spark, dataset, [order(1)], **merge)
    monkeypatch.setenv(FAIL_AT, step)
    with pytest.raises(InjectedFault):
        load(spark, dataset, BATCH, run_context=retry_context(1), **merge)
    monkeypatch.delenv(FAIL_AT)
    retried = load(spark, dataset, BATCH, run_context=retry_context(2), **merge)
    assert table_rows(dataset) == {
        1: {"amount": 10, "country": "DE", "note": "n"},
        5: {"amount": 10, "country": "DE", "note": None},
    }
    rows = quarantined(dataset)
    assert [(key, failed) for key, failed, _ in rows] == [
        (3, ("known_country",)),
        (4, ("positive_amount", "known_country")),
    ]
    assert len({load_id for *_, load_id in rows}) == 1  # of one load, the one that completed
    assert rows[0][2] in recorded_metrics(dataset)
    assert (retried.metrics["rows_dropped"], retried.metrics["rows_quarantined"]) == (2, 2)


def test_a_replay_of_a_window_replaces_its_quarantined_rows(spark, dataset):
    window = {"start": "2024-01-01T00:00:00+00:00", "end": "2024-01-02T00:00:00+00:00"}
    incremental = {"cursor_path": "ts", "initial_value": "2024-01-01T00:00:00Z"}
    rows = [order(n, ts=f"2024-01-01T0{n}:00:00Z") for n in (1, 2, 3)]
    rows[1]["country"] = rows[2]["country"] = "XX"
    context = {"dag_id": "shop", "task_id": "orders", "run_id": "scheduled__1", "window": window}
    arguments = {"incremental": incremental, "columns": {"ts": {"data_type": "timestamp"}}}
    load(spark, dataset, rows, run_context=context, **arguments)
    assert [key for key, *_ in quarantined(dataset)] == [2, 3]
    rows[2]["country"] = "FR"  # mended upstream, then the window is loaded again by another run
    replay = load(spark, dataset, rows, run_context={**context, "run_id": "backfill__1"}, **arguments)
    assert quarantined(dataset) == [(2, ("known_country",), replay.load_id)]
    assert sorted(table_rows(dataset)) == [1, 3]


# ---- the property: random rows, random expectation sets, against a plain-Python model ----

CONDITIONS = {  # SQL condition -> the same in Python (None fails, as SQL's null does)
    "a > 0": lambda r: r["a"] is not None and r["a"] > 0,
    "b < 5": lambda r: r["b"] is not None and r["b"] < 5,
    "a + b <> 3": lambda r: r["a"] is not None and r["b"] is not None and r["a"] + r["b"] != 3,
    "b IS NOT NULL": lambda r: r["b"] is not None,
}
RANK = ("warn", "drop", "quarantine")


def model(rows, chosen):
    """(rows landing, {id: failed names} quarantined, failed count per name)."""
    landed, aside, failed = [], {}, {name: 0 for name, *_ in chosen}
    for row in rows:
        in_order = sorted(chosen, key=lambda c: RANK.index(c[2]))  # grouped by action, loosest first
        names = [name for name, sql, _ in in_order if not CONDITIONS[sql](row)]
        for name in names:
            failed[name] += 1
        actions = {action for name, _, action in chosen if name in names}
        strictest = max(actions, key=RANK.index, default="warn")
        if strictest == "warn":
            landed.append(row["id"])
        elif strictest == "quarantine":
            aside[row["id"]] = tuple(names)
    return sorted(landed), aside, failed


values = st.one_of(st.none(), st.integers(-3, 6))


@pytest.mark.property
@settings(
    max_examples=examples(6),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(st.fixed_dictionaries({"a": values, "b": values}), min_size=1, max_size=12),
    chosen=st.lists(st.tuples(st.sampled_from(sorted(CONDITIONS)), st.sampled_from(RANK)), max_size=4),
)
def test_rows_landing_and_quarantined_follow_the_model(spark, tmp_path_factory, rows, chosen):
    dataset = str(tmp_path_factory.mktemp("property"))
    rows = [{"id": n, **row} for n, row in enumerate(rows)]
    named = [(f"e{n}", sql, action) for n, (sql, action) in enumerate(chosen)]
    grouped: dict = {}
    for name, sql, action in named:
        grouped.setdefault(action, {})[name] = sql
    columns = {"a": {"data_type": "bigint"}, "b": {"data_type": "bigint"}}
    info = run_load(
        rows,
        spark=spark,
        dataset=dataset,
        table_name="t",
        write_disposition="append",
        expectations=grouped or None,
        columns=columns,
    )
    landed, aside, failed = model(rows, named)
    path = f"{dataset}/t"
    stored = sorted(r["id"] for r in DeltaTable(path).to_pyarrow_table().to_pylist()) if landed else []
    assert stored == landed
    quarantine = f"{dataset}/_dlt_quarantine_t"
    found = {}
    if DeltaTable.is_deltatable(quarantine):
        found = {
            r["id"]: tuple(r["_dlt_expectations"])
            for r in DeltaTable(quarantine).to_pyarrow_table().to_pylist()
        }
    assert found == aside
    if named:
        counts = info.metrics["expectations"]
        assert {name: counts[name]["failed"] for name in counts} == failed
        assert all(c["passed"] + c["failed"] == len(rows) for c in counts.values())
        assert info.metrics["rows_quarantined"] == len(aside)
        assert info.metrics["rows_dropped"] == len(rows) - len(landed) - len(aside)


KILLED_CHILD = """
import json, sys
from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.spark.session import default_session
from airflow_provider_deltamerge.model.delta_jars import delta_jars_from_env
from tests import faults

faults.install()
arguments = json.loads(sys.argv[1])
spark = default_session("local[1]", {"spark.sql.shuffle.partitions": "1"}, delta_jars=delta_jars_from_env())
run_load(arguments.pop("rows"), spark=spark, **arguments)
print("the load returned: the fault did not fire", flush=True)
"""


@pytest.mark.usefixtures("jvm_class_archive")
def test_a_process_killed_after_its_quarantine_commit_is_retried_exactly_once(
    spark, dataset, monkeypatch, each_writer
):
    load(spark, dataset, [order(1)])
    arguments = {
        "dataset": dataset,
        "table_name": TABLE,
        "pipeline_name": "shop",
        "expectations": THREE,
        **MERGE,
        "backend": each_writer,
        "run_context": retry_context(1),
        "rows": BATCH,
    }
    child = killed_child(KILLED_CHILD, arguments, "after_quarantine")
    assert child.returncode == 137, child.stdout[-2000:] + child.stderr[-4000:]
    assert [key for key, *_ in quarantined(dataset)] == [3, 4]  # committed by the killed attempt ...
    assert table_version(f"{dataset}/{TABLE}") == 0  # ... which never committed the table
    retried = load(spark, dataset, BATCH, run_context=retry_context(2))
    assert quarantined(dataset) == [
        (3, ("known_country",), retried.load_id),
        (4, ("positive_amount", "known_country"), retried.load_id),
    ]
    assert sorted(table_rows(dataset)) == [1, 5]
