"""The sides of the benchmark, each timed on a fresh copy of one target and verified after."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyspark.sql import functions as F
from workload import EPOCH_SECONDS, Size, existing_id, expected_rows, new_id, updates

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.delta.arrow_stream import arrow_schema, record_batches
from airflow_provider_deltamerge.delta.delta_spark_status import delta_spark_status
from airflow_provider_deltamerge.model.run import new_load_id
from airflow_provider_deltamerge.spark.frames import short_hash
from airflow_provider_deltamerge.spark.session import default_session

UPSERT = {"disposition": "merge", "strategy": "upsert"}
DLT_PINS = ("dlt[deltalake]==1.31.0",)  # deltalake and pyarrow pinned to this interpreter's versions
SAMPLES = 25


def spark_session(driver_memory: str, delta_jars: str | None, master: str = "local[2]", extra=None):
    spark = default_session(
        master,
        {"spark.driver.memory": driver_memory, "spark.sql.shuffle.partitions": "4", **(extra or {})},
        delta_jars=delta_jars.split(",") if delta_jars else None,
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def dlt_virtualenv(venv: Path) -> str:
    """dlt's own virtualenv (its pins may not agree with Airflow's), created when missing."""
    python = venv / "bin" / "python"
    if not python.exists():
        import importlib.metadata as md

        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pins = [*DLT_PINS, f"deltalake=={md.version('deltalake')}", f"pyarrow=={md.version('pyarrow')}"]
        subprocess.run([str(python), "-m", "pip", "install", "-q", *pins], check=True)
    return str(python)


# ---- the workload in Spark ----


def spark_rows(ids, changed: bool):
    prefix = "u" if changed else "s"
    x = F.col("id") / 1000.0 + (5000.0 if changed else 0.0)
    return ids.select(
        F.col("id"),
        (F.col("id") % 1000).alias("k"),
        F.concat(
            F.lit(prefix), (F.col("id") % 9973).cast("string"), F.lit("-"), F.col("id").cast("string")
        ).alias("s"),
        x.alias("x"),
        F.timestamp_seconds(F.col("id") + EPOCH_SECONDS).alias("ts"),
    )


def spark_target(spark, size: Size):
    return spark_rows(spark.range(size.target_rows).select((F.col("id") * 2).alias("id")), changed=False)


def spark_changes(spark, size: Size):
    n_updates = updates(size)
    index = F.col("id")
    if size.kind == "uniform":
        step = max(1, size.target_rows // max(n_updates, 1))
        inserted = max(size.changed_rows - n_updates, 1)
        existing = (index * step) % size.target_rows * 2
        new = index * max(1, size.target_rows // inserted) * 2 + 1
    else:
        start = int(size.target_rows * 0.49)
        existing, new = (F.lit(start) + index) * 2, (F.lit(start) + index * 9) * 2 + 1
    ids = spark.range(n_updates).select(existing.alias("id"))
    ids = ids.unionByName(spark.range(size.changed_rows - n_updates).select(new.alias("id")))
    return spark_rows(ids, changed=True)


def with_system_columns(changes):
    """The system columns run_load and dlt add: a load id of dlt's form (as long as theirs, so the floor
    merges as many bytes), and the primary key's hash as `_dlt_id`."""
    return changes.withColumn("_dlt_load_id", F.lit(new_load_id())).withColumn(
        "_dlt_id", short_hash(F.to_json(F.struct("id")))
    )


