"""After staging's one pass over the batch, its expectations never read the source again
(spark/expectations.py): the counts come from the pass; where no row is quarantined nothing is read
for them, and where rows are, they are those the pass carried out (a small batch,
spark/observed_rows.py) or come from the flagged batch the pass held in Spark's cache for the load
(spark/held.py). Proved by deleting the source's files once the pass ran.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager

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


@contextmanager
def session_time_zone(spark, zone: str = "America/New_York"):
    """The session's time zone set to one that is not UTC (New York's repeated hour is in the rows)."""
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


def test_the_rows_quarantined_keep_every_value_as_the_pass_computed_it(spark, tmp_path, set_aside_rows):
    """Timestamps in a session time zone that is not UTC, decimals, bytes and nested values come out as
    the batch has them, whichever way the rows leave the pass."""
    source = str(tmp_path / "batch")
    with session_time_zone(spark):
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


def decided_on_the_driver(checks):
    """Staging's pass where it collects every row as it is: the flagged batch collected, then split."""
    return checks.collecting(lambda staged: staged.toArrow())(checks.flagged)


def test_decided_on_the_driver_the_rows_set_aside_keep_every_value(spark, tmp_path):
    """Where staging collects every row (spark/arrow_expectations.py), the rows set aside come out of the
    collected rows with every value as the batch has it, and nothing reads the source again."""
    source = str(tmp_path / "batch")
    with session_time_zone(spark):
        spark.createDataFrame(typed_rows(), TYPED).write.parquet(source)
        expected = spark.read.parquet(source).filter("id % 4 = 0").orderBy("id").toArrow()
        expectations = {"quarantine": {"four": "id % 4 <> 0"}, "fail": {"small": "id < 100"}}
        checks = spark_checks.check(
            spark.read.parquet(source), parse_expectations(expectations), on_driver=True
        )
        kept = decided_on_the_driver(checks)
        shutil.rmtree(source)  # nothing can read the source again
        counts = checks.counts(kept.num_rows)
        quarantined = checks.quarantined(counts).sort_by("id")
    assert (counts.rows, counts.quarantined, counts.failing, kept.num_rows) == (12, 3, 0, 9)
    assert kept.column_names == [f.name for f in expected.schema]  # without the flags
    assert quarantined.drop_columns([spark_checks.FAILED]).equals(expected)
    assert quarantined.column(spark_checks.FAILED).to_pylist() == [["four"]] * 3


def test_decided_on_the_driver_each_row_counts_under_its_strictest_action(spark):
    rows = [(1, 5, "DE"), (2, -1, "DE"), (3, 5, "XX"), (4, -1, "XX"), (5, 500, "XX")]
    expectations = {
        "warn": {"some": "amount < 100"},
        "drop": {"positive": "amount > 0"},
        "quarantine": {"known": "country = 'DE'"},
        "fail": {"sane": "amount < 200"},
    }
    flagged = spark.createDataFrame(rows, "id INT, amount INT, country STRING")
    checks = spark_checks.check(flagged, parse_expectations(expectations), on_driver=True)
    kept = decided_on_the_driver(checks)
    counts = checks.counts(kept.num_rows)
    assert kept.column("id").to_pylist() == [1]
    assert counts.failed == {"some": 1, "positive": 2, "known": 3, "sane": 1}
    assert (counts.rows, counts.dropped, counts.quarantined, counts.failing) == (5, 1, 2, 1)
    assert checks.quarantined(counts).column("id").to_pylist() == [3, 4]
    failing = checks.rows_failing("fail", 3)
    assert failing == [
        {"id": 5, "amount": 500, "country": "XX", spark_checks.FAILED: ["some", "known", "sane"]}
    ]


def test_a_load_quarantines_the_same_rows_whichever_side_decides(spark, tmp_path, monkeypatch):
    """An upsert's staging collects every row as it is: the driver decides; a delete-insert deduplicates
    in Spark: Spark decides. The quarantine tables of the same batch are the same, value for value (no
    array column: one would make a child table, which staging does not collect)."""
    from deltalake import DeltaTable

    from airflow_provider_deltamerge import run_load
    from airflow_provider_deltamerge.spark import arrow_expectations

    splits = []
    split = arrow_expectations.split
    monkeypatch.setattr(arrow_expectations, "split", lambda *a: splits.append(1) or split(*a))
    source = str(tmp_path / "batch")
    tables, decided = {}, {}
    with session_time_zone(spark):
        flat = [row[:6] + row[7:] for row in typed_rows()]
        spark.createDataFrame(
            flat, TYPED.replace(" items ARRAY<STRUCT<sku: STRING, seen: TIMESTAMP>>,", "")
        ).write.parquet(source)
        for strategy in ("upsert", "delete-insert"):
            splits.clear()
            dataset = str(tmp_path / strategy)
            info = run_load(
                spark.read.parquet(source),
                spark=spark,
                dataset=dataset,
                table_name="t",
                write_disposition={"disposition": "merge", "strategy": strategy},
                primary_key="id",
                expectations={"quarantine": {"four": "id % 4 <> 0"}},
                backend="delta-rs",
            )
            assert info.metrics["rows_quarantined"] == 3
            own = [*TYPED_NAMES, "_dlt_expectations"]
            tables[strategy] = (
                DeltaTable(f"{dataset}/_dlt_quarantine_t").to_pyarrow_table(columns=own).sort_by("id")
            )
            decided[strategy] = bool(splits)
    assert decided == {"upsert": True, "delete-insert": False}
    assert tables["upsert"].column("id").to_pylist() == [4, 8, 12]
    assert tables["upsert"].equals(tables["delete-insert"])


TYPED_NAMES = ["id", "at", "local", "day", "price", "raw", "attrs"]
