"""Table maintenance on tables that loads wrote: compaction, Z-order, VACUUM's retention rule,
checkpoints, and loads racing an OPTIMIZE of the same table without losing a commit."""

from __future__ import annotations

import inspect
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
import pytest
from delta.tables import DeltaOptimizeBuilder
from delta.tables import DeltaTable as SparkDeltaTable
from deltalake import DeltaTable

from airflow_provider_deltamerge import ConfigError, run_load
from airflow_provider_deltamerge.delta.maintenance import (
    MaintenanceOptions,
    maintain_table,
    optimize_metrics,
    retention_hours_of,
)
from airflow_provider_deltamerge.delta.store import read_loads
from tests.helpers import ordered, read_rows, table_version

BATCHES = [[{"id": 10 * b + i, "v": f"v{b}.{i}"} for i in range(3)] for b in range(4)]
ALL_ROWS = ordered([row for batch in BATCHES for row in batch])


def load(spark, dataset, rows, **arguments):
    arguments.setdefault("write_disposition", "merge")
    arguments.setdefault("primary_key", "id")
    return run_load(rows, spark=spark, dataset=dataset, table_name="items", pipeline_name="shop", **arguments)


@pytest.fixture
def items(spark, dataset):
    """A table of four loads, one data file each: what compaction is for."""
    for batch in BATCHES:
        load(spark, dataset, batch, write_disposition="append")
    return f"{dataset}/items"


def data_files(path: str) -> dict[str, int]:
    actions = DeltaTable(path).get_add_actions(flatten=True)
    return dict(
        zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True)
    )


def files_on_disk(path: str) -> set[str]:
    return {f for f in os.listdir(path) if f.endswith(".parquet")}


def maintain(spark, dataset, writer_backend, **options):
    return maintain_table(dataset, "items", backend=writer_backend or "auto", spark=spark, **options)


def test_compaction_rewrites_the_small_files_into_one_and_keeps_every_row(
    spark, dataset, items, writer_backend
):
    before, version = data_files(items), table_version(items)
    metrics = maintain(spark, dataset, writer_backend)
    assert read_rows(items) == ALL_ROWS
    assert metrics["operations"] == ["compaction"]
    assert metrics["numRemovedFiles"] == len(before) >= len(BATCHES)
    assert metrics["numRemovedBytes"] == sum(before.values())
    assert metrics["numAddedFiles"] == len(data_files(items)) == 1
    assert metrics["numAddedBytes"] == sum(data_files(items).values())
    assert metrics["table_version"] == table_version(items) > version  # delta-rs claims the table first
    assert DeltaTable(items).history(1)[0]["operation"] == "OPTIMIZE"
    assert metrics["table"] == "items" and metrics["writer"] == (writer_backend or metrics["writer"])


def id_ranges(path: str) -> list[tuple[int, int]]:
    """(min, max) of `id` in each data file, in order."""
    files = DeltaTable(path).file_uris()
    ids = [pq.read_table(f, columns=["id"]).column("id").to_pylist() for f in files]
    return sorted((min(i), max(i)) for i in ids)


def overlapping(ranges: list[tuple[int, int]]) -> bool:
    return any(later[0] <= earlier[1] for earlier, later in zip(ranges, ranges[1:], strict=False))


def test_a_child_table_is_reached_by_its_stored_name_under_snake_case(spark, dataset, writer_backend):
    """snake_case contracts `__` in a name, but not between a child table's parts, as loads name them."""
    for b in range(2):
        rows = [{"id": b, "Tags": [{"Label": f"t{b}"}]}]
        run_load(rows, spark=spark, dataset=dataset, table_name="Orders", write_disposition="append")
    done = maintain_table(dataset, "Orders__Tags", backend=writer_backend or "auto", spark=spark)
    assert done["table"] == "orders__tags" and done["numRemovedFiles"] == 2
    assert sorted(r["label"] for r in read_rows(f"{dataset}/orders__tags")) == ["t0", "t1"]


def test_z_order_clusters_files_by_the_column_named_in_source_spelling(spark, dataset, items, writer_backend):
    load(spark, dataset, [{"id": 5, "v": "late"}, {"id": 35, "v": "later"}])  # a file spanning the others
    assert overlapping(id_ranges(items))
    files = len(data_files(items))
    metrics = maintain(spark, dataset, writer_backend, z_order_by="ID")
    assert metrics["operations"] == ["z-order"] and metrics["numRemovedFiles"] == files
    assert not overlapping(id_ranges(items))
    assert len(read_rows(items)) == len(ALL_ROWS) + 2


