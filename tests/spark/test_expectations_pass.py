"""The rows a load quarantines come from staging's one pass over the batch (spark/observed_rows.py):
after that pass no job reads the source again for them, nor for the counts. Proved by deleting the
source's files once the pass ran: the counts and the quarantined rows are still there, exact.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from decimal import Decimal

import pytest

from airflow_provider_deltamerge.model.expectations import parse_expectations
from airflow_provider_deltamerge.spark import expectations as spark_checks

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

EXPECTATIONS = {"drop": {"positive": "amount > 0"}, "quarantine": {"known": "country IN ('DE', 'FR')"}}


def test_the_quarantined_rows_and_counts_come_from_the_pass_not_the_source_again(spark, tmp_path):
    at = datetime(2024, 3, 1, 12, 30, tzinfo=timezone.utc)
    rows = [(n, Decimal(n - 2), "XX" if n % 3 == 0 else "DE", at, [n]) for n in range(1, 31)]
    source = str(tmp_path / "batch")
    schema = "id INT, amount DECIMAL(10,2), country STRING, ts TIMESTAMP, tags ARRAY<INT>"
    spark.createDataFrame(rows, schema).write.parquet(source)
    checks = spark_checks.check(spark.read.parquet(source), parse_expectations(EXPECTATIONS))
    kept = checks.kept.collect()  # staging's one pass
    shutil.rmtree(source)  # nothing can read the source again
    counts = checks.counts(len(kept))
    assert (counts.rows, counts.dropped, counts.quarantined, counts.in_pass) == (30, 2, 10, True)
    quarantined = checks.quarantined(counts).collect()
    assert sorted(r["id"] for r in quarantined) == [3, 6, 9, 12, 15, 18, 21, 24, 27, 30]
    first = min(quarantined, key=lambda r: r["id"])
    assert (first["amount"], first["tags"], first[spark_checks.FAILED]) == (Decimal("1.00"), [3], ["known"])
    assert first["ts"] == spark.createDataFrame([(at,)], "ts TIMESTAMP").first()["ts"]  # as Spark gives it
    assert quarantined[0].__fields__ == ["id", "amount", "country", "ts", "tags", spark_checks.FAILED]
