"""dlt's Delta upsert of the benchmark's change set, run in dlt's own virtualenv (see bench.py).

    python dlt_upsert.py <work dir> <target_rows> <changed_rows> <kind> [--phase both|initial|upsert]

- both (the default, the warm regime): dlt's first load builds the target (timed: initial_seconds),
  then one upsert of the change set is timed in this same process, after that first load;
- initial: the first load alone (a fresh process's: P7's dlt side);
- upsert: the upsert alone, in this fresh process, into the table an `initial` process left in
  <work dir>, as an Airflow task runs it (the cold regime). Its imports and the pipeline's creation come
  before the timer, as a Spark side's imports and session start do.

Prints one JSON line: the phase, seconds (the upsert), initial_seconds (the first load), peak RSS of this
process, files added/removed, rows after, and the table's path; a phase that did not run leaves its
figure out.

dlt adds its `_dlt_load_id` and `_dlt_id` columns to Arrow data only when asked; they are asked for here,
so that dlt's table holds the same seven columns as run_load's and both merges rewrite the same bytes
(without them dlt's 10M-row table is 38% smaller, and its merge does less work than run_load's).
"""

from __future__ import annotations

import argparse
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

PHASES = ("both", "initial", "upsert")


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


def timed_run(pipe, rows) -> float:
    started = time.perf_counter()
    pipe.run(upsert(rows))
    return time.perf_counter() - started


def parsed(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="dlt's first load and upsert of the benchmark's rows")
    parser.add_argument("work", type=Path)
    parser.add_argument("target_rows", type=int)
    parser.add_argument("changed_rows", type=int)
    parser.add_argument("kind")
    parser.add_argument("--phase", choices=PHASES, default="both")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parsed(argv)
    size = Size(args.target_rows, args.changed_rows, args.kind)
    path = str(args.work / "lake" / "bench" / "items")
    if args.phase == "upsert" and not (args.work / "pipelines").is_dir():
        sys.exit(f"dlt_upsert.py --phase upsert: no pipeline in {args.work}: run --phase initial there first")
    result: dict = {"path": path, "phase": args.phase}
    pipe = pipeline(args.work)  # in a fresh upsert process: attached to the state its first load left
    if args.phase in ("both", "initial"):
        result["initial_seconds"] = timed_run(pipe, arrow_target(size))
    if args.phase in ("both", "upsert"):
        changes = arrow_changes(size)
        before = DeltaTable(path).version()
        result["seconds"] = timed_run(pipe, changes)
        table = DeltaTable(path)
        merges = [h for h in table.history(table.version() - before) if h.get("operation") == "MERGE"]
        metrics = merges[0].get("operationMetrics", {}) if merges else {}
        result["files_added"] = metrics.get("num_target_files_added")
        result["files_removed"] = metrics.get("num_target_files_removed")
        result["rows"] = table.count() if hasattr(table, "count") else None
    result["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
