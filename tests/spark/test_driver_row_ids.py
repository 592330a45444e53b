"""Row ids hashed on the driver (spark/driver_row_ids.py) are the ids Spark hashes: for every key type,
in the collection's own path and end to end through run_load, change events included; and where the
driver hashes them, Spark's plan no longer does."""

from __future__ import annotations

import logging
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.delta.arrow_stream import collected
from airflow_provider_deltamerge.model.naming import ROW_ID
from airflow_provider_deltamerge.spark import driver_row_ids, frames

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from spark_work import SparkWork  # noqa: E402

from ..budget import examples  # noqa: E402

TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from('"\\/\x00\x1f\x7f\u2028é😀'), max_size=8)
KEY_VALUES = {  # a key column's Spark type: its values
    "long": st.integers(-(2**63), 2**63 - 1),
    "int": st.integers(-(2**31), 2**31 - 1),
    "string": TEXT,
    "date": st.dates(),
    "timestamp": st.datetimes(),
    "decimal(12,3)": st.decimals(-(10**9) + 1, 10**9 - 1, places=3, allow_nan=False),
    "double": st.floats(allow_nan=True, allow_infinity=True),
    "boolean": st.booleans(),
    "binary": st.binary(max_size=8),
}
KEYS = st.sampled_from(sorted(KEY_VALUES)).flatmap(
    lambda kind: st.tuples(
        st.just(kind), st.lists(st.tuples(st.none() | KEY_VALUES[kind], st.integers(0, 9)), max_size=12)
    )
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(keys=KEYS)
def test_ids_hashed_on_the_driver_equal_sparks_for_every_key_type(spark, keys):
    kind, rows = keys
    df = spark.createDataFrame([(v, n) for v, n in rows], f"k {kind}, n int")
    for key in (("k",), ("k", "n")):
        by_spark = collected(
            spark, "probe", df.withColumn(ROW_ID, frames.short_hash(frames.row_id_text(key)))
        )
        on_driver = driver_row_ids.filled(collected(spark, "probe", driver_row_ids.with_row_id_text(df, key)))
        assert on_driver.schema == by_spark.schema
        assert by_row(on_driver) == by_row(by_spark), (kind, key)


def by_row(table) -> list:
    """Each row's values with its id, in one order (a collection's rows arrive in any order)."""
    return sorted(map(repr, table.to_pylist()))


def test_short_hashes_spell_sparks_short_hash(spark):
    texts = ["", '{"id":1}', "é😀\x00", "x" * 1000]
    df = spark.createDataFrame([(t,) for t in texts], "t string")
    expected = [r[0] for r in df.select(frames.short_hash(df.t)).collect()]
    assert driver_row_ids.short_hashes([t.encode() for t in texts]) == expected
    assert all(len(h) == frames.ID_LENGTH for h in expected)


UPSERT = {"disposition": "merge", "strategy": "upsert"}


def rows(keys: int) -> tuple[str, ...]:
    """200 rows of `keys` keys (each key's rows then change events of it): a key of text with a quote,
    a backslash and a newline in it, a date and a number."""
    return (
        f"id % {keys} AS id",
        f"concat('k', id % {keys} % 7, '\"\\\\', char(10)) AS name",
        f"date_add(DATE'2024-01-01', CAST(id % {keys} AS INT)) AS day",
        "id AS lsn",
        "concat('v', id) AS v",
    )


def loaded_ids(spark, tmp_path, monkeypatch, on_driver: bool, keys: int, **hints):
    """The table's ids by key after two upserts (the keys below 60, then all), and each load's work."""
    side = "driver" if on_driver else "spark"
    monkeypatch.setattr(driver_row_ids, "SMALL_BATCH_BYTES", 2**21 if on_driver else -1)
    landing, dataset = str(tmp_path / f"landing-{side}"), str(tmp_path / side)
    spark.range(200).selectExpr(*rows(keys)).write.parquet(landing)
    works = []
    for batch in (spark.read.parquet(landing).filter("id < 60"), spark.read.parquet(landing)):
        with SparkWork(spark) as work:
            run_load(
                batch, spark=spark, dataset=dataset, table_name="items", write_disposition=UPSERT,
                primary_key=["id", "name", "day"], backend="delta-rs", **hints,
            )  # fmt: skip
        works.append(work)
    table = DeltaTable(f"{dataset}/items").to_pyarrow_table().to_pylist()
    return {(r["id"], r["name"], r["day"]): r[ROW_ID] for r in table}, works


@pytest.mark.parametrize(
    "keys, hints", [(200, {}), (50, {"sequence_by": "lsn"})], ids=["rows", "change events"]
)
def test_a_load_hashes_its_ids_on_the_driver_as_spark_would(
    spark, tmp_path, monkeypatch, caplog, keys, hints
):
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge")
    on_driver, driver_work = loaded_ids(spark, tmp_path, monkeypatch, True, keys, **hints)
    assert "its row ids are hashed on the driver" in caplog.text
    caplog.clear()
    in_spark, spark_work = loaded_ids(spark, tmp_path, monkeypatch, False, keys, **hints)
    assert "hashed on the driver" not in caplog.text
    assert len(on_driver) == keys and len(set(on_driver.values())) == keys
    assert on_driver == in_spark
    assert all("sha2(" not in plan for work in driver_work for plan in work.plans)
    assert all(any("sha2(" in plan for plan in work.plans) for work in spark_work)


def test_ids_the_data_brings_are_kept_not_hashed(spark, dataset, caplog):
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge")
    rows = [{"id": i, "v": "a", "_dlt_id": f"given-{i}"} for i in range(5)]
    run_load(
        rows, spark=spark, dataset=dataset, table_name="items", write_disposition=UPSERT, primary_key="id"
    )
    table = DeltaTable(f"{dataset}/items").to_pyarrow_table()
    assert sorted(table[ROW_ID].to_pylist()) == [f"given-{i}" for i in range(5)]
    assert "hashed on the driver" not in caplog.text


def test_decimal_keys_keep_their_scale_in_the_hashed_text(spark):
    df = spark.createDataFrame([(Decimal("1.000"),), (Decimal("1.5"),)], "k decimal(12,3)")
    texts = collected(spark, "probe", driver_row_ids.with_row_id_text(df, ("k",)))[driver_row_ids.ROW_ID_TEXT]
    assert sorted(texts.to_pylist()) == ['{"k":1.000}', '{"k":1.500}']


WIDENED_KEYS = [  # the table's key type, the batch's
    ("double", "bigint"),
    ("string", "int"),
    ("decimal(12,3)", "decimal(10,1)"),
    ("double", "float"),
]


@pytest.mark.parametrize("table_type, batch_type", WIDENED_KEYS, ids=lambda t: t.replace(",", "_"))
def test_a_key_the_table_widens_hashes_its_text_as_the_batch_types_it(
    spark, tmp_path, monkeypatch, table_type, batch_type
):
    """Spark hashes the key before the batch is aligned to the table: so does the driver, though the
    aligned column spells the key otherwise ('1.5' against '1.500', 7 against '7', 0.1f against 0.1d)."""
    ids = {}
    for side, small_batch_bytes in (("driver", 2**21), ("spark", -1)):
        monkeypatch.setattr(driver_row_ids, "SMALL_BATCH_BYTES", small_batch_bytes)
        dataset = str(tmp_path / side)
        for key_type in (table_type, batch_type):
            batch = spark.range(1, 6).selectExpr(f"CAST(id * 1.1 AS {key_type}) AS k", "id AS v")
            run_load(
                batch, spark=spark, dataset=dataset, table_name="items", write_disposition=UPSERT,
                primary_key="k", backend="delta-rs",
            )  # fmt: skip
        table = DeltaTable(f"{dataset}/items").to_pyarrow_table().to_pylist()
        ids[side] = sorted((str(r["k"]), r[ROW_ID]) for r in table)
    assert ids["driver"] == ids["spark"]
