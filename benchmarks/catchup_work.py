"""The weekly catchup's events and the table they must leave, from one arithmetic (numpy and pyarrow only:
dlt's side imports it in its own virtualenv, and the Spark sides read the landing it writes).

- 52 weekly windows from START; `rows` keys in all, introduced in order: window w inserts the keys
  [rows*w//52, rows*(w+1)//52) and updates up to `per_window - inserted` keys of earlier windows, spread
  over them by a fixed stride from an offset that moves each week (so later weeks update earlier keys,
  and no key appears twice in one window);
- an event: id, week (its window), s = "w<week>-<id>", x = id / 1000 + week, ts: its window's start plus
  an offset spread over the week (the cursor; always inside [start, end));
- the table after every window loaded exactly once (an upsert on id): one row per key, the event of the
  last window that touched it. `expected` and `observed` reduce a table to the same figures: rows,
  distinct ids, rows per week and a checksum sum(id * 53 + week).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

WINDOWS = 52
START = datetime(2024, 1, 1, tzinfo=timezone.utc)  # a Monday
WEEK_SECONDS = 7 * 24 * 3600
UPDATE_SHARE = 0.2  # of a window's events, by default


def default_per_window(rows: int) -> int:
    """Events per window so that about UPDATE_SHARE of each window's events update earlier keys."""
    return math.ceil(rows / WINDOWS / (1 - UPDATE_SHARE))


def window_bounds(week: int) -> tuple[datetime, datetime]:
    start = START + timedelta(weeks=week)
    return start, start + timedelta(weeks=1)


def window_ids(rows: int, per_window: int, week: int):
    """The ids of a window's events: its new keys, then the earlier keys it updates."""
    import numpy as np

    first, last = rows * week // WINDOWS, rows * (week + 1) // WINDOWS
    inserted = np.arange(first, last, dtype=np.int64)
    updates = min(max(per_window - (last - first), 0), first)
    if not updates:
        return inserted
    stride = first // updates
    offset = week * 7919 % first
    updated = (offset + np.arange(updates, dtype=np.int64) * stride) % first
    return np.concatenate([inserted, updated])


def window_events(rows: int, per_window: int, week: int):
    """A window's events as an Arrow table (id, week, s, x, ts)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.array(window_ids(rows, per_window, week))
    n = len(ids)
    start = int(window_bounds(week)[0].timestamp())
    offsets = np.arange(n, dtype=np.int64) * WEEK_SECONDS // max(n, 1)
    ts = pa.array((start + offsets) * 1_000_000, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    weeks = pa.array(np.full(n, week, dtype=np.int64))
    text = pc.binary_join_element_wise("w", pc.cast(weeks, pa.string()), "-", pc.cast(ids, pa.string()), "")
    x = pc.add(pc.divide(pc.cast(ids, pa.float64()), 1000.0), float(week))
    return pa.table({"id": ids, "week": weeks, "s": text, "x": x, "ts": ts})


def write_landing(folder: Path, rows: int, per_window: int) -> int:
    """One Parquet file per window in `folder`; returns the number of events."""
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    events = 0
    for week in range(WINDOWS):
        table = window_events(rows, per_window, week)
        pq.write_table(table, folder / f"events-{week:02d}.parquet")
        events += table.num_rows
    return events


def expected(rows: int, per_window: int) -> dict:
    """The figures of the table after every window was loaded exactly once."""
    import numpy as np

    last_week = np.full(rows, -1, dtype=np.int64)
    for week in range(WINDOWS):
        last_week[window_ids(rows, per_window, week)] = week
    ids = np.arange(rows, dtype=np.int64)
    return figures(ids, last_week)


def observed(table) -> dict:
    """The same figures of a loaded table (an Arrow table with at least id, week, s), plus the rows
    whose values do not belong to their (id, week)."""
    import pyarrow.compute as pc

    ids = table.column("id").to_numpy()
    weeks = table.column("week").to_numpy()
    text = pc.binary_join_element_wise(
        "w", pc.cast(table.column("week"), "string"), "-", pc.cast(table.column("id"), "string"), ""
    )
    result = figures(ids, weeks)
    result["rows_with_wrong_values"] = int(pc.sum(pc.invert(pc.equal(text, table.column("s")))).as_py() or 0)
    return result


def figures(ids, weeks) -> dict:
    import numpy as np

    return {
        "rows": int(len(ids)),
        "distinct_ids": int(len(np.unique(ids))),
        "rows_per_week": [int(c) for c in np.bincount(weeks, minlength=WINDOWS)[:WINDOWS]],
        "checksum": int((ids * 53 + weeks).sum()),
    }


def mismatches(want: dict, got: dict) -> list[str]:
    """What differs between the expected figures and a table's, as sentences (empty: it matches)."""
    problems = [
        f"{key}: expected {want[key]}, found {got[key]}"
        for key in ("rows", "distinct_ids", "checksum")
        if want[key] != got[key]
    ]
    weeks = [w for w in range(WINDOWS) if want["rows_per_week"][w] != got["rows_per_week"][w]]
    if weeks:
        w = weeks[0]
        problems.append(
            f"rows per week differ in {len(weeks)} week(s), first week {w}: "
            f"expected {want['rows_per_week'][w]}, found {got['rows_per_week'][w]}"
        )
    if got.get("rows_with_wrong_values"):
        problems.append(f"{got['rows_with_wrong_values']} row(s) hold values not of their (id, week)")
    return problems
