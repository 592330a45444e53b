"""Loads committing at the same time, from real threads: every load lands once, is recorded once in
`_dlt_loads`, and its record names the version of its own commit.

Concurrent loads of one table lose commits to one another, see each other's fresh commits before their
owners have recorded them, and race to write the same records. The first tests run many loads at once
as they come; the later ones force each recording race with a pause or a barrier, so that it happens
every run.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import Incremental, load, run_load
from airflow_provider_deltamerge.delta import arrow_stream, recovery, state_table, store
from airflow_provider_deltamerge.errors import ConflictError
from tests.faults import InjectedFault
from tests.helpers import read_rows

pytestmark = pytest.mark.spark

TABLE = "events"
PIPELINE = "concurrent"
WAIT_SECONDS = 120  # a bound on waiting for another thread, so that a broken test fails instead of hanging


def batch(first_id: int, size: int = 3) -> list[dict]:
    return [{"id": n, "batch": first_id} for n in range(first_id, first_id + size)]


def append(spark, dataset: str, rows: list[dict], run_context: dict | None = None):
    return run_load(
        rows,
        spark=spark,
        dataset=dataset,
        table_name=TABLE,
        pipeline_name=PIPELINE,
        write_disposition="append",
        run_context=run_context,
    )


def merge(spark, dataset: str, rows: list[dict], strategy: str, **hints):
    return run_load(
        rows,
        spark=spark,
        dataset=dataset,
        table_name=TABLE,
        pipeline_name=PIPELINE,
        write_disposition={"disposition": "merge", "strategy": strategy},
        **hints,
    )


def upsert(spark, dataset: str, rows: list[dict]):
    return merge(spark, dataset, rows, "upsert", primary_key="id")


def airflow_task(number: int) -> dict:
    """The run context of one task instance of a DAG run; each task is its own Delta txn stream."""
    return {"dag_id": "events", "task_id": f"append_{number}", "run_id": "manual__1", "run_type": "manual"}


def assert_recorded_once_at_own_commit(dataset: str, load_ids: list[str], rows_loaded: int) -> dict:
    """Each load landed in exactly one commit and has exactly one `_dlt_loads` row, naming that commit's
    version; the table holds every row once. Returns each load's commit version."""
    assert len(set(load_ids)) == len(load_ids), "two loads got one load id"
    commits = [c for c in store.read_commits(f"{dataset}/{TABLE}") if c.load_id is not None]
    assert Counter(c.load_id for c in commits) == Counter(load_ids), "a load did not land exactly once"
    version_of = {c.load_id: c.version for c in commits}

    records = store.read_loads(dataset)
    assert Counter(r["load_id"] for r in records) == Counter(load_ids), "a load is not recorded exactly once"
    assert {r["load_id"]: r["table_version"] for r in records} == version_of

    ids = [r["id"] for r in read_rows(f"{dataset}/{TABLE}")]
    assert sorted(ids) == list(range(rows_loaded)), "a row is missing or loaded twice"
    return version_of


def assert_each_load_recorded_once(dataset: str, infos: list, rows_loaded: int) -> None:
    version_of = assert_recorded_once_at_own_commit(dataset, [info.load_id for info in infos], rows_loaded)
    assert {info.load_id: info.table_version for info in infos} == version_of


def test_three_airflow_tasks_appending_three_times_each_record_every_load_once(spark, dataset):
    def task(number: int) -> list:
        first = number * 9
        return [append(spark, dataset, batch(first + 3 * i), airflow_task(number)) for i in range(3)]

    with ThreadPoolExecutor(max_workers=3) as pool:
        infos = [info for results in pool.map(task, range(3)) for info in results]

    assert len(infos) == 9
    assert_each_load_recorded_once(dataset, infos, rows_loaded=27)
    assert {r["task_id"] for r in store.read_loads(dataset)} == {"append_0", "append_1", "append_2"}


