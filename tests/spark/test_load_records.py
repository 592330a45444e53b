"""Load ids, system columns, one commit per load, `_dlt_loads`, `_dlt_pipeline_state` (dlt A, K-4, DI-10)."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timezone

from deltalake import DeltaTable

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.delta import state_table, store
from tests.helpers import read_rows, table_version

LOAD_ID = re.compile(r"^\d{10}\.\d{6}$")  # epoch seconds with microseconds (LD-1)
METRIC_NAMES = {
    "numSourceRows",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsDeleted",
    "load_id",
    "table",
    "table_version",
    "rows_extracted",
    "rows_staged",
    "writer",
}


def load(spark, dataset, data, **arguments):
    arguments.setdefault("table_name", "tickets")
    arguments.setdefault("pipeline_name", "helpdesk")
    return run_load(data, spark=spark, dataset=dataset, **arguments)


def loads_table(dataset):
    rows = DeltaTable(f"{dataset}/_dlt_loads").to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: float(r["load_id"]))


def raw_rows(path):
    return DeltaTable(path).to_pyarrow_table().to_pylist()


def test_each_load_has_a_new_increasing_id_one_commit_and_one_loads_row(spark, dataset):
    path = f"{dataset}/tickets"
    started = datetime.now(timezone.utc)
    runs = [
        ("append", {}, [{"id": 1, "s": "open"}, {"id": 2, "s": "open"}]),
        ("merge", {"primary_key": "id"}, [{"id": 2, "s": "closed"}, {"id": 3, "s": "open"}]),
        ({"disposition": "merge", "strategy": "upsert"}, {"primary_key": "id"}, [{"id": 3, "s": "closed"}]),
        ("replace", {}, [{"id": 9, "s": "open"}]),
    ]
    infos = []
    for version, (disposition, keys, batch) in enumerate(runs):
        info = load(spark, dataset, batch, write_disposition=disposition, **keys)
        infos.append(info)
        assert LOAD_ID.match(info.load_id), info.load_id
        assert table_version(path) == version == info.table_version  # exactly one commit per load
        (commit,) = store.read_commits(path, 1)
        assert (commit.load_id, commit.version) == (info.load_id, info.table_version)
        assert {r["_dlt_load_id"] for r in raw_rows(path) if r["id"] in {b["id"] for b in batch}} == {
            info.load_id
        }
        assert METRIC_NAMES <= set(info.metrics)
        assert json.loads(json.dumps(info.metrics)) == info.metrics  # JSON only
    ids = [i.load_id for i in infos]
    assert [float(i) for i in ids] == sorted({float(i) for i in ids})  # strictly increasing
    assert read_rows(path) == [{"id": 9, "s": "open"}]

    recorded = loads_table(dataset)
    assert [r["load_id"] for r in recorded] == ids
    for row, info in zip(recorded, infos, strict=True):
        assert (row["schema_name"], row["status"], row["table_name"]) == ("helpdesk", 0, "tickets")
        assert row["table_version"] == info.table_version
        assert json.loads(row["metrics"]) == info.metrics
        assert started <= row["inserted_at"] <= datetime.now(timezone.utc)
        assert row["dag_id"] is None and row["run_id"] is None  # not started from Airflow
    changes = [json.loads(r["metrics"]) for r in recorded]
    assert [
        (m["numTargetRowsInserted"], m["numTargetRowsUpdated"], m["numTargetRowsDeleted"]) for m in changes
    ] == [
        (2, 0, 0),
        (2, 0, 1),
        (0, 1, 0),
        (1, 0, 3),
    ]


def test_load_ids_stay_increasing_after_a_newer_recorded_load(spark, dataset):
    """Ids grow past the newest recorded load of the dataset, even one stamped by a clock ahead of ours."""
    future = f"{time.time() + 3600:.6f}"
    store.record_load(
        store.StoreSnapshot.read(dataset), store.LoadRecord(future, "other", "elsewhere", 0, {})
    )
    info = load(spark, dataset, [{"id": 1}], write_disposition="append")
    assert float(info.load_id) > float(future)
    assert LOAD_ID.match(info.load_id)
    assert [r["load_id"] for r in loads_table(dataset)] == [future, info.load_id]


def test_row_ids_are_random_per_row_except_for_upsert_and_insert_only(spark, dataset):
    same_rows = [{"id": 1, "v": "x"}, {"id": 1, "v": "x"}]
    load(spark, dataset, same_rows, write_disposition="append", table_name="appended")
    load(spark, dataset, same_rows, write_disposition="append", table_name="appended")
    appended = raw_rows(f"{dataset}/appended")
    assert len({r["_dlt_id"] for r in appended}) == 4  # identical rows, every load: distinct ids
    assert all(isinstance(r["_dlt_id"], str) and r["_dlt_id"] for r in appended)

    load(spark, dataset, [{"id": 1, "v": "x"}], write_disposition="merge", primary_key="id", table_name="di")
    first = raw_rows(f"{dataset}/di")[0]["_dlt_id"]
    load(spark, dataset, [{"id": 1, "v": "x"}], write_disposition="merge", primary_key="id", table_name="di")
    assert raw_rows(f"{dataset}/di")[0]["_dlt_id"] != first  # a replaced row gets a new id (DI-10)

    upsert = {"disposition": "merge", "strategy": "upsert"}
    load(
        spark,
        dataset,
        [{"a": 1, "b": "p"}, {"a": 2, "b": "p"}],
        write_disposition=upsert,
        primary_key=["a", "b"],
        table_name="up",
    )
    ids = {(r["a"], r["b"]): r["_dlt_id"] for r in raw_rows(f"{dataset}/up")}
    load(
        spark,
        dataset,
        [{"a": 2, "b": "p", "c": 1}],
        write_disposition=upsert,
        primary_key=["a", "b"],
        table_name="up",
    )
    again = {(r["a"], r["b"]): r["_dlt_id"] for r in raw_rows(f"{dataset}/up")}
    assert again == ids and ids[(1, "p")] != ids[(2, "p")]


def test_loads_without_cursor_state_write_no_pipeline_state_rows(spark, dataset):
    load(spark, dataset, [{"id": 1}], write_disposition="merge", primary_key="id")
    load(spark, dataset, [{"id": 2}], write_disposition="merge", primary_key="id")
    assert len(loads_table(dataset)) == 2
    # the pipeline state did not change, so no package carries a state row (LD-7)
    path = f"{dataset}/_dlt_pipeline_state"
    assert not DeltaTable.is_deltatable(path) or DeltaTable(path).to_pyarrow_table().num_rows == 0
    assert store.latest_state(dataset, "helpdesk", "tickets") is None


def test_pipeline_state_newest_completed_load_wins(dataset):
    """The state tables on their own (no Spark): append-only, newest completed row wins (LD-7)."""

    def record(load_id, cursor, write=store.record_load):
        write(
            store.StoreSnapshot.read(dataset),
            store.LoadRecord(load_id, "crm", "users", 1, {}, state={"last_value": cursor}),
        )

    record("1700000000.000001", 10)
    record("1700000000.000003", 30)
    record("1700000000.000002", 20)  # recorded late, but older
    record("1700000000.000004", 40, write=store.write_state_row)  # state row written, load never completed
    assert store.latest_state(dataset, "crm", "users") == {"last_value": 30}
    assert store.latest_state(dataset, "crm", "other") is None
    states = DeltaTable(f"{dataset}/_dlt_pipeline_state").to_pyarrow_table().to_pylist()
    assert sorted(r["_dlt_load_id"] for r in states) == [f"1700000000.00000{i}" for i in (1, 2, 3, 4)]
    assert all(r["pipeline_name"] == "crm" and r["version_hash"] for r in states)
    record("1700000000.000004", 40)  # completing it later does not write its state row twice
    assert DeltaTable(f"{dataset}/_dlt_pipeline_state").to_pyarrow_table().num_rows == 4
    assert store.latest_state(dataset, "crm", "users") == {"last_value": 40}
    assert len(loads_table(dataset)) == 4


def test_the_state_tables_are_compacted_once_their_rows_fill_many_files(dataset, monkeypatch):
    """Each recorded row is a file of its own and every load reads both tables whole: past
    state_table.COMPACT_AT_FILES files, the writer of a row compacts the table into one, and every row reads
    as it was written; a row replaced later is replaced inside the compacted file."""
    monkeypatch.setattr(state_table, "COMPACT_AT_FILES", 3)

    def record(n: int, metrics: dict) -> store.LoadRecord:
        return store.LoadRecord(f"1700000000.00000{n}", "crm", "users", n, metrics, state={"last_value": n})

    for n in range(1, 8):
        store.record_load(store.StoreSnapshot.read(dataset), record(n, {"rows": n}))

    for table in ("_dlt_loads", "_dlt_pipeline_state"):
        assert len(DeltaTable(f"{dataset}/{table}").file_uris()) <= 3, f"{table} was not compacted"
    expected = [(f"1700000000.00000{n}", n, {"rows": n}) for n in range(1, 8)]
    assert [(r["load_id"], r["table_version"], r["metrics"]) for r in store.read_loads(dataset)] == expected
    assert store.latest_state(dataset, "crm", "users") == {"last_value": 7}

    store.write_load_row(store.StoreSnapshot(dataset, [], []), record(2, {"rows": 20}))  # its own record
    assert [r["metrics"] for r in store.read_loads(dataset)] == [
        {"rows": 20 if n == 2 else n} for n in range(1, 8)
    ]
