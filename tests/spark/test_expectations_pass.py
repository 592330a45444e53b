"""After staging's one pass over the batch, its expectations never read the source again
(spark/expectations.py): the counts come from the pass; where no row is quarantined nothing is read
for them, and where rows are, they come from the flagged batch the pass held in Spark's cache for the
load (spark/held.py). Proved by deleting the source's files once the pass ran.
"""

from __future__ import annotations

import shutil

import pytest

from airflow_provider_deltamerge.model.expectations import parse_expectations
from airflow_provider_deltamerge.spark import expectations as spark_checks
from airflow_provider_deltamerge.spark.held import held_for_load

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

EXPECTATIONS = {"drop": {"positive": "amount > 0"}, "quarantine": {"known": "country IN ('DE', 'FR')"}}


def test_without_a_quarantined_row_nothing_reads_the_source_again_after_the_pass(spark, tmp_path):
    rows = [(n, n - 2, "DE", [n]) for n in range(1, 31)]
    source = str(tmp_path / "batch")
    spark.createDataFrame(rows, "id INT, amount INT, country STRING, tags ARRAY<INT>").write.parquet(source)
    checks = spark_checks.check(spark.read.parquet(source), parse_expectations(EXPECTATIONS))
    kept = checks.kept.collect()  # staging's one pass
    shutil.rmtree(source)  # nothing can read the source again
    counts = checks.counts(len(kept))
    assert (counts.rows, counts.dropped, counts.quarantined) == (30, 2, 0)
    assert counts.failed == {"positive": 2, "known": 0}
    quarantined = checks.quarantined(counts)
    assert quarantined.collect() == []
    assert quarantined.columns == ["id", "amount", "country", "tags", spark_checks.FAILED]


def test_the_rows_quarantined_are_those_the_pass_read_not_a_second_read(spark, tmp_path):
    rows = [(n, n - 2, "DE" if n % 5 else "XX", [n]) for n in range(1, 31)]
    source = str(tmp_path / "batch")
    spark.createDataFrame(rows, "id INT, amount INT, country STRING, tags ARRAY<INT>").write.parquet(source)
    with held_for_load():
        checks = spark_checks.check(spark.read.parquet(source), parse_expectations(EXPECTATIONS))
        kept = checks.kept.collect()  # staging's one pass
        shutil.rmtree(source)  # nothing can read the source again
        counts = checks.counts(len(kept))
        quarantined = checks.quarantined(counts).collect()
    assert (counts.rows, counts.dropped, counts.quarantined) == (30, 2, 6)
    assert sorted(r["id"] for r in quarantined) == [5, 10, 15, 20, 25, 30]
    assert {tuple(r[spark_checks.FAILED]) for r in quarantined} == {("known",)}
    assert spark._jsparkSession.sharedState().cacheManager().isEmpty()  # released when the load ended
