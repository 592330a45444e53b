"""A load whose expectations set aside every row (docs/EXPECTATIONS.md): still a load. Its table gets an
empty commit (its rows unchanged), the load is recorded in `_dlt_loads` with its counts and zero rows
loaded, its quarantined rows belong to it; a retry after a failure at any step leaves them once, and a
replay of its window replaces them.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from tests.faults import FAIL_AT, STEPS, InjectedFault
from tests.helpers import table_version
from tests.spark.test_expectations import (
    BOTH_SIDES,
    TABLE,
    load,
    merged_by,
    order,
    quarantined,
    recorded_metrics,
    retry_context,
    table_rows,
)

ALL_ASIDE = [order(2, amount=-5), order(3, country="XX"), order(4, amount=-1, country="XX")]
COUNTS = {"rows_dropped": 1, "rows_quarantined": 2}


@BOTH_SIDES
def test_a_load_setting_aside_every_row_is_recorded_with_its_counts_and_an_empty_commit(
    spark, dataset, strategy
):
    load(spark, dataset, [order(1)], **merged_by(strategy))
    version = table_version(f"{dataset}/{TABLE}")
    info = load(spark, dataset, ALL_ASIDE, **merged_by(strategy))
    assert info.load_id is not None and info.table_version == version + 1
    assert table_rows(dataset) == {1: {"amount": 10, "country": "DE", "note": "n"}}  # unchanged
    assert quarantined(dataset) == [
        (3, ("known_country",), info.load_id),
        (4, ("positive_amount", "known_country"), info.load_id),
    ]
    recorded = recorded_metrics(dataset)[info.load_id]
    assert {k: recorded[k] for k in COUNTS} == COUNTS == {k: info.metrics[k] for k in COUNTS}
    assert recorded["expectations"]["known_country"] == {"action": "quarantine", "passed": 1, "failed": 2}
    assert recorded["rows_staged"] == 0 and recorded.get("numTargetRowsInserted", 0) == 0


@BOTH_SIDES
def test_a_first_load_whose_every_row_is_dropped_creates_the_table_empty_and_is_recorded(
    spark, dataset, strategy
):
    dropping = {"drop": {"positive": "amount > 0"}}
    info = load(spark, dataset, [order(1, amount=0)], expectations=dropping, **merged_by(strategy))
    assert info.load_id is not None
    assert DeltaTable(f"{dataset}/{TABLE}").to_pyarrow_table().num_rows == 0
    assert recorded_metrics(dataset)[info.load_id]["rows_dropped"] == 1
    assert quarantined(dataset) == []  # nothing quarantined: no quarantine table


@pytest.mark.parametrize("step", [*STEPS, "after_quarantine"])
def test_a_retry_of_a_load_setting_aside_every_row_quarantines_them_once(spark, dataset, monkeypatch, step):
    load(spark, dataset, [order(1)])
    version = table_version(f"{dataset}/{TABLE}")
    monkeypatch.setenv(FAIL_AT, step)
    with pytest.raises(InjectedFault):
        load(spark, dataset, ALL_ASIDE, run_context=retry_context(1))
    monkeypatch.delenv(FAIL_AT)
    retried = load(spark, dataset, ALL_ASIDE, run_context=retry_context(2))
    assert table_rows(dataset) == {1: {"amount": 10, "country": "DE", "note": "n"}}
    assert table_version(f"{dataset}/{TABLE}") == version + 1  # one empty commit, whichever attempt made it
    rows = quarantined(dataset)
    assert [key for key, *_ in rows] == [3, 4]
    assert {load_id for *_, load_id in rows} == {retried.load_id}  # of the load recorded, once
    recorded = recorded_metrics(dataset)
    assert len(recorded) == 2 and {k: recorded[retried.load_id][k] for k in COUNTS} == COUNTS


def test_a_replay_of_a_window_whose_every_row_was_set_aside_replaces_its_quarantined_rows(spark, dataset):
    window = {"start": "2024-01-01T00:00:00+00:00", "end": "2024-01-02T00:00:00+00:00"}
    context = {"dag_id": "shop", "task_id": "orders", "run_id": "scheduled__1", "window": window}
    arguments = {
        "incremental": {"cursor_path": "ts", "initial_value": "2024-01-01T00:00:00Z"},
        "columns": {"ts": {"data_type": "timestamp"}},
    }
    rows = [order(n, country="XX", ts=f"2024-01-01T0{n}:00:00Z") for n in (1, 2)]
    first = load(spark, dataset, rows, run_context=context, **arguments)
    assert [(key, at) for key, _, at in quarantined(dataset)] == [(1, first.load_id), (2, first.load_id)]
    rows[1]["country"] = "FR"  # mended upstream, then the window is loaded again by another run
    replay = load(spark, dataset, rows, run_context={**context, "run_id": "backfill__1"}, **arguments)
    assert quarantined(dataset) == [(1, ("known_country",), replay.load_id)]
    assert sorted(table_rows(dataset)) == [2]
    assert set(recorded_metrics(dataset)) == {first.load_id, replay.load_id}


@pytest.mark.parametrize("strategy", ["delete-insert", "upsert", "scd2"])
def test_a_first_hard_delete_merge_whose_every_row_is_set_aside_creates_the_table_empty(
    spark, dataset, strategy
):
    rows = [order(1, amount=0, deleted=False), order(2, country="XX", deleted=True)]
    merge = {
        "write_disposition": {"disposition": "merge", "strategy": strategy},
        "columns": {"deleted": {"hard_delete": True}},
    }
    info = load(
        spark,
        dataset,
        rows,
        expectations={"drop": {"positive": "amount > 0"}, "quarantine": {"known": "country = 'DE'"}},
        **merge,
    )
    assert DeltaTable(f"{dataset}/{TABLE}").to_pyarrow_table().num_rows == 0
    recorded = recorded_metrics(dataset)[info.load_id]
    assert (recorded["rows_dropped"], recorded["rows_quarantined"]) == (1, 1)
    assert quarantined(dataset) == [(2, ("known",), info.load_id)]
    again = load(spark, dataset, [order(3, deleted=False)], expectations=None, **merge)
    assert sorted(table_rows(dataset)) == [3] and again.table_version == info.table_version + 1