def test_windows_of_a_backfill_loaded_in_parallel_all_land_once(spark, dataset):
    """Mapped backfill tasks: one window each, all at once, on a table none of them finds created."""
    days = [datetime(2024, 1, 1, tzinfo=timezone.utc) + timedelta(days=d) for d in range(4)]
    events = [{"id": i, "ts": days[0] + timedelta(hours=6 * i)} for i in range(16)]

    def load_window(start):
        return run_load(
            events,
            spark=spark,
            dataset=dataset,
            table_name=TABLE,
            pipeline_name=PIPELINE,
            write_disposition="append",
            incremental=Incremental("ts"),
            data_interval=(start, start + timedelta(days=1)),
            run_context={
                "run_type": "backfill",
                "dag_id": "events",
                "task_id": "backfill",
                "run_id": f"backfill__{start.date()}",
            },
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        infos = list(pool.map(load_window, days))

    assert_each_load_recorded_once(dataset, infos, rows_loaded=16)
    assert sorted(info.table_version for info in infos) == [0, 1, 2, 3]
    records = store.read_loads(dataset)
    windows = sorted((r["window_start"], r["metrics"]["numTargetRowsInserted"]) for r in records)
    assert windows == [(day.isoformat(), 4) for day in days]


def test_loads_of_different_tables_at_once_all_get_their_load_records(spark, dataset):
    tables = [f"table_{i}" for i in range(4)]

    def load_table(table):
        return run_load([{"id": 1}], spark=spark, dataset=dataset, table_name=table, pipeline_name=PIPELINE)

    with ThreadPoolExecutor(max_workers=4) as pool:
        infos = list(pool.map(load_table, tables))

    records = store.read_loads(dataset)
    assert sorted(r["table_name"] for r in records) == tables
    assert sorted(r["load_id"] for r in records) == sorted(info.load_id for info in infos)
    assert all(r["table_version"] == 0 for r in records)


def test_twelve_appends_outside_airflow_at_once_all_land_once(spark, dataset, monkeypatch):
    """Appends of different loads never conflict: each is its own txn stream, so each commits at the
    first attempt."""
    first = append(spark, dataset, batch(0))  # the table exists; the twelve then race on one version
    commit_attempts = []
    checkpoint = load.checkpoint

    def count_commit_attempts(step: str) -> None:
        if step == "commit":
            commit_attempts.append(threading.current_thread().name)
        checkpoint(step)

    monkeypatch.setattr(load, "checkpoint", count_commit_attempts)
    with ThreadPoolExecutor(max_workers=12) as pool:
        infos = list(pool.map(lambda n: append(spark, dataset, batch(3 * n)), range(1, 13)))

    assert first.table_version == 0
    assert_each_load_recorded_once(dataset, [first, *infos], rows_loaded=39)
    assert len(commit_attempts) == 12, "appends of different loads conflicted with one another"


def test_loads_recording_themselves_while_the_state_tables_are_compacted_are_each_recorded_once(
    spark, dataset, monkeypatch
):
    """With the state tables compacted after nearly every row (state_table.COMPACT_AT_FILES), twelve loads
    recording at once still leave one row each: a compaction and a row write that overlap never both
    keep a copy of the same row."""
    monkeypatch.setattr(state_table, "COMPACT_AT_FILES", 2)
    first = append(spark, dataset, batch(0))
    with ThreadPoolExecutor(max_workers=12) as pool:
        infos = list(pool.map(lambda n: append(spark, dataset, batch(3 * n)), range(1, 13)))

    assert_each_load_recorded_once(dataset, [first, *infos], rows_loaded=39)
    files = len(DeltaTable(f"{dataset}/{store.LOADS_TABLE}").file_uris())
    assert files < 13, "no compaction landed: each of the 13 rows is still a file of its own"


def test_twelve_upserts_at_once_are_planned_again_until_all_land(spark, dataset):
    """Merges conflict with one another (each reads the rows it may update), so all but one of each
    round are planned again on the new version: twelve at once need more than a few attempts."""
    first = upsert(spark, dataset, batch(0))

    with ThreadPoolExecutor(max_workers=12) as pool:
        infos = list(pool.map(lambda n: upsert(spark, dataset, batch(3 * n)), range(1, 13)))

    assert_each_load_recorded_once(dataset, [first, *infos], rows_loaded=39)


def test_two_upserts_bringing_the_same_new_keys_at_once_leave_each_key_once(spark, dataset, monkeypatch):
    """Both loads plan on one version where their keys are new, so each would insert them. A commit that
    only added its rows would let both land, and the keys would be there twice: the merge reads the rows
    it may update, so the second commit conflicts, and that load is planned again and updates instead."""
    upsert(spark, dataset, batch(0))
    both_planned, waited = threading.Barrier(2), set()

    def commit_once_both_planned(step: str) -> None:
        if step == "commit" and threading.current_thread().name not in waited:  # the first attempt only
            waited.add(threading.current_thread().name)
            both_planned.wait(WAIT_SECONDS)

    def new_keys_tagged(tag: int):
        return upsert(spark, dataset, [{"id": n, "batch": tag} for n in (3, 4, 5)])

    monkeypatch.setattr(load, "checkpoint", commit_once_both_planned)
    with ThreadPoolExecutor(max_workers=2) as pool:
        infos = list(pool.map(new_keys_tagged, (1, 2)))

    first, second = sorted(infos, key=lambda info: info.table_version)
    assert (first.table_version, second.table_version) == (1, 2)
    assert (first.metrics["numTargetRowsInserted"], first.metrics["numTargetRowsUpdated"]) == (3, 0)
    assert (second.metrics["numTargetRowsInserted"], second.metrics["numTargetRowsUpdated"]) == (0, 3)
    rows = read_rows(f"{dataset}/{TABLE}")
    assert sorted(r["id"] for r in rows) == list(range(6)), "a key was inserted twice"
    second_tag = next(tag for tag, info in zip((1, 2), infos, strict=True) if info is second)
    assert {r["batch"] for r in rows if r["id"] >= 3} == {second_tag}


def test_a_load_recorded_by_another_while_it_records_itself_is_recorded_once(spark, dataset, monkeypatch):
    committed, recorded_by_the_other = threading.Event(), threading.Event()

    def pause_after_commit(step: str) -> None:
        if step == "after_commit" and threading.current_thread().name.startswith("paused"):
            committed.set()
            assert recorded_by_the_other.wait(WAIT_SECONDS)

    monkeypatch.setattr(load, "checkpoint", pause_after_commit)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="paused") as pool:
        paused = pool.submit(append, spark, dataset, batch(0), airflow_task(1))
        assert committed.wait(WAIT_SECONDS)
        other = append(spark, dataset, batch(3), airflow_task(2))  # finds the paused load's commit
        assert [r["task_id"] for r in store.read_loads(dataset)] == ["append_1", "append_2"]
        recorded_by_the_other.set()
        first = paused.result(WAIT_SECONDS)  # now records itself

    assert_each_load_recorded_once(dataset, [first, other], rows_loaded=6)
    own_record = store.read_load(dataset, first.load_id)
    assert own_record["metrics"] == first.metrics  # the load's own record, as the load reported it


