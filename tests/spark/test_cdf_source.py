"""A silver table built from a bronze table's change data feed (``{"delta_changes": ...}``): both real
Delta tables, the bronze one loaded by this project with the feed turned on through table_properties,
changed over several loads (inserts, updates, deletes); the silver one an upsert of the feed with
sequence_by="_commit_version". After each run silver holds bronze's rows, deleted keys as their delete
event (apply_as_deletes is not there yet); the cursor state is the last bronze version loaded.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import ChangeFeedError, Incremental, LoadRequest, run_load
from airflow_provider_deltamerge.delta import store
from airflow_provider_deltamerge.load import run_request
from tests import faults
from tests.helpers import read_rows

UPSERT = {"disposition": "merge", "strategy": "upsert"}
FEED = {"delta.enableChangeDataFeed": True}
PIPELINE = "silver"
pytestmark = pytest.mark.spark


def bronze(spark, dataset, rows, **arguments):
    """A load of the bronze table: an upsert on id, rows with deleted=True deleted, its feed on."""
    arguments.setdefault("table_properties", FEED)
    arguments.setdefault("write_disposition", UPSERT)
    arguments.setdefault("columns", {"deleted": {"data_type": "bool", "hard_delete": True}})
    return run_load(
        rows,
        spark=spark,
        dataset=f"{dataset}/bronze",
        table_name="customers",
        primary_key="id",
        pipeline_name="bronze",
        **arguments,
    )


def silver(spark, dataset, **arguments):
    arguments.setdefault("write_disposition", UPSERT)
    arguments.setdefault("primary_key", "id")
    arguments.setdefault("sequence_by", "_commit_version")
    arguments.setdefault("source", {"delta_changes": f"{dataset}/bronze/customers"})
    request = LoadRequest.create(
        dataset=f"{dataset}/silver",
        table_name="customers",
        pipeline_name=PIPELINE,
        **arguments,
    )
    return run_request(request, spark)


def bronze_rows(dataset) -> dict:
    return {r["id"]: r["name"] for r in read_rows(f"{dataset}/bronze/customers")}


def silver_rows(dataset) -> dict:
    """Silver's rows by id: (name, _change_type, _commit_version)."""
    rows = read_rows(f"{dataset}/silver/customers")
    return {r["id"]: (r["name"], r["_change_type"], r["_commit_version"]) for r in rows}


def live(rows: dict) -> dict:
    """Silver's rows but the deleted keys (their last event a delete), as bronze holds them."""
    return {key: name for key, (name, change, _) in rows.items() if change != "delete"}


def cursor(dataset) -> int | None:
    return store.latest_state(f"{dataset}/silver", PIPELINE, "customers")["incremental"]["_commit_version"][
        "last_value"
    ]


def commit_times(dataset) -> list[datetime]:
    """Bronze's commit timestamps by version."""
    history = sorted(DeltaTable(f"{dataset}/bronze/customers").history(), key=lambda h: h["version"])
    return [datetime.fromtimestamp(h["timestamp"] / 1000, timezone.utc) for h in history]