def floor_merge(changes, path: str) -> tuple[dict, int]:
    """The embedded floor: the change set with its system columns, `toArrow()`, a hand-written delta-rs
    upsert. (metrics, the batch's Arrow bytes)."""
    with_system = with_system_columns(changes)
    schema = arrow_schema(with_system)
    data = pa.Table.from_batches(list(record_batches(with_system, schema)), schema=schema)  # toArrow()
    metrics = (
        DeltaTable(path)
        .merge(data, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return metrics, data.nbytes


# ---- measuring ----


class PeakRss:
    """Peak RSS of this process and of its whole tree (the Spark JVM is a child), sampled every 50 ms.

    The tree is listed once a second, not at every sample: listing it scans every process on the machine,
    which would slow the run being timed (dlt's side, in its own process, has no sampler at all).
    """

    SAMPLE_SECONDS, LIST_SECONDS = 0.05, 1.0

    def __init__(self):
        self.me = psutil.Process()
        self.peak_self = self.peak_tree = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _sample(self):
        children, listed = [], 0.0
        while not self._stop.is_set():
            try:
                if time.monotonic() - listed >= self.LIST_SECONDS:
                    children, listed = self.me.children(recursive=True), time.monotonic()
                mine = self.me.memory_info().rss
                tree = mine + sum(c.memory_info().rss for c in children)
            except psutil.Error:
                listed = 0.0  # a child ended: list again
                continue
            self.peak_self, self.peak_tree = max(self.peak_self, mine), max(self.peak_tree, tree)
            self._stop.wait(self.SAMPLE_SECONDS)


def verify(path: str, size: Size) -> bool:
    """Row count, and sampled updated, inserted and untouched rows carry exactly the expected text."""
    table = DeltaTable(path)
    rows = sum(table.get_add_actions(flatten=True).column("num_records").to_pylist())
    n_updates, n_new = updates(size), size.changed_rows - updates(size)
    picks = lambda n: sorted({n * i // SAMPLES for i in range(SAMPLES)}) if n else []  # noqa: E731
    updated = [existing_id(size, j) for j in picks(n_updates)]
    inserted = [new_id(size, j) for j in picks(n_new)]
    changed = set(existing_id(size, j) for j in range(n_updates))
    untouched = [i for i in range(0, 2 * size.target_rows, max(2, 2 * size.target_rows // SAMPLES))]
    untouched = [i for i in untouched if i not in changed]
    wanted = updated + inserted + untouched
    found = table.to_pyarrow_dataset().to_table(filter=pc.field("id").isin(wanted), columns=["id", "s"])
    text = dict(zip(found["id"].to_pylist(), found["s"].to_pylist(), strict=True))
    expect = {i: f"u{i % 9973}-{i}" for i in updated + inserted} | {i: f"s{i % 9973}-{i}" for i in untouched}
    return rows == expected_rows(size) and text == expect


def files_touched(path: str, size: Size) -> int:
    """The fewest files a merge of the change set can rewrite: those whose id range holds a changed id's."""
    ids = [existing_id(size, j) for j in range(updates(size))]
    low, high = min(ids), max(ids)
    actions = DeltaTable(path).get_add_actions(flatten=True)
    lows, highs = actions.column("min.id").to_pylist(), actions.column("max.id").to_pylist()
    return sum(1 for lo, hi in zip(lows, highs, strict=True) if lo <= high and hi >= low)


def summary(seconds: list[float]) -> dict:
    return {"median": statistics.median(seconds), "min": min(seconds), "max": max(seconds), "runs": seconds}


class Sides:
    def __init__(
        self, spark, work: Path, dlt_python: str | None, driver_memory: str = "4g", probed=lambda size: True
    ):
        self.spark, self.work, self.dlt_python = spark, work, dlt_python
        self.driver_memory = driver_memory
        self.probed = probed  # which sizes get their driver growth measured (two fresh processes each)
        self.delta_spark = delta_spark_status(spark)[0]

    def available(self) -> list[str]:
        sides = ["run_load delta-rs", "floor"]
        sides += ["run_load delta-spark", "spark merge"] if self.delta_spark else []
        return sides + (["dlt"] if self.dlt_python else [])

    def warmed_up(self) -> list[str]:
        """The sides that run in this process, on this Spark session: each runs once untimed per size
        first, so that no timed run pays for the initial load's garbage or for code run the first time.
        dlt starts a fresh process for every run, so a run of it first would warm nothing."""
        return [name for name in self.available() if name != "dlt"]

    def run_size(self, size: Size, repeat: int, warmup: int = 1) -> dict:
        base = self.work / "base" / "items"
        shutil.rmtree(base.parent, ignore_errors=True)
        started = time.perf_counter()
        run_load(
            spark_target(self.spark, size),
            spark=self.spark,
            dataset=str(base.parent),
            table_name="items",
            write_disposition=UPSERT,
            primary_key="id",
            pipeline_name="bench",
            backend="delta-rs",
        )
        initial = time.perf_counter() - started
        warmups = {
            name: [self._one(name, size, base, f"warmup{i}") for i in range(warmup)]
            for name in self.warmed_up()
        }
        runs: dict[str, list[dict]] = {name: [] for name in self.available()}
        for repetition in range(repeat):
            order = (
                self.available()[repetition % len(self.available()) :]
                + self.available()[: repetition % len(self.available())]
            )
            for name in order:
                runs[name].append(self._one(name, size, base, repetition))
        sides = {name: {**summary([r["seconds"] for r in rs]), "last": rs[-1]} for name, rs in runs.items()}
        for name, warm in warmups.items():
            sides[name]["warmup"] = [r["seconds"] for r in warm]
        memory = self._driver_memory(size, base) if self.probed(size) else None
        return {
            "size": size.label,
            "target_rows": size.target_rows,
            "changed_rows": size.changed_rows,
            "kind": size.kind,
            "initial_load_seconds": initial,
            "minimal_files": files_touched(str(base), size),
            "target_files": len(DeltaTable(str(base)).file_uris()),
            "sides": sides,
            "verified": all(r["verified"] for rs in [*runs.values(), *warmups.values()] for r in rs),
            "driver_memory": memory,
        }

    def _driver_memory(self, size: Size, base: Path) -> dict:
        """The driver growth of run_load and of the floor, each measured once in a fresh process on a
        fresh copy of the target (memory_probe.py)."""
        return {
            "driver_growth": self._probe(size, base)["driver_growth"],
            "floor_growth": self._probe(size, base, "floor")["driver_growth"],
        }

    def _probe(self, size: Size, base: Path, *side: str) -> dict:
        copy = self.work / "memory" / "items"
        shutil.rmtree(copy.parent, ignore_errors=True)
        shutil.copytree(base.parent, copy.parent)
        probe = [sys.executable, str(Path(__file__).with_name("memory_probe.py")), str(copy.parent)]
        probe += [str(size.target_rows), str(size.changed_rows), size.kind, self.driver_memory, *side]
        done = subprocess.run(probe, check=True, capture_output=True, text=True)
        shutil.rmtree(copy.parent, ignore_errors=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    def _one(self, name: str, size: Size, base: Path, repetition: int | str) -> dict:
        copy = self.work / f"{name.replace(' ', '-')}-{repetition}" / "items"
        shutil.rmtree(copy.parent, ignore_errors=True)
        if name == "dlt":
            return self._dlt(size, copy.parent)
        shutil.copytree(base.parent, copy.parent)
        with PeakRss() as rss:
            started = time.perf_counter()
            metrics, arrow_bytes = self._side(name, size, str(copy))
            seconds = time.perf_counter() - started
        result = {
            "seconds": seconds,
            "peak_rss_tree": rss.peak_tree,
            "files_added": metrics.get("numTargetFilesAdded", metrics.get("num_target_files_added")),
            "files_removed": metrics.get("numTargetFilesRemoved", metrics.get("num_target_files_removed")),
            "arrow_bytes": arrow_bytes,
            "verified": verify(str(copy), size),
        }
        shutil.rmtree(copy.parent, ignore_errors=True)
        return result

    def _side(self, name: str, size: Size, path: str) -> tuple[dict, int | None]:
        changes = spark_changes(self.spark, size)
        if name.startswith("run_load"):
            info = run_load(
                changes,
                spark=self.spark,
                dataset=str(Path(path).parent),
                table_name="items",
                write_disposition=UPSERT,
                primary_key="id",
                pipeline_name="bench",
                backend=name.split()[-1],
            )
            return info.metrics, None
        with_system = with_system_columns(changes)
        if name == "spark merge":
            from delta.tables import DeltaTable as SparkDeltaTable

            (
                SparkDeltaTable.forPath(self.spark, path)
                .alias("t")
                .merge(with_system.alias("s"), "t.id = s.id")
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )
            return {}, None
        return floor_merge(changes, path)

    def _dlt(self, size: Size, work: Path) -> dict:
        command = [
            self.dlt_python,
            str(Path(__file__).with_name("dlt_upsert.py")),
            str(work),
            str(size.target_rows),
            str(size.changed_rows),
            size.kind,
        ]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["peak_rss_tree"] = result.pop("peak_rss")
        result["verified"] = verify(result.pop("path"), size)
        shutil.rmtree(work, ignore_errors=True)
        return result