def test_vacuum_keeps_the_table_retention_and_deletes_only_with_force(spark, dataset, items, writer_backend):
    compacted = maintain(spark, dataset, writer_backend)  # the small files are no longer needed
    on_disk, version = files_on_disk(items), table_version(items)
    kept = maintain(spark, dataset, writer_backend, optimize=False, vacuum=True)
    assert (kept["retentionHours"], kept["numDeletedFiles"]) == (168, 0)
    with pytest.raises(ConfigError, match="below the 168 hours") as refused:
        maintain(spark, dataset, writer_backend, optimize=False, vacuum=True, retention_hours=0)
    assert refused.value.argument == "retention_hours"
    assert files_on_disk(items) == on_disk

    forced = maintain(
        spark, dataset, writer_backend, optimize=False, vacuum=True, retention_hours=0, force=True
    )
    assert forced["numDeletedFiles"] == compacted["numRemovedFiles"]
    assert files_on_disk(items) == set(data_files(items))
    assert read_rows(items) == ALL_ROWS
    assert table_version(items) >= version


def test_the_retention_floor_is_the_tables_configured_one(spark, dataset, items, writer_backend):
    DeltaTable(items).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 2 days"})
    with pytest.raises(ConfigError, match="below the 48 hours"):
        maintain(spark, dataset, writer_backend, optimize=False, vacuum=True, retention_hours=47)
    metrics = maintain(spark, dataset, writer_backend, optimize=False, vacuum=True, retention_hours=48)
    assert metrics["retentionHours"] == 48


def test_a_retention_no_engine_can_represent_is_refused_before_vacuum(spark, dataset, items, writer_backend):
    """delta-rs panics (a BaseException past every handler) on a span past about 290 million years."""
    on_disk = files_on_disk(items)
    with pytest.raises(ConfigError, match="longer than the 876000 hours"):
        maintain(spark, dataset, writer_backend, optimize=False, vacuum=True, retention_hours=1e14)
    huge = {"delta.deletedFileRetentionDuration": "interval 999999999999 days"}  # set outside the loads
    DeltaTable(items).alter.set_table_properties(huge)
    with pytest.raises(ConfigError, match="deletedFileRetentionDuration of .* is longer than") as refused:
        maintain(spark, dataset, writer_backend, optimize=False, vacuum=True)
    assert refused.value.argument == "retention_hours" and files_on_disk(items) == on_disk


def test_a_table_retention_below_a_day_does_not_lower_vacuums_floor(spark, dataset, items, writer_backend):
    """A retention of 0 set outside the loads (which refuse it) would let VACUUM delete the files a load
    is writing and readers of older versions need."""
    compacted = maintain(spark, dataset, writer_backend)
    on_disk = files_on_disk(items)
    DeltaTable(items).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 seconds"})
    kept = maintain(spark, dataset, writer_backend, optimize=False, vacuum=True)
    assert (kept["retentionHours"], kept["numDeletedFiles"]) == (24, 0)
    with pytest.raises(ConfigError, match="below the 24 hours of the floor"):
        maintain(spark, dataset, writer_backend, optimize=False, vacuum=True, retention_hours=0)
    assert files_on_disk(items) == on_disk
    forced = maintain(
        spark, dataset, writer_backend, optimize=False, vacuum=True, retention_hours=0, force=True
    )
    assert forced["numDeletedFiles"] == compacted["numRemovedFiles"]


def test_checkpoint_is_written_at_the_latest_version(spark, dataset, items, writer_backend):
    metrics = maintain(spark, dataset, writer_backend, checkpoint=True)
    assert metrics["operations"] == ["compaction", "checkpoint"]
    assert metrics["checkpointVersion"] == table_version(items) == metrics["table_version"]
    checkpoint = f"{metrics['checkpointVersion']:020d}.checkpoint.parquet"
    assert checkpoint in os.listdir(os.path.join(items, "_delta_log"))
    assert read_rows(items) == ALL_ROWS


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"z_order_by": "colour"}, "z_order_by"),
        ({"table_name": "missing"}, "table_name"),
        ({"backend": "spark"}, "backend"),
    ],
)
def test_bad_options_found_on_the_table_change_nothing(
    spark, dataset, items, writer_backend, options, argument
):
    version = table_version(items)
    options = {"table_name": "items", "backend": writer_backend or "auto", **options}
    with pytest.raises(ConfigError) as refused:
        maintain_table(dataset, options.pop("table_name"), spark=spark, vacuum=True, **options)
    assert refused.value.argument == argument
    assert table_version(items) == version


