"""One timed load in a fresh process: what an Airflow task pays for (see bench_cold.py).

    python cold_run.py '<json job>'

The job names the side and its inputs; one JSON line is printed: the seconds to import, to start the
Spark session and to define the side's input DataFrame (each reported apart: the input is defined before
the load's timer, as dlt's rows are built before its own, and Spark computes its rows in the load), of
the load itself, the load's CPU seconds (this process and the Spark JVM), and the Spark jobs and SQL
executions the load ran (spark_work.py). Sides:
- run_load / floor: the upsert of the change set (defined by Spark in this process) into `path`;
- any side named with the suffix C1_ONLY (`run_load, C1 only`, `initial, C1 only`): that side in a JVM
  that compiles with C1 alone (`-XX:TieredStopAtLevel=1`, the caller's compilation policy, which the
  session keeps), beside the default's deferred C2;
- initial / initial_floor: the first load of the target into an empty dataset (run_load's then writes
  the change set `parquet_changed_rows` to `parquet`, untimed, where asked); the floor writes the
  same rows with delta-rs unsorted, and times apart sorting them by the key on the driver as run_load
  does (`sort_seconds`, not in its load): the key-ordered layout's cost;
- connect: run_load from this fresh client process through a warm Spark Connect server (`remote`);
- operator: DeltaMergeOperator.execute of a parquet change set (session start included, as a task's);
- initial_cdc / cdc / cdc_upsert: the CDC case (cdc_work.py): its target, loaded with sequence_by; the
  events applied with sequence_by and apply_as_deletes; the same rows as a plain upsert;
- small_loads: a table of `target_rows` (untimed), then `loads` upserts of 5 rows each into it in this
  one process, each timed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

STARTED = time.perf_counter()
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
from bench_sides import UPSERT, floor_merge, spark_changes, spark_rows, spark_target, with_system_columns  # noqa: E402
from cdc_work import CDC, with_event_columns  # noqa: E402
from deltalake import write_deltalake  # noqa: E402
from spark_work import SparkWork  # noqa: E402
from workload import Size  # noqa: E402

from airflow_provider_deltamerge import run_load  # noqa: E402
from airflow_provider_deltamerge.delta.arrow_stream import arrow_schema, record_batches  # noqa: E402
from airflow_provider_deltamerge.delta.delta_rs import TARGET_FILE_BYTES  # noqa: E402
from airflow_provider_deltamerge.spark.class_archive import JAVA_OPTIONS  # noqa: E402

IMPORTED = time.perf_counter()
CDC_SIDES = ("initial_cdc", "cdc", "cdc_upsert")
NO_ARCHIVE = "run_load, no JVM archive"  # run_load in a process whose session starts without the archive
C1_ONLY = ", C1 only"  # the suffix of a side run in a JVM that compiles with C1 alone
RUN_LOAD_C1 = "run_load" + C1_ONLY
C1_OPTION = "-XX:TieredStopAtLevel=1"
LOAD = {"table_name": "items", "write_disposition": UPSERT, "primary_key": "id", "pipeline_name": "bench"}


def session(job: dict):
    from airflow_provider_deltamerge.spark.session import default_session

    if job.get("remote"):
        from pyspark.sql import SparkSession

        return SparkSession.builder.remote(job["remote"]).getOrCreate()
    spark = default_session("local[2]", session_conf(job))
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def session_conf(job: dict) -> dict[str, str]:
    """The local session's conf: the run's (`--session-conf`), with C1 alone for a C1_ONLY side."""
    conf = {"spark.driver.memory": job["driver_memory"], **job.get("conf", {})}
    if job["side"].endswith(C1_ONLY):
        conf[JAVA_OPTIONS] = f"{conf.get(JAVA_OPTIONS, '')} {C1_OPTION}".strip()
    return conf


def compiles_with_c1_alone(spark) -> bool:
    """Whether the session's JVM itself runs with C1 alone (its flag, as the JVM reads it)."""
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    hotspot = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean)
    return str(hotspot.getVMOption("TieredStopAtLevel").getValue()) == "1"


def to_arrow(df) -> pa.Table:
    schema = arrow_schema(df)
    return pa.Table.from_batches(list(record_batches(df, schema)), schema=schema)


def source(side: str, spark, size: Size):
    """The side's input as a DataFrame: defined here, before the load's timer, as dlt's rows are built
    before its own; nothing is computed yet (Spark computes the rows in the load)."""
    if side in ("run_load", NO_ARCHIVE, "connect", "floor"):
        return spark_changes(spark, size)
    if side == "initial":
        return spark_target(spark, size)
    if side in CDC_SIDES:  # the CDC case: its target, its events, the plain upsert of the same rows
        target = side == "initial_cdc"
        return with_event_columns(spark_target(spark, size) if target else spark_changes(spark, size), target)
    if side == "initial_floor":
        return with_system_columns(spark_target(spark, size))
    raise ValueError(f"unknown side {side!r}")


