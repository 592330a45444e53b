"""A run's rows are those of its latest successful attempt, whatever ran in between: an Airflow retry after
another run recorded the first attempt's commit, a task cleared after it succeeded, mapped instances of
one run that share a window. Each test goes through run_load with the run context the operator passes.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import ConfigError, Incremental, run_load
from airflow_provider_deltamerge.delta import store
from tests.helpers import read_rows

pytestmark = pytest.mark.spark

UTC = timezone.utc
TABLE = "events"
WEEK = ("2024-01-08T00:00:00+00:00", "2024-01-15T00:00:00+00:00")
INTERVAL = Incremental("ts", initial_value="2024-01-01T00:00:00Z")


def run(run_id: str, try_number: int = 1, map_index: int | None = None, run_type="manual") -> dict:
    return {
        "dag_id": "events",
        "task_id": "load",
        "run_id": run_id,
        "try_number": try_number,
        "map_index": map_index,
        "run_type": run_type,
    }


def scheduled(run_id: str, try_number: int = 1, map_index: int | None = None) -> dict:
    """A run whose data interval is its window (stateless: loaded as given)."""
    return run(f"scheduled__{run_id}", try_number, map_index, run_type="scheduled")


def rows(ids, value="a", day=9) -> list[dict]:
    return [{"id": n, "v": value, "ts": datetime(2024, 1, day, n % 24, tzinfo=UTC)} for n in ids]


def load(spark, dataset, data, run_context, **arguments):
    return run_load(
        data, spark=spark, dataset=dataset, table_name=TABLE, run_context=run_context, **arguments
    )


def table(dataset) -> list[tuple]:
    return sorted((r["id"], r["v"]) for r in read_rows(f"{dataset}/{TABLE}"))


def loads_of(dataset, run_id) -> list[dict]:
    return [r for r in store.read_loads(dataset, table_name=TABLE) if r["run_id"] == run_id]


def commit_then_die(spark, dataset, monkeypatch, data, run_context, **arguments):
    """An attempt whose commit lands and whose process stops before it records the load."""
    from tests.faults import InjectedFault

    monkeypatch.setenv("DELTAMERGE_FAIL_AT", "after_commit")
    with pytest.raises(InjectedFault):
        load(spark, dataset, data, run_context, **arguments)
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")


# -- item: a retry after another run recorded the first attempt ------------------------------------------


def test_a_retry_after_another_run_recorded_its_first_attempt_loads_once(spark, dataset, monkeypatch):
    commit_then_die(spark, dataset, monkeypatch, rows([0, 1, 2]), run("r1"))
    load(spark, dataset, rows([10, 11]), run("r2"))  # records r1's commit on its way
    (first,) = loads_of(dataset, "r1")

    retry = load(spark, dataset, rows([0, 1, 2]), run("r1", try_number=2))

    assert retry.load_id == first["load_id"]  # the retry finishes the load that landed
    assert table(dataset) == [(0, "a"), (1, "a"), (2, "a"), (10, "a"), (11, "a")]
    assert [r["load_id"] for r in loads_of(dataset, "r1")] == [first["load_id"]]
    assert DeltaTable(f"{dataset}/{TABLE}").version() == 1  # nothing applied again

    # the task is cleared later, after its source was fixed: the run's rows are the new attempt's
    rerun = load(spark, dataset, rows([0, 1], "b"), run("r1", try_number=3))
    assert table(dataset) == [(0, "b"), (1, "b"), (10, "a"), (11, "a")]
    assert rerun.metrics["replaced_load_ids"] == [first["load_id"]]


def test_a_stateful_retry_after_another_run_recorded_its_first_attempt_returns_that_load(
    spark, dataset, monkeypatch
):
    stateful = Incremental("ts", initial_value="2024-01-01T00:00:00Z", allow_external_schedulers=False)
    commit_then_die(spark, dataset, monkeypatch, rows([0, 1, 2]), run("r1"), incremental=stateful)
    load(spark, dataset, rows([0, 1, 2, 3], day=10), run("r2"), incremental=stateful)
    (first,) = loads_of(dataset, "r1")

    retry = load(spark, dataset, rows([0, 1, 2, 3], day=10), run("r1", try_number=2), incremental=stateful)

    assert retry.load_id == first["load_id"]
    assert len(read_rows(f"{dataset}/{TABLE}")) == 7  # r1's three rows and r2's four, once each
    assert len(store.read_loads(dataset)) == 2


# -- item: clearing a successful task ----------------------------------------------------------------------


def test_clearing_a_successful_append_replaces_what_the_run_loaded(spark, dataset):
    load(spark, dataset, rows([1, 2]), run("before"))
    first = load(spark, dataset, rows([3, 4, 5]), run("r1"))
    load(spark, dataset, rows([6]), run("after"))

    # the task is cleared after its source was fixed: one row gone, one changed
    rerun = load(spark, dataset, [*rows([3]), *rows([4], "b")], run("r1", try_number=2))

    assert table(dataset) == [(1, "a"), (2, "a"), (3, "a"), (4, "b"), (6, "a")]
    assert rerun.metrics["replaced_load_ids"] == [first.load_id]
    assert [r["load_id"] for r in loads_of(dataset, "r1")] == [first.load_id, rerun.load_id]
    assert rerun.metrics.get("numTargetRowsDeleted") in (3, None)  # a writer that cannot count leaves it out

    # cleared again, the source now empty: the run's rows go
    load(spark, dataset, [], run("r1", try_number=3))
    assert table(dataset) == [(1, "a"), (2, "a"), (6, "a")]


def test_a_windowed_append_rerun_without_window_overwrite_replaces_the_run_rows(spark, dataset):
    arguments = {"incremental": INTERVAL, "data_interval": WEEK, "window_overwrite": False}
    load(spark, dataset, rows([1, 2]), scheduled("r1"), **arguments)
    load(spark, dataset, rows([1, 2, 3]), scheduled("r1", try_number=2), **arguments)
    assert table(dataset) == [(1, "a"), (2, "a"), (3, "a")]


@pytest.mark.parametrize("strategy", ["delete-insert", "upsert"])
def test_clearing_a_successful_merge_merges_the_batch_again(spark, dataset, strategy):
    arguments = {"write_disposition": {"disposition": "merge", "strategy": strategy}, "primary_key": "id"}
    load(spark, dataset, rows([1, 2]), run("r1"), **arguments)
    load(spark, dataset, rows([1, 2], "b"), run("r1", try_number=2), **arguments)
    assert table(dataset) == [(1, "b"), (2, "b")]


# -- item: mapped instances sharing a window ---------------------------------------------------------------


def test_mapped_instances_of_one_run_sharing_a_window_keep_each_other_rows(spark, dataset):
    arguments = {"incremental": INTERVAL, "data_interval": WEEK}
    load(spark, dataset, rows([1, 2]), scheduled("r1", map_index=0), **arguments)
    load(spark, dataset, rows([3, 4], "m1"), scheduled("r1", map_index=1), **arguments)
    assert table(dataset) == [(1, "a"), (2, "a"), (3, "m1"), (4, "m1")]

    # map index 0 cleared and re-run: its own rows are replaced, its sibling's stay
    load(spark, dataset, rows([1], "b"), scheduled("r1", try_number=2, map_index=0), **arguments)
    assert table(dataset) == [(1, "b"), (3, "m1"), (4, "m1")]

    # another run of the same window replaces every row of it
    load(spark, dataset, rows([7]), scheduled("r2"), **arguments)
    assert table(dataset) == [(7, "a")]


def test_clearing_a_successful_nested_append_replaces_the_run_rows_in_every_table(spark, dataset):
    def users(*pets):
        return [{"id": 1, "pets": [{"name": p} for p in pets]}]

    load(spark, dataset, users("rex"), run("r0"))
    load(spark, dataset, users("tom", "kit"), run("r1"))
    load(spark, dataset, users("ada"), run("r1", try_number=2))

    assert sorted(r["name"] for r in read_rows(f"{dataset}/{TABLE}__pets")) == ["ada", "rex"]
    assert len(read_rows(f"{dataset}/{TABLE}")) == 2


def test_a_mapped_replace_of_a_table_a_sibling_loaded_is_refused(spark, dataset):
    load(spark, dataset, rows([1, 2]), run("r1", map_index=0), write_disposition="replace")
    before = table(dataset)
    with pytest.raises(ConfigError, match="map index 0 of the same run") as error:
        load(spark, dataset, rows([3]), run("r1", map_index=1), write_disposition="replace")
    assert error.value.argument == "write_disposition" and "'append'" in str(error.value)
    assert table(dataset) == before
    # the same map index cleared and run again replaces the table, as replace does
    load(spark, dataset, rows([4]), run("r1", try_number=2, map_index=0), write_disposition="replace")
    assert table(dataset) == [(4, "a")]