@pytest.mark.parametrize(
    ("disposition", "batch"),
    [
        ("append", [{"id": 99, "v": "new"}]),  # adds a file: no conflict with the compaction
        ("merge", [{"id": 0, "v": "changed"}, {"id": 99, "v": "new"}]),  # rewrites a file it compacted
    ],
)
def test_an_optimize_landing_while_a_load_commits_loses_neither(
    spark, dataset, items, writer_backend, monkeypatch, disposition, batch
):
    from airflow_provider_deltamerge import load as load_module

    optimized = []

    def optimize_just_before_the_commit(step):
        if step == "commit" and not optimized:
            optimized.append(maintain(spark, dataset, writer_backend))

    monkeypatch.setattr(load_module, "checkpoint", optimize_just_before_the_commit)
    info = load(spark, dataset, batch, write_disposition=disposition)
    [metrics] = optimized
    expected = {r["id"]: r for r in ALL_ROWS} | {r["id"]: r for r in batch}
    assert read_rows(items) == ordered(list(expected.values()))
    assert info.table_version == metrics["table_version"] + 1 == table_version(items)
    operations = [e["operation"] for e in DeltaTable(items).history(2)]
    assert operations[1] == "OPTIMIZE"
    assert [r["table_version"] for r in read_loads(dataset) if r["load_id"] == info.load_id] == [
        info.table_version
    ]


def test_loads_and_optimizes_running_at_once_all_land(spark, dataset, items, writer_backend):
    updates = [
        [{"id": 10 * b, "v": f"updated {b}"}, {"id": 100 + b, "v": "new"}] for b in range(len(BATCHES))
    ]
    done = threading.Event()

    def optimize_until_the_loads_are_done():
        runs = [maintain(spark, dataset, writer_backend)]
        while not done.wait(0.1):
            runs.append(maintain(spark, dataset, writer_backend))
        return runs

    with ThreadPoolExecutor(max_workers=2) as pool:
        optimizing = pool.submit(optimize_until_the_loads_are_done)
        infos = [load(spark, dataset, batch) for batch in updates]
        done.set()
        runs = optimizing.result()
    expected = {r["id"]: r for r in ALL_ROWS} | {r["id"]: r for batch in updates for r in batch}
    assert read_rows(items) == ordered(list(expected.values()))
    assert {r["load_id"] for r in read_loads(dataset)} >= {info.load_id for info in infos}
    assert len(runs) >= 1 and all(run["table"] == "items" for run in runs)


# ---- options, the retention property, and the delta-spark commands (no Spark needed) ----


@pytest.mark.writer_independent
@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"optimize": False}, "optimize"),
        ({"optimize": "yes"}, "optimize"),
        ({"optimize": False, "z_order_by": ["id"]}, "z_order_by"),
        ({"z_order_by": ["id", "id"]}, "z_order_by"),
        ({"retention_hours": 10}, "retention_hours"),
        ({"vacuum": True, "retention_hours": -1}, "retention_hours"),
        ({"vacuum": True, "retention_hours": float("nan")}, "retention_hours"),
        ({"vacuum": True, "retention_hours": "168"}, "retention_hours"),
        ({"force": True}, "force"),
    ],
)
def test_options_are_checked_without_the_table(options, argument):
    with pytest.raises(ConfigError) as refused:
        MaintenanceOptions(**options)
    assert refused.value.argument == argument


@pytest.mark.writer_independent
@pytest.mark.parametrize(
    ("text", "hours"),
    [
        (None, 168.0),
        ("interval 7 days", 168.0),
        ("interval 1 week", 168.0),
        ("interval 36 hours", 36.0),
        ("interval 1 day 12 hours", 36.0),
        ("interval 90 minutes", 1.5),
        ("2 days", 48.0),
    ],
)
def test_retention_property_in_hours(text, hours):
    assert retention_hours_of({"delta.deletedFileRetentionDuration": text} if text else {}) == hours