def test_loads_finding_one_unrecorded_commit_at_once_record_it_once(spark, dataset, monkeypatch):
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", "after_commit")  # the job stops right after its commit
    with pytest.raises(InjectedFault):
        append(spark, dataset, batch(0))
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")
    stopped = store.read_commits(f"{dataset}/{TABLE}")[0].load_id
    assert stopped is not None and store.read_loads(dataset) == []

    # Three loads that all find the commit unrecorded, and record it only once all three have found it.
    all_found_it = threading.Barrier(3)
    record_from_commit = recovery.record_from_commit

    def record_once_all_found_it(commit):
        if commit.load_id == stopped:
            all_found_it.wait(WAIT_SECONDS)
        return record_from_commit(commit)

    monkeypatch.setattr(recovery, "record_from_commit", record_once_all_found_it)
    with ThreadPoolExecutor(max_workers=3) as pool:
        infos = list(pool.map(lambda n: append(spark, dataset, batch(3 * n)), range(1, 4)))

    version_of = assert_recorded_once_at_own_commit(
        dataset, [stopped, *(info.load_id for info in infos)], rows_loaded=12
    )
    assert version_of[stopped] == 0
    assert all(info.table_version == version_of[info.load_id] for info in infos)


def test_a_conflict_reported_after_the_commit_landed_returns_that_commit(spark, dataset, monkeypatch):
    """A writer can report a conflict after its commit landed (the commit was not yet seen in a log that
    kept changing): the load is planned again, finds its own commit applied, and returns it."""
    append(spark, dataset, batch(0))
    reported = []

    def conflict_after_the_first_commit(step: str) -> None:
        if step == "after_commit" and not reported:
            reported.append(step)
            raise ConflictError("another writer changed the table while this load's commit was checked")

    monkeypatch.setattr(load, "checkpoint", conflict_after_the_first_commit)
    info = append(spark, dataset, batch(3))

    assert reported and info.loaded
    first = store.read_loads(dataset)[0]["load_id"]
    version_of = assert_recorded_once_at_own_commit(dataset, [first, info.load_id], rows_loaded=6)
    assert info.table_version == version_of[info.load_id] == 1


