"""Both writers produce the same table contents, column names and types, and metric names for the same loads.

Runs only where the delta-spark writer is available (DELTA_SPARK_JARS pointing at local jars).
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.delta.delta_spark_status import delta_spark_status
from tests.helpers import read_rows

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

SCD2 = {"disposition": "merge", "strategy": "scd2", "boundary_timestamp": "2024-01-01T00:00:00Z"}
UPSERT = {"disposition": "merge", "strategy": "upsert"}
EVENTS = {"sequence_by": "seq", "apply_as_deletes": "op = 'd'", "except_column_list": ["op"]}
EVENTS_UPSERT = {"write_disposition": UPSERT, "primary_key": "id", **EVENTS}
EVENTS_SCD2 = {"write_disposition": {"disposition": "merge", "strategy": "scd2"}, "merge_key": "id", **EVENTS}
RUNS = {
    "append": [
        ({"write_disposition": "append"}, [{"id": 1, "v": "a"}]),
        ({"write_disposition": "append"}, [{"id": 1, "v": "b"}]),
    ],
    "replace": [
        ({"write_disposition": "replace"}, [{"id": 1, "v": "a"}]),
        ({"write_disposition": "replace"}, []),
    ],
    "delete-insert": [
        ({"write_disposition": "merge", "primary_key": "id"}, [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]),
        (
            {"write_disposition": "merge", "primary_key": "id", "columns": {"gone": {"hard_delete": True}}},
            [{"id": 1, "v": "a2", "gone": None}, {"id": 2, "gone": True}, {"id": 3, "v": "c", "extra": 1.5}],
        ),
    ],
    "upsert": [
        ({"write_disposition": UPSERT, "primary_key": "id"}, [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]),
        (
            {"write_disposition": UPSERT, "primary_key": "id", "columns": {"gone": {"hard_delete": True}}},
            [{"id": 1, "v": "a2", "gone": False}, {"id": 2, "gone": True}, {"id": 9, "gone": True}],
        ),
    ],
    "insert-only": [
        (
            {"write_disposition": {"disposition": "merge", "strategy": "insert-only"}, "primary_key": "id"},
            [{"id": 1, "v": "a"}],
        ),
        (
            {"write_disposition": {"disposition": "merge", "strategy": "insert-only"}, "primary_key": "id"},
            [{"id": 1, "v": "x"}, {"id": 2, "v": "b"}],
        ),
    ],
    "scd2 of change events": [
        (EVENTS_SCD2, [{"id": 1, "seq": 2, "op": "c", "v": "a"}, {"id": 1, "seq": 5, "op": "u", "v": "b"}]),
        (
            EVENTS_SCD2,
            [{"id": 1, "seq": 3, "op": "u", "v": "late"}, {"id": 1, "seq": 7, "op": "d", "v": None}],
        ),
    ],
    "upsert of change events": [
        (
            EVENTS_UPSERT,
            [{"id": 1, "seq": 2, "op": "c", "v": "a"}, {"id": 2, "seq": 1, "op": "c", "v": "b"}]
            + [{"id": 1, "seq": 1, "op": "c", "v": "older"}],
        ),
        (
            EVENTS_UPSERT,
            [{"id": 1, "seq": 1, "op": "u", "v": "late"}, {"id": 2, "seq": 3, "op": "d", "v": None}]
            + [{"id": 3, "seq": 1, "op": "c", "v": "c"}],
        ),
    ],
    "scd2": [
        ({"write_disposition": SCD2}, [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]),
        (
            {"write_disposition": {**SCD2, "boundary_timestamp": "2024-02-01T00:00:00Z"}},
            [{"id": 1, "v": "a2"}],
        ),
    ],
}


# Cases whose second load merges two new columns into the table at once: delta-rs 1.6 adds them in an
# order of its own (its schema evolution walks a hash map), Delta in the batch's order.
ADDS_SEVERAL_COLUMNS_IN_ONE_MERGE = {"delete-insert"}


@pytest.fixture
def delta_spark_available(spark):
    available, why = delta_spark_status(spark)
    if not available:
        pytest.skip(f"needs the delta-spark writer: {why}; set DELTA_SPARK_JARS to local jar files")


def load_all(spark, dataset: str, backend: str, runs) -> list[dict]:
    return [
        run_load(
            rows,
            spark=spark,
            dataset=dataset,
            table_name="t",
            pipeline_name="conformance",
            backend=backend,
            **args,
        ).metrics
        for args, rows in runs
    ]


@pytest.mark.parametrize("case", sorted(RUNS))
def test_both_writers_agree(spark, tmp_path, delta_spark_available, case):
    by_rs = load_all(spark, str(tmp_path / "rs"), "delta-rs", RUNS[case])
    by_spark = load_all(spark, str(tmp_path / "spark"), "delta-spark", RUNS[case])
    drop = ("_dlt_load_id",) if case.startswith("scd2") else ("_dlt_load_id", "_dlt_id")
    assert read_rows(str(tmp_path / "spark" / "t"), drop=drop) == read_rows(
        str(tmp_path / "rs" / "t"), drop=drop
    )
    schema = [pa.schema(DeltaTable(str(tmp_path / d / "t")).schema().to_arrow()) for d in ("rs", "spark")]
    fields = [[(f.name, f.type) for f in s] for s in schema]
    if case in ADDS_SEVERAL_COLUMNS_IN_ONE_MERGE:  # delta-rs 1.6 orders those its own way (WRITERS.md)
        assert sorted(fields[1], key=str) == sorted(fields[0], key=str)
    else:
        assert fields[1] == fields[0]
    for rs_metrics, spark_metrics in zip(by_rs, by_spark, strict=True):
        assert set(spark_metrics) == set(rs_metrics)
        counted = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted", "rows_staged")
        assert {k: spark_metrics.get(k) for k in counted} == {k: rs_metrics.get(k) for k in counted}
