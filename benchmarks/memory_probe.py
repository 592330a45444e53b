"""The driver's memory for one run_load, measured in a fresh process (see bench.py's P4).

    python memory_probe.py <dataset with the target "items"> <target_rows> <changed_rows> <kind> \
        <driver memory> [floor]

A long-lived process keeps what its allocators once took, so a growth measured there depends on what
ran before. Here Spark starts, a small warm-up load runs into a scratch dataset (imports and code paths
loaded), and then the RSS of this process (the Spark driver's Python side, where delta-rs merges) is
sampled every 10 ms through the one measured load: run_load, or with `floor` the embedded floor's
merge (bench_sides.floor_merge). Prints one JSON line: the RSS before the load, its peak during it, and
the growth.
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))

from bench_sides import UPSERT, floor_merge, spark_changes, spark_session  # noqa: E402
from workload import Size  # noqa: E402

from airflow_provider_deltamerge import run_load  # noqa: E402


def upsert(spark, data, dataset: str):
    return run_load(
        data,
        spark=spark,
        dataset=dataset,
        table_name="items",
        write_disposition=UPSERT,
        primary_key="id",
        pipeline_name="bench",
        backend="delta-rs",
    )


def main() -> None:
    dataset, size, memory = sys.argv[1], Size(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]), sys.argv[5]
    floor = sys.argv[6:] == ["floor"]
    spark = spark_session(memory, None)
    with tempfile.TemporaryDirectory() as scratch:
        warm = Size(2000, 200, size.kind)
        upsert(spark, spark_changes(spark, warm), scratch)
        upsert(spark, spark_changes(spark, warm), scratch)
    gc.collect()
    me = psutil.Process()
    before = peak = me.memory_info().rss
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, me.memory_info().rss)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    if floor:
        floor_merge(spark_changes(spark, size), f"{dataset}/items")
    else:
        upsert(spark, spark_changes(spark, size), dataset)
    done.set()
    sampler.join()
    peak = max(peak, me.memory_info().rss)
    print(json.dumps({"rss_before": before, "rss_peak": peak, "driver_growth": peak - before}))
    spark.stop()


if __name__ == "__main__":
    main()