def load_days_1_and_5_while_day_3_is_loaded(spark, dataset, monkeypatch, strategy: str, **keys):
    """Into a table partitioned by day with 3 rows a day (days 1-5), a batch of days 1 and 5, during whose
    commit a load into day 3 lands first. The batch is streamed into delta-rs where that writer runs,
    whose merge then reads only what its condition bounds. (its LoadInfo, commit steps taken, rows)"""

    def load_days(rows: list[dict]):
        return merge(spark, dataset, rows, strategy, columns={"day": {"partition": True}}, **keys)

    load_days([{"day": day, "id": n, "v": "old"} for day in range(1, 6) for n in range(3)])
    monkeypatch.setattr(arrow_stream, "IN_MEMORY_BYTES", 0)
    commits = []

    def day_3_loaded_meanwhile(step: str) -> None:
        if step == "commit":
            commits.append(step)
            if len(commits) == 1:  # the batch of days 1 and 5 is planned: day 3 commits first
                load_days([{"day": 3, "id": 5, "v": "meanwhile"}])

    monkeypatch.setattr(load, "checkpoint", day_3_loaded_meanwhile)
    info = load_days([{"day": 1, "id": 0, "v": "new"}, {"day": 5, "id": 7, "v": "new"}])
    rows = {(r["day"], r["id"]): r["v"] for r in read_rows(f"{dataset}/{TABLE}")}
    return info, len(commits), rows


def test_an_upsert_naming_its_partitions_lands_beside_a_load_into_a_partition_between(
    spark, dataset, monkeypatch
):
    """Keyed by day and id, the batch's merge condition names days 1 and 5 instead of spanning days 1-5
    (collected by staging: the days are read from its Arrow data), so it neither reads day 3 nor
    conflicts with the load into it: it lands on its first attempt."""
    info, commit_steps, rows = load_days_1_and_5_while_day_3_is_loaded(
        spark, dataset, monkeypatch, "upsert", primary_key=("day", "id")
    )

    assert commit_steps == 2, "the batch of days 1 and 5 was planned again after the load into day 3"
    assert info.table_version == 2
    assert (info.metrics["numTargetRowsUpdated"], info.metrics["numTargetRowsInserted"]) == (1, 1)
    assert len(rows) == 17
    assert (rows[(1, 0)], rows[(5, 7)], rows[(3, 5)], rows[(3, 0)]) == ("new", "new", "meanwhile", "old")