def load(side: str, spark, rows, job: dict, result: dict) -> dict:
    """The side's load of `rows` (its `source`), timed by the caller."""
    path, dataset = job["path"], str(Path(job["path"]).parent)
    if side in ("run_load", NO_ARCHIVE, "connect", "initial", "cdc_upsert"):
        info = run_load(rows, spark=spark, dataset=dataset, backend="delta-rs", **LOAD)
        return info.metrics
    if side == "floor":
        return floor_merge(rows, path)[0]
    if side in ("initial_cdc", "cdc"):
        info = run_load(rows, spark=spark, dataset=dataset, backend="delta-rs", **LOAD, **CDC)
        return info.metrics
    data = to_arrow(rows)  # initial_floor
    started = time.perf_counter()
    data.sort_by([("id", "ascending")])
    result["sort_seconds"] = time.perf_counter() - started
    write_deltalake(path, data, target_file_size=TARGET_FILE_BYTES)  # run_load's files
    return {}


def operator(job: dict) -> dict:
    """The task's whole execute, its session start included (the hook starts the local session)."""
    from types import SimpleNamespace

    from airflow_provider_deltamerge.operators import DeltaMergeOperator

    op = DeltaMergeOperator(
        task_id="load",
        source={"format": "parquet", "path": job["parquet"]},
        dataset=str(Path(job["path"]).parent),
        backend="delta-rs",
        emit_asset=False,
        spark_conf=session_conf(job),
        **LOAD,
    )
    ti = SimpleNamespace(dag_id="bench", task_id="load", run_id="cold", try_number=1, map_index=-1)
    context = {"ti": ti, "dag_run": SimpleNamespace(run_type="manual", conf={})}
    started = time.perf_counter()
    op.execute(context)
    return {"seconds": time.perf_counter() - started}


def small_loads(spark, job: dict) -> dict:
    """`loads` upserts of 5 rows each (2 updated, 3 new) into one table, each timed."""
    dataset, seconds = str(Path(job["path"]).parent), []
    first = spark_target(spark, Size(job["target_rows"], 0, "uniform"))
    run_load(first, spark=spark, dataset=dataset, backend="delta-rs", **LOAD)  # the table, untimed
    for i in range(job["loads"]):
        ids = spark.range(5).selectExpr(f"IF(id < 2, id * 2, {2 * job['target_rows']} + {i} * 10 + id) AS id")
        rows = spark_rows(ids, changed=True)  # defined before the timer, as every side's input
        started = time.perf_counter()
        run_load(rows, spark=spark, dataset=dataset, backend="delta-rs", **LOAD)
        seconds.append(time.perf_counter() - started)
    return {"loads": seconds}


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds used so far by (this process, its children: the Spark JVM): a measure of the work a
    load does that a busy machine changes far less than it changes wall time."""
    import psutil

    me = psutil.Process()
    used = []
    for processes in ([me], me.children(recursive=True)):
        total = 0.0
        for process in processes:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
        used.append(total)
    return used[0], used[1]


MARK = "cold-run result: "  # the line the parent reads (a load may print lines of its own)


def emit(result: dict) -> None:
    print(MARK + json.dumps(result, default=str), flush=True)


def main() -> None:
    job = json.loads(sys.argv[1])
    side = job["side"].removesuffix(C1_ONLY)  # what the side loads; its JVM's options are session_conf's
    result = {"side": job["side"], "import_seconds": IMPORTED - STARTED}
    if side == "operator":
        result.update(operator(job))
        emit(result)
        return
    started = time.perf_counter()
    spark = session(job)
    result["session_seconds"] = time.perf_counter() - started
    if not job.get("remote"):  # a Connect client starts no JVM
        options = spark.conf.get(JAVA_OPTIONS, "")
        result.update(jvm_archive="SharedArchiveFile" in options, c1_only=compiles_with_c1_alone(spark))
    size = Size(job["target_rows"], job.get("changed_rows", 0), job.get("kind", "uniform"))
    if side == "small_loads":
        result.update(small_loads(spark, job))
        emit(result)
        return
    with SparkWork(spark) as work:
        started = time.perf_counter()
        rows = source(side, spark, size)
        result["define_seconds"] = time.perf_counter() - started  # apart from the load, as session start
        cpu, started = cpu_seconds(), time.perf_counter()
        metrics = load(side, spark, rows, job, result)
        result["seconds"] = time.perf_counter() - started - result.get("sort_seconds", 0.0)
        python, jvm = (after - before for after, before in zip(cpu_seconds(), cpu, strict=True))
        result.update(cpu_seconds=python + jvm, python_cpu_seconds=python)
    result.update(work.as_dict())
    if job.get("parquet") and side == "initial":  # the operator's source, after the timed load
        changes = Size(size.target_rows, job["parquet_changed_rows"], job["parquet_kind"])
        spark_changes(spark, changes).write.parquet(job["parquet"])
    result["files_removed"] = metrics.get("numTargetFilesRemoved", metrics.get("num_target_files_removed"))
    emit(result)


if __name__ == "__main__":
    main()
