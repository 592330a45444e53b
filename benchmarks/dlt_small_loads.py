"""dlt's side of the per-load overhead check (P8), run in dlt's own virtualenv (see bench.py).

    python dlt_small_loads.py <work dir> <target_rows> <loads>

dlt's first load of a table of target_rows (untimed), then `loads` upserts of 5 rows each (2 updated,
3 new, as cold_run.py's small_loads), each timed; prints one JSON line: {"loads": [seconds, ...]}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pyarrow as pa  # noqa: E402
from dlt_upsert import pipeline, upsert  # noqa: E402
from workload import Size, arrow_rows, arrow_target  # noqa: E402


def main() -> None:
    work, target_rows, loads = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    pipe = pipeline(work)
    pipe.run(upsert(arrow_target(Size(target_rows, 0, "uniform"))))
    seconds = []
    for i in range(loads):
        ids = [0, 2] + [2 * target_rows + i * 10 + j for j in (2, 3, 4)]
        rows = arrow_rows(pa.array(ids, pa.int64()), changed=True)
        started = time.perf_counter()
        pipe.run(upsert(rows))
        seconds.append(time.perf_counter() - started)
    print(json.dumps({"loads": seconds}))


if __name__ == "__main__":
    main()
