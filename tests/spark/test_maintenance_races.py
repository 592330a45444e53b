"""Maintenance runs of one table racing each other and the store: real threads on real tables. Two
OPTIMIZEs of one table at once keep every row once, and an OPTIMIZE of a state table is safe beside the
store's own compaction of it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import ConfigError, ConflictError
from airflow_provider_deltamerge.delta import state_table, store
from airflow_provider_deltamerge.delta.maintenance import maintain_table
from airflow_provider_deltamerge.delta.tombstones import read_tombstones, write_tombstones
from airflow_provider_deltamerge.model.cdc import SEQUENCE, tombstones_table

ROUNDS = 4
FILES = 30


def small_files(path: str, files: int = FILES, start: int = 0) -> list[int]:
    """`files` appends of two rows each: ids start .. start + 2 * files."""
    for n in range(files):
        first = start + 2 * n
        write_deltalake(path, pa.table({"id": [first, first + 1], "v": ["a", "b"]}), mode="append")
    return list(range(start, start + 2 * files))


def ids(path: str) -> list[int]:
    return sorted(DeltaTable(path).to_pyarrow_table(columns=["id"]).column("id").to_pylist())


def maintain_at_once(runs: int, **arguments) -> list[dict]:
    """`runs` maintain_table calls started together from their own threads."""
    start = threading.Barrier(runs)

    def run():
        start.wait()
        return maintain_table(**arguments)

    with ThreadPoolExecutor(max_workers=runs) as pool:
        return [f.result() for f in [pool.submit(run) for _ in range(runs)]]


def test_two_optimizes_of_one_table_at_once_keep_every_row_once(spark, dataset, writer_backend):
    path = f"{dataset}/items"
    expected = []
    for round_ in range(ROUNDS):  # each round compacts the small files the round before added
        expected += small_files(path, start=2 * FILES * round_)
        runs = maintain_at_once(
            2, dataset=dataset, table_name="items", backend=writer_backend or "auto", spark=spark
        )
        assert ids(path) == expected, f"round {round_}: {[r['numRemovedFiles'] for r in runs]}"
        assert sum(r["numRemovedFiles"] for r in runs) == FILES + (1 if round_ else 0)


def test_an_optimize_of_the_loads_table_is_safe_beside_the_stores_compaction(dataset, monkeypatch):
    path = f"{dataset}/{store.LOADS_TABLE}"
    for n in range(5):
        row = store._loads_row(store.LoadRecord(f"{n}.5", "p", "items", n, {}), store.datetime.now())
        write_deltalake(path, pa.Table.from_pylist([row], schema=store.LOADS_SCHEMA), mode="append")
    held = DeltaTable(path)  # a load's compaction, planned before the maintenance ran
    monkeypatch.setattr(state_table, "COMPACT_AT_FILES", 1)

    metrics = maintain_table(dataset, store.LOADS_TABLE, optimize=True)
    state_table.compact_if_fragmented(held)

    assert (metrics["numRemovedFiles"], metrics["numAddedFiles"]) == (5, 1)
    rows = DeltaTable(path).to_pyarrow_table(columns=["load_id"]).column("load_id").to_pylist()
    assert sorted(rows) == [f"{n}.5" for n in range(5)]


def test_an_optimize_by_another_tool_inside_the_stores_compaction_fails_the_compaction(dataset, monkeypatch):
    """An OPTIMIZE that does not go through the store (another tool's) commits after the compaction read
    the rows and before its overwrite: the overwrite must not be rebased over it, which keeps the rows
    the OPTIMIZE rewrote twice; it fails, and a later load compacts."""
    path = f"{dataset}/{store.LOADS_TABLE}"
    for n in range(5):
        row = store._loads_row(store.LoadRecord(f"{n}.5", "p", "items", n, {}), store.datetime.now())
        write_deltalake(path, pa.Table.from_pylist([row], schema=store.LOADS_SCHEMA), mode="append")
    read_rows = state_table.all_rows

    def rows_then_outside_optimize(table):
        rows = read_rows(table)
        DeltaTable(path).optimize.compact()
        return rows

    monkeypatch.setattr(state_table, "all_rows", rows_then_outside_optimize)
    monkeypatch.setattr(state_table, "COMPACT_AT_FILES", 1)

    state_table.compact_if_fragmented(DeltaTable(path))

    rows = DeltaTable(path).to_pyarrow_table(columns=["load_id"]).column("load_id").to_pylist()
    assert sorted(rows) == [f"{n}.5" for n in range(5)]


def test_optimizes_of_a_state_table_racing_row_writes_keep_one_row_per_load(dataset, monkeypatch):
    monkeypatch.setattr(state_table, "COMPACT_AT_FILES", 2)
    snapshot = store.StoreSnapshot(dataset, [], [])
    done = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        optimizing = pool.submit(maintain_until, done, dataset, store.LOADS_TABLE)
        for n in range(12):
            store.write_load_row(snapshot, store.LoadRecord(f"{n}.25", "p", "items", n, {}))
        done.set()
        optimizing.result()
    rows = DeltaTable(f"{dataset}/{store.LOADS_TABLE}").to_pyarrow_table(columns=["load_id"])
    assert sorted(rows.column("load_id").to_pylist()) == sorted(f"{n}.25" for n in range(12))


def maintain_until(done: threading.Event, dataset: str, table_name: str) -> int:
    """maintain_table's OPTIMIZE of the table, again and again until `done`; how many runs committed."""
    runs = 0
    while not done.is_set():
        try:
            maintain_table(dataset, table_name, optimize=True)
            runs += 1
        except Exception as exc:  # noqa: BLE001 - the table may not exist yet, or a write came first
            if "no Delta table" not in str(exc) and "lost to concurrent" not in str(exc):
                raise
    return runs


def test_compactions_of_a_companion_table_racing_its_loads_writes_lose_no_removal(dataset):
    """A table's tombstones (its kept events are written alike) are written by loads' delta-rs MERGEs,
    which remove rows too (expired tombstones, an earlier attempt's), while maintenance compacts them
    (an OPTIMIZE, claimed first): no removal is lost and no row is kept twice."""
    name = tombstones_table("items")
    path = f"{dataset}/{name}"
    done = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        maintaining = pool.submit(maintain_until, done, dataset, name)
        for n in range(16):
            deletes = pa.table({"id": [n, 100 + n], SEQUENCE: [n, n]})
            for _attempt in range(20):  # a load that lost to the compaction is retried
                try:  # each write expires every tombstone before it
                    write_tombstones(read_tombstones(path), deletes, f"{n}.5", datetime.now(timezone.utc))
                    break
                except ConflictError:
                    continue
        done.set()
        runs = maintaining.result()
    rows = DeltaTable(path).to_pyarrow_table(columns=["id"]).column("id").to_pylist()
    assert sorted(rows) == [15, 115], f"{runs} compactions"


def test_a_companion_tables_write_planned_before_its_compaction_keeps_each_row_once(dataset, monkeypatch):
    """A load's retry rewrites its tombstones, planned on the version before maintenance compacted them
    and committed after: deltalake refuses that MERGE over the OPTIMIZE of the files it read (a
    ConflictError, and the load is retried), so the compacted file never keeps a row it replaced."""
    from airflow_provider_deltamerge.delta import tombstones

    name = tombstones_table("items")
    path = f"{dataset}/{name}"
    long_ago = datetime(2000, 1, 1, tzinfo=timezone.utc)
    for load_id, key in (("1.5", 1), ("2.5", 2)):  # a file each
        write_tombstones(read_tombstones(path), pa.table({"id": [key], SEQUENCE: [key]}), load_id, long_ago)
    planned = DeltaTable(path).version()
    read = read_tombstones(path)
    assert maintain_table(dataset, name, optimize=True)["numRemovedFiles"] == 2
    monkeypatch.setattr(tombstones, "DeltaTable", lambda p, **kw: DeltaTable(p, version=planned, **kw))
    with pytest.raises(ConflictError, match="Retry the load"):  # load 1.5's retry, writing it again
        write_tombstones(read, pa.table({"id": [1], SEQUENCE: [1]}), "1.5", long_ago)
    monkeypatch.undo()
    rows = DeltaTable(path).to_pyarrow_table(columns=["id"]).column("id").to_pylist()
    assert sorted(rows) == [1, 2]


def test_a_state_table_is_not_z_ordered(dataset):
    store.write_load_row(store.StoreSnapshot(dataset, [], []), store.LoadRecord("1.5", "p", "items", 0, {}))
    version = DeltaTable(f"{dataset}/{store.LOADS_TABLE}").version()
    with pytest.raises(ConfigError, match="not Z-ordered") as refused:
        maintain_table(dataset, store.LOADS_TABLE, z_order_by="load_id")
    assert refused.value.argument == "z_order_by"
    assert DeltaTable(f"{dataset}/{store.LOADS_TABLE}").version() == version