def test_silver_follows_bronze_load_by_load(spark, dataset):
    bronze(spark, dataset, [{"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}, {"id": 3, "name": "cid"}])
    first = silver(spark, dataset)
    assert live(silver_rows(dataset)) == bronze_rows(dataset)
    assert (first.window["start"], first.window["end"], first.window["stateful"]) == (0, 1, True)
    assert cursor(dataset) == 0

    bronze(spark, dataset, [{"id": 2, "name": "bob2"}, {"id": 4, "name": "dan"}])  # version 1
    bronze(spark, dataset, [{"id": 1, "deleted": True}, {"id": 3, "name": "cid2"}])  # version 2
    second = silver(spark, dataset)
    rows = silver_rows(dataset)
    assert live(rows) == bronze_rows(dataset) == {2: "bob2", 3: "cid2", 4: "dan"}
    assert rows[1] == ("ann", "delete", 2)  # the delete event arrived, with its _change_type
    assert (rows[2][1], rows[4][1]) == ("update_postimage", "insert")  # update preimages left out
    assert second.metrics["rows_extracted"] == 4 and second.metrics["numEventsApplied"] == 4
    assert (second.window["start"], second.window["end"]) == (1, 3)
    assert cursor(dataset) == 2

    bronze(spark, dataset, [{"id": 1, "name": "ann again"}, {"id": 4, "name": "dan2"}])  # version 3
    bronze(spark, dataset, [{"id": 4, "name": "dan3"}])  # version 4: the same key again
    third = silver(spark, dataset)
    assert live(silver_rows(dataset)) == bronze_rows(dataset)
    assert silver_rows(dataset)[4] == ("dan3", "update_postimage", 4)  # the newer of its two events
    assert third.metrics["numEventsSkippedStale"] == 1
    assert cursor(dataset) == 4

    state = store.latest_state(f"{dataset}/silver", PIPELINE, "customers")
    nothing = silver(spark, dataset)  # no new bronze version: nothing loaded, the cursor kept
    assert nothing.load_id is None and nothing.metrics["rows_extracted"] == 0
    assert store.latest_state(f"{dataset}/silver", PIPELINE, "customers") == state


def scheduled(start: datetime, end: datetime, try_number: int = 1) -> dict:
    """The arguments of a scheduled Airflow run of the silver task over [start, end)."""
    run_id = f"scheduled__{end.isoformat()}"
    return {
        "data_interval": (start, end),
        "run_context": {
            "dag_id": "silver",
            "task_id": "customers",
            "run_id": run_id,
            "try_number": try_number,
            "run_type": "scheduled",
        },
    }


def test_each_window_loads_its_commits_once_and_a_rerun_loads_them_again(spark, dataset):
    bronze(spark, dataset, [{"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}])
    bronze(spark, dataset, [{"id": 2, "name": "bob2"}])
    bronze(spark, dataset, [{"id": 1, "deleted": True}, {"id": 3, "name": "cid"}])
    bronze(spark, dataset, [{"id": 3, "name": "cid2"}])
    times = commit_times(dataset)
    week_one = (times[0] - timedelta(hours=1), times[2])  # versions 0 and 1
    week_two = (times[2], times[3] + timedelta(milliseconds=1))  # versions 2 and 3

    before = silver(spark, dataset, **scheduled(times[0] - timedelta(hours=2), week_one[0]))
    assert (before.window["start"], before.window["end"]) == (0, 0)  # no commit in it: recorded, empty
    first = silver(spark, dataset, **scheduled(*week_one))
    assert (first.window["start"], first.window["end"], first.window["rule"]) == (0, 2, "data-interval")
    assert live(silver_rows(dataset)) == {1: "ann", 2: "bob2"} and cursor(dataset) == 1
    second = silver(spark, dataset, **scheduled(*week_two))
    assert (second.window["start"], second.window["end"]) == (2, 4)
    assert live(silver_rows(dataset)) == bronze_rows(dataset) and cursor(dataset) == 3
    after_two = silver_rows(dataset)

    again = silver(spark, dataset, **scheduled(*week_one, try_number=2))  # the first week cleared, re-run
    assert (again.window["start"], again.window["end"]) == (0, 2)  # the same versions again
    assert again.metrics["rows_extracted"] == first.metrics["rows_extracted"]
    assert again.metrics["numEventsApplied"] == 0  # each of them older than silver's rows
    assert silver_rows(dataset) == after_two and cursor(dataset) == 3  # the cursor never goes back
    loads = [r for r in store.read_loads(f"{dataset}/silver") if r["table_name"] == "customers"]
    assert [(r["window_start"], r["window_end"]) for r in loads] == [
        ("0", "0"),
        ("0", "2"),
        ("2", "4"),
        ("0", "2"),
    ]


def test_a_retry_after_the_commit_finishes_the_load_without_loading_again(spark, dataset, monkeypatch):
    bronze(spark, dataset, [{"id": 1, "name": "ann"}])
    bronze(spark, dataset, [{"id": 1, "name": "ann2"}, {"id": 2, "name": "bob"}])
    times = commit_times(dataset)
    window = (times[0], times[1] + timedelta(milliseconds=1))
    monkeypatch.setenv(faults.FAIL_AT, "after_commit")
    with pytest.raises(faults.InjectedFault):
        silver(spark, dataset, **scheduled(*window))
    monkeypatch.delenv(faults.FAIL_AT)
    version = DeltaTable(f"{dataset}/silver/customers").version()
    retry = silver(spark, dataset, **scheduled(*window, try_number=2))
    assert DeltaTable(f"{dataset}/silver/customers").version() == version  # no second commit
    assert retry.table_version == version and (retry.window["start"], retry.window["end"]) == ("0", "2")
    assert live(silver_rows(dataset)) == bronze_rows(dataset) and cursor(dataset) == 1


def test_an_append_of_the_feed_keeps_every_event_once_across_a_rerun(spark, dataset):
    bronze(spark, dataset, [{"id": 1, "name": "ann"}])
    bronze(spark, dataset, [{"id": 1, "name": "ann2"}])
    times = commit_times(dataset)
    window = (times[0], times[1] + timedelta(milliseconds=1))
    for try_number in (1, 2):
        silver(spark, dataset, write_disposition="append", sequence_by=None, **scheduled(*window, try_number))
    events = sorted(
        (r["_commit_version"], r["_change_type"]) for r in read_rows(f"{dataset}/silver/customers")
    )
    assert events == [(0, "insert"), (1, "update_postimage")]


def test_a_table_without_its_feed_is_refused(spark, dataset):
    bronze(spark, dataset, [{"id": 1, "name": "ann"}], table_properties=None)
    with pytest.raises(
        ChangeFeedError, match=r"versions 0 to 0: its change data feed was off at version\(s\) 0"
    ):
        silver(spark, dataset)
    assert not DeltaTable.is_deltatable(f"{dataset}/silver/customers")


def advised_source(error: ChangeFeedError) -> dict:
    """The source spec a refusal says to go on with, exactly as its message writes it."""
    found = re.search(r"with the source (\{.*?\})", str(error))
    assert found is not None, str(error)
    return ast.literal_eval(found.group(1))


def test_versions_before_the_feed_was_turned_on_are_refused(spark, dataset):
    bronze(spark, dataset, [{"id": 1, "name": "ann"}], table_properties=None)  # version 0: no feed
    bronze(spark, dataset, [{"id": 2, "name": "bob"}])  # version 1 turns it on, version 2 loads
    with pytest.raises(ChangeFeedError, match=r"off at version\(s\) 0, ") as refused:
        silver(spark, dataset)
    assert not DeltaTable.is_deltatable(f"{dataset}/silver/customers")
    source = advised_source(refused.value)
    assert source == {"delta_changes": f"{dataset}/bronze/customers", "start_after_version": 0}
    info = silver(spark, dataset, source=source)
    assert (info.window["start"], info.window["end"]) == (1, 3)
    assert live(silver_rows(dataset)) == {2: "bob"}


def test_a_gap_in_the_feed_after_a_stored_cursor_is_passed_as_the_refusal_says(spark, dataset):
    """The feed off for some versions after silver loaded: the stored cursor would start inside the gap
    every run (an incremental's initial_value does not count once a cursor is stored); the source the
    refusal names starts after the gap, and later runs go on from the stored cursor without it."""
    bronze(spark, dataset, [{"id": 1, "name": "ann"}])  # version 0, feed on
    silver(spark, dataset)
    assert cursor(dataset) == 0
    off = {"delta.enableChangeDataFeed": False}
    bronze(spark, dataset, [{"id": 2, "name": "bob"}], table_properties=off)  # 1 turns it off, 2 loads
    bronze(spark, dataset, [{"id": 3, "name": "cid"}])  # 3 turns it on again, 4 loads
    version = DeltaTable(f"{dataset}/silver/customers").version()
    for _ in range(2):  # refused alike every run: the stored cursor starts in the gap
        with pytest.raises(ChangeFeedError, match=r"off at version\(s\) 1 to 2, ") as refused:
            silver(spark, dataset)
    assert DeltaTable(f"{dataset}/silver/customers").version() == version and cursor(dataset) == 0
    dead_end = Incremental("_commit_version", initial_value=2, range_start="open")
    with pytest.raises(ChangeFeedError, match=r"off at version\(s\) 1 to 2"):
        silver(spark, dataset, incremental=dead_end)  # the advice before: the stored cursor wins
    source = advised_source(refused.value)
    assert source == {"delta_changes": f"{dataset}/bronze/customers", "start_after_version": 2}
    info = silver(spark, dataset, source=source)
    assert (info.window["start"], info.window["end"]) == (3, 5)
    assert live(silver_rows(dataset)) == {1: "ann", 3: "cid"} and cursor(dataset) == 4
    bronze(spark, dataset, [{"id": 1, "name": "ann2"}])  # version 5
    kept = silver(spark, dataset, source=source)  # the option may stay: the cursor is past it
    assert (kept.window["start"], kept.window["end"]) == (5, 6)
    bronze(spark, dataset, [{"id": 3, "name": "cid2"}])  # version 6
    later = silver(spark, dataset)  # or go without it
    assert (later.window["start"], later.window["end"]) == (6, 7)
    assert live(silver_rows(dataset)) == {1: "ann2", 3: "cid2"} and cursor(dataset) == 6


def test_a_window_of_the_run_starts_after_the_version_the_source_names(spark, dataset):
    bronze(spark, dataset, [{"id": 1, "name": "ann"}])
    bronze(spark, dataset, [{"id": 2, "name": "bob"}])
    times = commit_times(dataset)
    source = {"delta_changes": f"{dataset}/bronze/customers", "start_after_version": 0}
    info = silver(spark, dataset, source=source, **scheduled(times[0], times[1] + timedelta(seconds=1)))
    assert (info.window["start"], info.window["end"]) == (1, 2) and live(silver_rows(dataset)) == {2: "bob"}


def _remove_change_files(path):
    shutil.rmtree(f"{path}/_change_data")  # what a VACUUM past their retention does


def _remove_a_log_entry(path):
    os.remove(f"{path}/_delta_log/{1:020d}.json")


@pytest.mark.parametrize(
    "lose, says",
    [
        (_remove_change_files, r"versions 1 to 2: its changes or its log cannot be read \(ArrowInvalid"),
        (_remove_a_log_entry, r"customers: its changes or its log cannot be read \(DeltaError"),
    ],
)
def test_changes_that_cannot_be_read_are_refused_and_the_refusal_says_the_way_on(spark, dataset, lose, says):
    bronze(spark, dataset, [{"id": 1, "name": "ann"}])
    silver(spark, dataset)
    bronze(spark, dataset, [{"id": 1, "name": "ann2"}, {"id": 2, "name": "bob"}])  # version 1: an update
    bronze(spark, dataset, [{"id": 2, "name": "bob2"}])  # version 2
    lose(f"{dataset}/bronze/customers")
    version = DeltaTable(f"{dataset}/silver/customers").version()
    with pytest.raises(ChangeFeedError, match=says) as refused:
        silver(spark, dataset)
    assert "Reload the target from the upstream's current rows" in str(refused.value)
    assert DeltaTable(f"{dataset}/silver/customers").version() == version and cursor(dataset) == 0
    if lose is _remove_change_files:  # the log is whole: the version to go on after is named
        source = advised_source(refused.value)
        assert source["start_after_version"] == 2
        bronze(spark, dataset, [{"id": 3, "name": "cid"}])  # version 3
        info = silver(spark, dataset, source=source)
        assert (info.window["start"], info.window["end"]) == (3, 4) and cursor(dataset) == 3


def test_versions_that_log_cleanup_removed_are_refused(spark, dataset):
    path = f"{dataset}/bronze/customers"
    config = {"delta.enableChangeDataFeed": "true", "delta.logRetentionDuration": "interval 0 seconds"}
    write_deltalake(path, pa.table({"id": [1], "name": ["ann"]}), configuration=config)
    for n in (2, 3):
        write_deltalake(path, pa.table({"id": [n], "name": [f"n{n}"]}), mode="append")
    table = DeltaTable(path)
    table.create_checkpoint()
    table.cleanup_metadata()  # versions 0 and 1 are gone from the log
    with pytest.raises(ChangeFeedError, match="versions 0 to 1 are no longer in its log"):
        silver(spark, dataset)
    info = silver(
        spark, dataset, incremental=Incremental("_commit_version", initial_value=1, range_start="open")
    )
    assert (info.window["start"], info.window["end"]) == (2, 3) and live(silver_rows(dataset)) == {3: "n3"}


def test_a_location_without_a_delta_table_is_refused(spark, dataset):
    with pytest.raises(ChangeFeedError, match="there is no Delta table at this location. Nothing was loaded"):
        silver(spark, dataset)


@pytest.mark.parametrize("disposition", ["merge", "replace"])
def test_a_commit_that_deletes_and_rewrites_a_key_is_one_change_of_it(spark, dataset, disposition):
    """bronze by delete-insert (merge's default) or replace: each rewritten key's delete and insert are
    in one commit; silver takes the row written, and a key the commit only deleted as deleted."""
    arguments = {"write_disposition": disposition, "columns": None}
    bronze(spark, dataset, [{"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}], **arguments)
    silver(spark, dataset)
    bronze(spark, dataset, [{"id": 2, "name": "bob2"}, {"id": 3, "name": "cid"}], **arguments)
    info = silver(spark, dataset)
    rows = silver_rows(dataset)
    assert live(rows) == bronze_rows(dataset)
    assert rows[2] == ("bob2", "insert", 1)
    assert (rows[1][1] == "delete") is (disposition == "replace")  # replace deleted the key bronze lacks
    assert info.metrics["rows_extracted"] == (3 if disposition == "replace" else 2)