def test_a_delete_insert_of_whole_partitions_lands_beside_a_load_into_a_partition_between(
    spark, dataset, monkeypatch
):
    """Replacing days 1 and 5 by merge key (staged in Spark: the days come from a job over the staged
    batch), the merge condition names the two days, so the load into day 3 does not make it plan again."""
    info, commit_steps, rows = load_days_1_and_5_while_day_3_is_loaded(
        spark, dataset, monkeypatch, "delete-insert", merge_key="day"
    )

    assert commit_steps == 2, "the batch of days 1 and 5 was planned again after the load into day 3"
    assert info.table_version == 2
    assert (info.metrics["numTargetRowsDeleted"], info.metrics["numTargetRowsInserted"]) == (6, 2)
    assert sorted(rows) == [(1, 0), (2, 0), (2, 1), (2, 2), (3, 5), (4, 0), (4, 1), (4, 2), (5, 7)]
    assert (rows[(1, 0)], rows[(3, 5)], rows[(5, 7)]) == ("new", "meanwhile", "new")


# -- an OPTIMIZE landing between a load's plan and its commit -----------------------------------------

SEED = [[{"id": n, "day": 1 + n // 3, "v": "old"} for n in range(3 * b, 3 * b + 3)] for b in range(2)]
DAY_ONE = (datetime(2024, 1, 1, tzinfo=timezone.utc), datetime(2024, 1, 2, tzinfo=timezone.utc))


def stamped(rows: list[dict]) -> list[dict]:
    """Rows with a timestamp inside their day (day 1 is 2024-01-01), for windowed loads."""
    return [{**r, "ts": DAY_ONE[0] + timedelta(days=r["day"] - 1, hours=r["id"])} for r in rows]


RACING_LOADS = {  # disposition: (arguments, batch, the ids and values the table must hold after it)
    "replace": ({"write_disposition": "replace"}, [{"id": 9, "day": 1, "v": "new"}], {9: "new"}),
    "upsert": (
        {"write_disposition": {"disposition": "merge", "strategy": "upsert"}, "primary_key": "id"},
        [{"id": 0, "day": 1, "v": "new"}, {"id": 9, "day": 1, "v": "new"}],
        {0: "new", 9: "new"} | {n: "old" for n in range(1, 6)},
    ),
    "delete-insert": (
        {"write_disposition": {"disposition": "merge", "strategy": "delete-insert"}, "merge_key": "day"},
        [{"id": 9, "day": 1, "v": "new"}],
        {9: "new"} | {n: "old" for n in range(3, 6)},
    ),
    "delete-insert by both keys": (  # its source holds the target's keys of day 1 and of the batch's ids
        {
            "write_disposition": {"disposition": "merge", "strategy": "delete-insert"},
            "primary_key": "id",
            "merge_key": "day",
        },
        [{"id": 9, "day": 1, "v": "new"}],
        {9: "new"} | {n: "old" for n in range(3, 6)},
    ),
    "insert-only": (
        {"write_disposition": {"disposition": "merge", "strategy": "insert-only"}, "primary_key": "id"},
        [{"id": 0, "day": 1, "v": "new"}, {"id": 9, "day": 1, "v": "new"}],
        {9: "new"} | {n: "old" for n in range(6)},
    ),
    "scd2": (  # full extracts: the batch keeps every row and brings one more
        {"write_disposition": {"disposition": "merge", "strategy": "scd2"}},
        [*SEED[0], *SEED[1], {"id": 9, "day": 1, "v": "new"}],
        {9: "new"} | {n: "old" for n in range(6)},
    ),
    "window overwrite": (
        {"write_disposition": "append", "incremental": Incremental("ts"), "data_interval": DAY_ONE},
        [{"id": 9, "day": 1, "v": "new"}],
        {9: "new"} | {n: "old" for n in range(3, 6)},
    ),
}


# Merges whose source holds no rows read from the table: with delta-spark they run on the table as Delta
# finds it, and only Delta's conflict check can send them back to be planned again.
PLAIN_MERGES = {"upsert", "delete-insert", "insert-only", "scd2"}


@pytest.mark.parametrize("disposition", list(RACING_LOADS))
def test_a_load_planned_before_an_optimize_commits_on_the_optimized_table(
    spark, dataset, monkeypatch, disposition
):
    """Two loads leave two files; an OPTIMIZE rewrites them into one after the load planned on them and
    before it commits. A commit made as planned would remove files that are gone and keep the
    OPTIMIZE's file with every old row in it: the load is planned again on the optimized table instead.
    With delta-spark, a merge whose source holds no rows read from the table runs on the table as Delta
    finds it (Delta's own conflict check decides, DATASET.md): it lands at its first attempt, on the
    optimized table."""
    from airflow_provider_deltamerge.delta.maintenance import maintain_table

    arguments, rows, expected = RACING_LOADS[disposition]
    # an scd2 table is loaded by scd2 only: two full extracts, the second bringing three more rows
    seeds, seeded_by = (SEED, {"write_disposition": "append"})
    if disposition == "scd2":
        seeds, seeded_by = ([SEED[0], SEED[0] + SEED[1]], arguments)
    for seed in seeds:  # delta-rs adds a file for the second seed (Delta's MERGE rewrites the first)
        seeded = {**seeded_by, "backend": "delta-rs"}
        run_load(stamped(seed), spark=spark, dataset=dataset, table_name=TABLE, **seeded)
    optimized, commit_steps = [], []

    def optimize_before_the_first_commit(step: str) -> None:
        if step == "commit":
            commit_steps.append(step)
        if step == "commit" and not optimized:
            optimized.append(maintain_table(dataset, TABLE, optimize=True, spark=spark))

    monkeypatch.setattr(load, "checkpoint", optimize_before_the_first_commit)
    info = run_load(stamped(rows), spark=spark, dataset=dataset, table_name=TABLE, **arguments)

    [metrics] = optimized
    assert metrics["numRemovedFiles"] == 2, "the OPTIMIZE did not rewrite the table's files"
    assert {r["id"]: r["v"] for r in read_rows(f"{dataset}/{TABLE}")} == expected
    assert info.table_version == metrics["table_version"] + 1
    left_to_delta = info.metrics["writer"] == "delta-spark" and disposition in PLAIN_MERGES
    assert len(commit_steps) == (1 if left_to_delta else 2), "planned again where the writer needs it"
    assert store.read_load(dataset, info.load_id)["table_version"] == info.table_version


@pytest.mark.writer_independent
def test_an_optimize_between_the_read_check_and_the_commit_fails_the_delta_rs_commit(
    spark, dataset, monkeypatch
):
    """delta-rs: the check of what a replace read and its commit are two steps. An OPTIMIZE landing
    between them takes the version the commit was checked for, so the commit fails instead of being
    rebased over the OPTIMIZE (which would keep every old row), and the load is planned again."""
    from airflow_provider_deltamerge.delta import read_check
    from airflow_provider_deltamerge.delta.maintenance import maintain_table

    for seed in SEED:
        run_load(seed, spark=spark, dataset=dataset, table_name=TABLE, backend="delta-rs")
    check, optimized = read_check.require_reads_current, []

    def optimize_after_the_first_check(*args, **kwargs):
        check(*args, **kwargs)
        if not optimized:
            optimized.append(maintain_table(dataset, TABLE, optimize=True, backend="delta-rs"))

    monkeypatch.setattr(read_check, "require_reads_current", optimize_after_the_first_check)
    rows = [{"id": 9, "day": 1, "v": "new"}]
    info = run_load(
        rows, spark=spark, dataset=dataset, table_name=TABLE, write_disposition="replace", backend="delta-rs"
    )

    assert {r["id"]: r["v"] for r in read_rows(f"{dataset}/{TABLE}")} == {9: "new"}
    assert info.table_version == optimized[0]["table_version"] + 1
