"""After staging's one pass over the batch, its expectations read the source again only for rows to
quarantine (spark/expectations.py): the counts come from the pass, and where no row is quarantined
nothing is read for them. Proved by deleting the source's files once the pass ran.
"""

from __future__ import annotations

import shutil

import pytest

from airflow_provider_deltamerge.model.expectations import parse_expectations
from airflow_provider_deltamerge.spark import expectations as spark_checks

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