@pytest.mark.writer_independent
@pytest.mark.parametrize("text", ["interval 1 month", "soon", "interval 7 days later"])
def test_a_retention_property_that_is_no_duration_is_refused(text):
    with pytest.raises(ConfigError, match="not a duration"):
        retention_hours_of({"delta.deletedFileRetentionDuration": text})


@pytest.mark.writer_independent
def test_optimize_metrics_read_alike_from_either_writer():
    delta_rs = {
        "numFilesAdded": 1,
        "numFilesRemoved": 4,
        "filesAdded": '{"avg":900.0,"max":900,"min":900,"totalFiles":1,"totalSize":900}',
        "filesRemoved": '{"avg":700.0,"max":700,"min":700,"totalFiles":4,"totalSize":2800}',
    }
    delta_spark = {
        "numFilesAdded": 1,
        "numFilesRemoved": 4,
        "filesAdded": {"avg": 900.0, "max": 900, "min": 900, "totalFiles": 1, "totalSize": 900},
        "filesRemoved": {"avg": 700.0, "max": 700, "min": 700, "totalFiles": 4, "totalSize": 2800},
        "zOrderStats": None,
    }
    expected = {"numAddedFiles": 1, "numRemovedFiles": 4, "numAddedBytes": 900, "numRemovedBytes": 2800}
    assert optimize_metrics(delta_rs) == optimize_metrics(delta_spark) == expected


class Frame:
    """A Spark DataFrame holding canned rows: select, where, first and collect, as maintenance calls them."""

    def __init__(self, rows, columns=()):
        self.rows, self.columns = rows, list(columns)

    def select(self, *columns):
        return Frame([{c: r[c] for c in columns} for r in self.rows])

    def where(self, condition):
        operation = condition.split("'")[1]  # "operation = 'VACUUM END'"
        return Frame([r for r in self.rows if r.get("operation") == operation])

    def first(self):
        return Row(self.rows[0]) if self.rows else None

    def collect(self):
        return [Row(r) for r in self.rows]


class Row(dict):
    def __getitem__(self, key):
        return list(self.values())[key] if isinstance(key, int) else super().__getitem__(key)

    def asDict(self, recursive=False):  # noqa: N802 (pyspark's name)
        return dict(self)


class Recording:
    """delta.tables.DeltaTable and DeltaOptimizeBuilder: only their methods, with arguments their
    signatures accept; each call is recorded with the session conf it ran under. `results` gives each
    method's result, or a function of its arguments that returns it."""

    def __init__(self, real, calls, results, conf):
        self._real, self._calls, self._results, self._conf = real, calls, results, conf

    def __getattr__(self, name):
        method = getattr(self._real, name)  # AttributeError: Delta's class has no such method
        bound_to_class = isinstance(inspect.getattr_static(self._real, name), classmethod)

        def call(*args):
            inspect.signature(method).bind(*(args if bound_to_class else (None, *args)))
            self._calls.append((name, *args[1 if bound_to_class else 0 :], dict(self._conf)))
            if name in ("forPath", "optimize"):
                real = SparkDeltaTable if name == "forPath" else DeltaOptimizeBuilder
                return Recording(real, self._calls, self._results, self._conf)
            result = self._results[name]
            return result(*args) if callable(result) else result

        return call


class SessionConf(dict):
    """spark.conf of a Spark Connect session whose server has Delta's extension and Delta Connect's
    plugins configured."""

    @classmethod
    def with_delta(cls) -> SessionConf:
        from airflow_provider_deltamerge.model.delta_jars import DELTA_CONNECT_PLUGINS, DELTA_EXTENSION

        return cls({"spark.sql.extensions": DELTA_EXTENSION, **DELTA_CONNECT_PLUGINS})

    def get(self, key, default=None):
        return super().get(key, default)

    def set(self, key, value):
        self[key] = value

    def unset(self, key):
        self.pop(key, None)


