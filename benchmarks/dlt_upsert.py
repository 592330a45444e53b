"""dlt's Delta upsert of the benchmark's change set, run in dlt's own virtualenv (see bench.py).

    python dlt_upsert.py <work dir> <target_rows> <changed_rows> <kind>

Builds the target with dlt's own first load (timed: initial_seconds), then times one upsert of the change
set and prints one JSON line: seconds, initial_seconds, peak RSS of this process, files added/removed,
rows after.

dlt adds its `_dlt_load_id` and `_dlt_id` columns to Arrow data only when asked; they are asked for here,
so that dlt's table holds the same seven columns as run_load's and both merges rewrite the same bytes
(without them dlt's 10M-row table is 38% smaller, and its merge does less work than run_load's).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
for setting in ("ADD_DLT_LOAD_ID", "ADD_DLT_ID"):
    os.environ[f"NORMALIZE__PARQUET_NORMALIZER__{setting}"] = "true"

import dlt  # noqa: E402
from deltalake import DeltaTable  # noqa: E402
from workload import Size, arrow_changes, arrow_target  # noqa: E402


def pipeline(work: Path):
    return dlt.pipeline(
        pipeline_name="bench",
        destination=dlt.destinations.filesystem(str(work / "lake")),
        dataset_name="bench",
        pipelines_dir=str(work / "pipelines"),
    )


def upsert(rows):
    @dlt.resource(
        name="items",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key="id",
        table_format="delta",
    )
    def items():
        yield rows

    return items


def main() -> None:
    work, size = Path(sys.argv[1]), Size(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    changes = arrow_changes(size)
    pipe = pipeline(work)
    target = arrow_target(size)
    started = time.perf_counter()
    pipe.run(upsert(target))  # dlt's first load: the table created
    initial = time.perf_counter() - started
    path = str(work / "lake" / "bench" / "items")
    before = DeltaTable(path).version()
    started = time.perf_counter()
    pipe.run(upsert(changes))
    seconds = time.perf_counter() - started
    table = DeltaTable(path)
    merges = [h for h in table.history(table.version() - before) if h.get("operation") == "MERGE"]
    metrics = merges[0].get("operationMetrics", {}) if merges else {}
    print(
        json.dumps(
            {
                "seconds": seconds,
                "initial_seconds": initial,
                "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "files_added": metrics.get("num_target_files_added"),
                "files_removed": metrics.get("num_target_files_removed"),
                "rows": table.count() if hasattr(table, "count") else None,
                "path": path,
            }
        )
    )


if __name__ == "__main__":
    main()
