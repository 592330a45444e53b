"""dlt's side of the weekly catchup (catchup.py), run in dlt's own virtualenv.

    python dlt_catchup.py <landing folder> <work dir>

One pipeline run per window, in order, as a dlt backfill runs them: the landing's events read by pyarrow
with the window pushed down, through `dlt.sources.incremental("ts", initial_value=start,
end_value=end)` (the window [start, end), stateless), upserted on `id` into the filesystem
destination's Delta table. Each run is timed from its start to its end (the first one cold: dlt's imports
and the pipeline's creation come before it, as a Spark side's session start comes in its first window).
Prints one JSON line: {"seconds": [per window], "path": the Delta table's folder, "loads": completed
load packages}.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
for setting in ("ADD_DLT_LOAD_ID", "ADD_DLT_ID"):  # the same system columns as run_load's table
    os.environ[f"NORMALIZE__PARQUET_NORMALIZER__{setting}"] = "true"

import dlt  # noqa: E402
import pyarrow.dataset as ds  # noqa: E402
from catchup_work import WINDOWS, window_bounds  # noqa: E402


def events(landing: Path):
    @dlt.resource(
        name="events",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key="id",
        table_format="delta",
    )
    def resource(ts=dlt.sources.incremental("ts")):  # noqa: B008 (dlt's own idiom: the cursor as a default)
        window = (ds.field("ts") >= ts.start_value) & (ds.field("ts") < ts.end_value)
        yield ds.dataset(str(landing), format="parquet").to_table(filter=window)

    return resource


def main() -> None:
    landing, work = Path(sys.argv[1]), Path(sys.argv[2])
    pipe = dlt.pipeline(
        pipeline_name="catchup",
        destination=dlt.destinations.filesystem(str(work / "lake")),
        dataset_name="catchup",
        pipelines_dir=str(work / "pipelines"),
    )
    seconds, loads = [], 0
    for week in range(WINDOWS):
        start, end = window_bounds(week)
        started = time.perf_counter()
        info = pipe.run(events(landing)(ts=dlt.sources.incremental("ts", initial_value=start, end_value=end)))
        seconds.append(time.perf_counter() - started)
        loads += len(info.loads_ids)
    path = str(work / "lake" / "catchup" / "events")
    print(json.dumps({"seconds": seconds, "path": path, "loads": loads}))


if __name__ == "__main__":
    main()
