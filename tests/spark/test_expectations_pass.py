"""After staging's one pass over the batch, its expectations never read the source again
(spark/expectations.py): the counts come from the pass; where no row is quarantined nothing is read
for them, and where rows are, they are those the pass carried out (a small batch,
spark/observed_rows.py) or come from the flagged batch the pass held in Spark's cache for the load
(spark/held.py). Proved by deleting the source's files once the pass ran.
"""

from __future__ import annotations

import shutil

import pytest

from airflow_provider_deltamerge.model.expectations import parse_expectations
from airflow_provider_deltamerge.spark import expectations as spark_checks
from airflow_provider_deltamerge.spark import observed_rows
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


@pytest.fixture(params=["carried", "cached"])
def set_aside_rows(request, monkeypatch) -> str:
    """How the rows to quarantine leave the pass: carried out of it (a small batch), or from the cache."""
    if request.param == "cached":  # as a batch above the estimate carried
        monkeypatch.setattr(observed_rows, "CARRIED_ESTIMATE_BYTES", 0)
    return request.param


def cache_is_empty(spark) -> bool:
    return spark._jsparkSession.sharedState().cacheManager().isEmpty()


def test_the_rows_quarantined_are_those_the_pass_read_not_a_second_read(spark, tmp_path, set_aside_rows):
    rows = [(n, n - 2, "DE" if n % 5 else "XX", [n]) for n in range(1, 31)]
    source = str(tmp_path / "batch")
    spark.createDataFrame(rows, "id INT, amount INT, country STRING, tags ARRAY<INT>").write.parquet(source)
    with held_for_load():
        checks = spark_checks.check(spark.read.parquet(source), parse_expectations(EXPECTATIONS))
        kept = checks.kept.collect()  # staging's one pass
        shutil.rmtree(source)  # nothing can read the source again
        counts = checks.counts(len(kept))
        quarantined = checks.quarantined(counts).collect()
        cached_while_loading = not cache_is_empty(spark)
    assert (counts.rows, counts.dropped, counts.quarantined) == (30, 2, 6)
    assert sorted(r["id"] for r in quarantined) == [5, 10, 15, 20, 25, 30]
    assert {tuple(r[spark_checks.FAILED]) for r in quarantined} == {("known",)}
    assert cached_while_loading == (set_aside_rows == "cached")  # a small batch is not cached
    assert cache_is_empty(spark)  # released when the load ended


def test_a_batch_quarantined_whole_is_quarantined_from_the_pass(spark, tmp_path, set_aside_rows):
    """No row reaches staging, yet its pass ran over every row: the rows quarantined are those it read."""
    rows = [(n, n, "XX", [n]) for n in range(1, 11)]
    source = str(tmp_path / "batch")
    spark.createDataFrame(rows, "id INT, amount INT, country STRING, tags ARRAY<INT>").write.parquet(source)
    with held_for_load():
        checks = spark_checks.check(spark.read.parquet(source), parse_expectations(EXPECTATIONS))
        assert checks.kept.collect() == []  # staging's one pass
        shutil.rmtree(source)
        counts = checks.counts(0)
        quarantined = checks.quarantined(counts).collect()
    assert (counts.rows, counts.quarantined) == (10, 10)
    assert sorted(r["id"] for r in quarantined) == list(range(1, 11))


TYPED = (
    "id INT, at TIMESTAMP, local TIMESTAMP_NTZ, day DATE, price DECIMAL(20, 4), raw BINARY, "
    "items ARRAY<STRUCT<sku: STRING, seen: TIMESTAMP>>, attrs MAP<STRING, DOUBLE>"
)


def typed_rows() -> list[tuple]:
    from datetime import date, datetime
    from decimal import Decimal

    rows = []
    for n in range(1, 13):
        at = datetime(2024, 11, 3, 1, 30 + n) if n % 2 else None  # New York's repeated hour
        items = [("s" + str(n), datetime(2024, 3, 10, 3, n))] if n % 3 else []
        rows.append(
            (
                n,
                at,
                datetime(2024, 1, 1, n),
                date(1, 1, n),
                Decimal(f"{n}1234567890.1234"),
                bytes([n]),
                items,
                {"w": n / 3},
            )
        )
    return rows


def test_the_rows_quarantined_keep_every_value_as_the_pass_computed_it(spark, tmp_path, set_aside_rows):
    """Timestamps in a session time zone that is not UTC, decimals, bytes and nested values come out as
    the batch has them, whichever way the rows leave the pass."""
    source = str(tmp_path / "batch")
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        spark.createDataFrame(typed_rows(), TYPED).write.parquet(source)
        expected = spark.read.parquet(source).filter("id % 4 = 0").orderBy("id").toArrow()
        with held_for_load():
            checks = spark_checks.check(
                spark.read.parquet(source), parse_expectations({"quarantine": {"four": "id % 4 <> 0"}})
            )
            kept = checks.kept.collect()
            shutil.rmtree(source)
            counts = checks.counts(len(kept))
            quarantined = checks.quarantined(counts).orderBy("id").toArrow()
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    assert counts.quarantined == 3 and len(kept) == 9
    assert quarantined.drop_columns([spark_checks.FAILED]).equals(expected)
    assert quarantined.column(spark_checks.FAILED).to_pylist() == [["four"]] * 3


ODD_NAMES = ["a.b", "it's", "back\\slash", "tick`d", "sp ace"]


def test_odd_column_and_expectation_names_come_out_as_given(spark, tmp_path, set_aside_rows):
    """Column names with dots, quotes, a backslash or a backtick, and expectation names with quotes and a
    backslash, name the rows set aside and the expectations they failed exactly as given."""
    source = str(tmp_path / "batch")
    schema = ", ".join(f"`{n.replace('`', '``')}` INT" for n in ODD_NAMES)
    spark.createDataFrame([(n, n, n, n, n) for n in range(1, 11)], schema).write.parquet(source)
    named = {
        "quarantine": {"isn't 'even'": "`a.b` % 2 = 0", "back\\slash": "`it's` < 9"},
        "warn": {'"quoted"': "`tick``d` > 100"},
    }
    with held_for_load():
        checks = spark_checks.check(spark.read.parquet(source), parse_expectations(named))
        kept = checks.kept.collect()
        counts = checks.counts(len(kept))
        quarantined = checks.quarantined(counts).orderBy("`a.b`").collect()
    assert sorted(r["a.b"] for r in kept) == [2, 4, 6, 8]
    assert counts.failed == {"isn't 'even'": 5, "back\\slash": 2, '"quoted"': 10}
    assert quarantined[0].asDict().keys() == {*ODD_NAMES, spark_checks.FAILED}
    failed = {r["a.b"]: r[spark_checks.FAILED] for r in quarantined}
    odd, high = ['"quoted"', "isn't 'even'"], ['"quoted"', "back\\slash"]
    assert failed == {1: odd, 3: odd, 5: odd, 7: odd, 9: [*odd, "back\\slash"], 10: high}
    shown = checks.rows_failing("quarantine", 2)
    assert len(shown) == 2 and all(set(r) == {*ODD_NAMES, spark_checks.FAILED} for r in shown)