def delta_session(conf, properties: dict, columns: list[str], partitions: list[str]):
    """A session as the delta-spark maintenance reads a table's metadata: SHOW TBLPROPERTIES and the
    catalog's columns (its protocol rows are not configuration)."""
    shown = [Row(key=k, value=v) for k, v in {**properties, "delta.minReaderVersion": "1"}.items()]
    listed = [type("Column", (), {"name": c, "isPartition": c in partitions})() for c in columns]
    catalog = type("Catalog", (), {"listColumns": lambda self, target: listed})()
    return type(
        "ConnectSession", (), {"conf": conf, "catalog": catalog, "sql": lambda self, q: Frame(shown)}
    )()


@pytest.mark.writer_independent
@pytest.mark.parametrize("force", [False, True])
def test_delta_spark_runs_z_order_and_vacuum_with_deltas_own_commands(monkeypatch, force):
    from delta import tables

    calls, conf = [], SessionConf.with_delta()
    retention = {"delta.deletedFileRetentionDuration": "interval 1 day"}
    spark = delta_session(conf, retention, ["id", "day", "v"], ["day"])
    commits = [{"version": 7, "operation": "WRITE", "operationMetrics": {}}]

    def vacuum(retention_hours):
        commits.append({"version": 8, "operation": "VACUUM START", "operationMetrics": {}})
        commits.append(
            {"version": 9, "operation": "VACUUM END", "operationMetrics": {"numDeletedFiles": "3"}}
        )
        return Frame([])

    optimized = {
        "numFilesAdded": 1,
        "numFilesRemoved": 3,
        "filesAdded": Row(totalSize=900),
        "filesRemoved": {},
    }
    results = {
        "isDeltaTable": True,
        "executeZOrderBy": Frame([{"path": "/lake/items", "metrics": Row(optimized)}]),
        "vacuum": vacuum,
        "history": lambda limit: Frame(list(reversed(commits))[:limit]),
    }
    monkeypatch.setattr(tables, "DeltaTable", Recording(SparkDeltaTable, calls, results, conf))
    before = dict(conf)
    out = maintain_table(
        "/lake",
        "items",
        z_order_by="id",
        vacuum=True,
        retention_hours=0 if force else 24,
        force=force,
        spark=spark,
    )
    names = [call[0] for call in calls if call[0] != "history"]
    assert names == ["isDeltaTable", "forPath", "optimize", "executeZOrderBy", "vacuum"]
    z_order = next(call for call in calls if call[0] == "executeZOrderBy")
    assert z_order[1:-1] == ("id",)
    vacuum_call = next(call for call in calls if call[0] == "vacuum")
    assert vacuum_call[1] == (0.0 if force else 24.0)
    assert vacuum_call[-1]["spark.databricks.delta.vacuum.logging.enabled"] == "true"
    check = vacuum_call[-1].get("spark.databricks.delta.retentionDurationCheck.enabled")
    assert check == ("false" if force else None)
    assert conf == before  # the session's conf is restored
    assert out["writer"] == "delta-spark" and out["operations"] == ["z-order", "vacuum"]
    assert (out["numAddedFiles"], out["numRemovedFiles"], out["numAddedBytes"]) == (1, 3, 900)
    assert (out["numDeletedFiles"], out["table_version"]) == (3, 9)


@pytest.mark.writer_independent
def test_delta_spark_refuses_z_order_by_a_partition_column(monkeypatch):
    from delta import tables

    calls, conf = [], SessionConf.with_delta()
    spark = delta_session(conf, {}, ["id", "day", "v"], ["day"])
    results = {
        "isDeltaTable": True,
        "toDF": Frame([], columns=["id", "day", "v"]),
    }
    monkeypatch.setattr(tables, "DeltaTable", Recording(SparkDeltaTable, calls, results, conf))
    with pytest.raises(ConfigError, match="'day' partitions") as refused:
        maintain_table("/lake", "items", z_order_by="day", backend="delta-spark", spark=spark)
    assert refused.value.argument == "z_order_by"
    assert "optimize" not in [call[0] for call in calls]


@pytest.mark.parametrize("name", ["t" * 300, "../outside", "a/b"])
def test_a_table_name_no_dataset_can_hold_is_refused_before_anything_is_read(dataset, name):
    with pytest.raises(ConfigError) as refused:
        maintain_table(dataset, name, optimize=True)
    assert refused.value.argument == "table_name"
    assert "Errno" not in str(refused.value)
