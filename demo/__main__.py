"""Run the demo and print what each load did: `python -m demo [--months N] [--dataset PATH]`."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import time
from pathlib import Path

from deltalake import DeltaTable

from airflow_provider_deltamerge.spark.session import default_session

from . import flights

COLUMNS = [
    ("load", "label"),
    ("rows in", "rows_extracted"),
    ("inserted", "numTargetRowsInserted"),
    ("updated", "numTargetRowsUpdated"),
    ("deleted", "numTargetRowsDeleted"),
    ("version", "table_version"),
    ("writer", "writer"),
]


def print_table(loads: list[tuple[str, dict]]) -> None:
    rows = [[label] + [str(m.get(key, "")) for _, key in COLUMNS[1:]] for label, m in loads]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, (h, _) in enumerate(COLUMNS)]
    print("  ".join(h.ljust(w) for (h, _), w in zip(COLUMNS, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--months", type=int, default=3, help="months of 2013 to load (1-12)")
    parser.add_argument(
        "--dataset", default="demo-output/lake", help="where the Delta tables go (emptied first)"
    )
    args = parser.parse_args()
    args.dataset = os.path.abspath(args.dataset)  # a load refuses relative datasets: it may run elsewhere
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    shutil.rmtree(args.dataset, ignore_errors=True)
    Path(args.dataset).mkdir(parents=True)
    spark = default_session("local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    started = time.monotonic()
    loads = flights.run(spark, args.dataset, args.months)
    print(
        f"\nnycflights13 flights merged into {args.dataset}/flights on local Spark "
        f"({time.monotonic() - started:.0f} s):\n"
    )
    print_table(loads)
    table = DeltaTable(f"{args.dataset}/flights")
    print(
        f"\nthe table now holds {table.to_pyarrow_table(columns=['month']).num_rows} rows "
        f"at version {table.version()}"
    )
    print(
        f"load records: {args.dataset}/_dlt_loads "
        f"({DeltaTable(f'{args.dataset}/_dlt_loads').to_pyarrow_table().num_rows} loads)"
    )
    spark.stop()


if __name__ == "__main__":
    main()
