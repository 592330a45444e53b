"""Keys through run_load: compound keys, naming, null / missing keys, duplicates (dlt D, UP-3, MS-4)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pyspark
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import (
    ConfigError,
    DuplicateKeyError,
    MissingKeyColumnError,
    NullKeyError,
    SourceError,
    run_load,
)
from airflow_provider_deltamerge.delta.delta_spark_status import delta_spark_status
from airflow_provider_deltamerge.delta.selection import select_writer
from tests.helpers import ordered, read_rows, table_version

UPSERT = {"disposition": "merge", "strategy": "upsert"}
INSERT_ONLY = {"disposition": "merge", "strategy": "insert-only"}


def load(spark, dataset, data, **arguments):
    arguments.setdefault("table_name", "orders")
    arguments.setdefault("pipeline_name", "erp")
    arguments.setdefault("write_disposition", "merge")
    return run_load(data, spark=spark, dataset=dataset, **arguments)


def load_ids(dataset):
    return sorted(r["load_id"] for r in DeltaTable(f"{dataset}/_dlt_loads").to_pyarrow_table().to_pylist())


def test_compound_primary_key_compares_column_by_column(spark, dataset):
    path = f"{dataset}/orders"
    load(
        spark,
        dataset,
        [
            {"a": "x", "b": "1", "v": "old"},
            {"a": "x", "b": "2", "v": "old"},
            {"a": "x1", "b": "", "v": "old"},  # would collide with ("x", "1") if the parts were concatenated
            {"a": "y", "b": "1", "v": "old"},
        ],
        primary_key=["a", "b"],
    )
    load(
        spark,
        dataset,
        [
            {"a": "x", "b": "1", "v": "new"},
            {"a": "y", "b": "2", "v": "new"},
            {"a": "y", "b": "1", "gone": True},
        ],
        primary_key=["a", "b"],
        columns={"gone": {"hard_delete": True}},
    )
    assert read_rows(path) == ordered(
        [
            {"a": "x", "b": "1", "v": "new", "gone": None},
            {"a": "x", "b": "2", "v": "old", "gone": None},
            {"a": "x1", "b": "", "v": "old", "gone": None},
            {"a": "y", "b": "2", "v": "new", "gone": None},
        ]
    )
    # a compound merge key replaces exactly its own partitions
    load(spark, dataset, [{"a": "x", "b": "2", "v": "part"}], merge_key=["a", "b"])
    assert read_rows(path) == ordered(
        [
            {"a": "x", "b": "1", "v": "new", "gone": None},
            {"a": "x", "b": "2", "v": "part", "gone": None},
            {"a": "x1", "b": "", "v": "old", "gone": None},
            {"a": "y", "b": "2", "v": "new", "gone": None},
        ]
    )


def test_key_and_hint_names_go_through_snake_case(spark, dataset):
    path = f"{dataset}/orders"
    hints = {"UpdatedAt": {"dedup_sort": "desc"}, "IsDeleted": {"hard_delete": True}}
    info = load(
        spark,
        dataset,
        [
            {"ID": 1, "TxId": 10, "UpdatedAt": 1, "Amount": 5},
            {"ID": 1, "TxId": 10, "UpdatedAt": 2, "Amount": 6},
            {"ID": 1, "TxId": 11, "UpdatedAt": 1, "Amount": 7},
        ],
        table_name="Orders",
        primary_key=["ID", "TxId"],
        columns=hints,
    )
    assert info.table_path == path
    assert read_rows(path) == ordered(
        [
            {"id": 1, "tx_id": 10, "updated_at": 2, "amount": 6},
            {"id": 1, "tx_id": 11, "updated_at": 1, "amount": 7},
        ]
    )
    load(
        spark,
        dataset,
        [
            {"ID": 1, "TxId": 11, "UpdatedAt": 3, "IsDeleted": True},
            {"ID": 2, "TxId": 10, "UpdatedAt": 1, "Amount": 1},
        ],
        table_name="Orders",
        primary_key=["ID", "TxId"],
        columns=hints,
    )
    assert read_rows(path) == ordered(
        [
            {"id": 1, "tx_id": 10, "updated_at": 2, "amount": 6, "is_deleted": None},
            {"id": 2, "tx_id": 10, "updated_at": 1, "amount": 1, "is_deleted": None},
        ]
    )
    # naming="direct" keeps names as given
    load(spark, dataset, [{"TxId": 1}], table_name="Raw", primary_key="TxId", naming="direct")
    assert read_rows(f"{dataset}/Raw") == [{"TxId": 1}]


def test_null_or_missing_key_values_fail_and_change_nothing(spark, dataset):
    path = f"{dataset}/orders"
    first = load(spark, dataset, [{"id": 1, "day": "d1", "v": "a"}], primary_key="id")
    bad = [{"id": 2, "day": "d1", "v": "b"}, {"id": None, "day": "d1", "v": "c"}, {"day": "d2", "v": "d"}]
    with pytest.raises(NullKeyError) as raised:
        load(spark, dataset, bad, primary_key="id")
    assert (raised.value.column, raised.value.hint, raised.value.null_rows) == ("id", "primary_key", 2)
    assert "'id'" in str(raised.value) and "2 row(s)" in str(raised.value)
    assert isinstance(raised.value, SourceError)

    with pytest.raises(NullKeyError) as raised:
        load(spark, dataset, [{"id": 3, "day": None}], merge_key="day")
    assert (raised.value.column, raised.value.hint, raised.value.null_rows) == ("day", "merge_key", 1)
    assert "'day'" in str(raised.value) and "1 row(s)" in str(raised.value)

    # a null key fails append too: the key hint makes the column non-nullable (KEY-2)
    with pytest.raises(NullKeyError):
        load(spark, dataset, [{"id": None}], primary_key="id", write_disposition="append")

    assert read_rows(path) == [{"id": 1, "day": "d1", "v": "a"}]
    assert table_version(path) == 0
    assert load_ids(dataset) == [first.load_id]


def test_key_column_absent_from_the_data_fails_and_changes_nothing(spark, dataset):
    path = f"{dataset}/orders"
    first = load(spark, dataset, [{"id": 1, "v": "a"}], primary_key="id")
    for arguments, column, hint in (
        ({"primary_key": "order_id"}, "order_id", "primary_key"),
        ({"primary_key": "id", "merge_key": "day"}, "day", "merge_key"),
        ({"primary_key": ["id", "Line"], "write_disposition": UPSERT}, "line", "primary_key"),
    ):
        with pytest.raises(MissingKeyColumnError) as raised:
            load(spark, dataset, [{"id": 2, "v": "b"}, {"id": 3, "v": "c"}, {"id": 4, "v": "d"}], **arguments)
        error = raised.value
        assert (error.column, error.hint) == (column, hint)
        assert f"{column!r}" in str(error) and "3 row(s)" in str(error)
        assert "id" in str(error) and "v" in str(error)  # the columns that are there
    assert read_rows(path) == [{"id": 1, "v": "a"}]
    assert table_version(path) == 0
    assert load_ids(dataset) == [first.load_id]


@pytest.mark.parametrize("strategy", [UPSERT, INSERT_ONLY], ids=["upsert", "insert-only"])
def test_duplicate_keys_fail_strategies_that_cannot_take_them(spark, dataset, strategy):
    path = f"{dataset}/orders"
    first = load(spark, dataset, [{"id": 1, "v": "a"}], write_disposition=strategy, primary_key="id")
    batch = [
        {"id": 5, "v": "x"},
        {"id": 6, "v": "y"},
        {"id": 5, "v": "z"},
        {"id": 7, "v": "w"},
        {"id": 6, "v": "q"},
    ]
    with pytest.raises(DuplicateKeyError) as raised:
        load(spark, dataset, batch, write_disposition=strategy, primary_key="id")
    error = raised.value
    assert sorted(error.examples) == [(5,), (6,)]
    assert error.duplicate_keys == 2
    assert "5" in str(error) and "6" in str(error) and "'id'" in str(error)
    assert strategy["strategy"] in str(error)
    assert read_rows(path) == [{"id": 1, "v": "a"}]
    assert table_version(path) == 0
    assert load_ids(dataset) == [first.load_id]


def test_duplicate_compound_keys_are_listed_as_tuples(spark, dataset):
    batch = [{"a": "x", "b": 1}, {"a": "x", "b": 1}, {"a": "x", "b": 2}]
    with pytest.raises(DuplicateKeyError) as raised:
        load(spark, dataset, batch, write_disposition=UPSERT, primary_key=["a", "b"])
    assert raised.value.examples == [("x", 1)]
    assert "('x', 1)" in str(raised.value)
    assert not DeltaTable.is_deltatable(f"{dataset}/orders")


def test_insert_only_does_not_count_flagged_duplicates(spark, dataset):
    # the flagged copy is filtered before the insert, so the key is not duplicated
    batch = [{"id": 1, "v": "a", "del": None}, {"id": 1, "v": "a", "del": True}]
    load(
        spark,
        dataset,
        batch,
        write_disposition=INSERT_ONLY,
        primary_key="id",
        columns={"del": {"hard_delete": True}},
    )
    assert read_rows(f"{dataset}/orders") == [{"id": 1, "v": "a", "del": None}]


def test_configuration_errors_name_the_argument_before_anything_is_read(spark, dataset):
    for strategy in ("upsert", "insert-only"):
        with pytest.raises(ConfigError, match="primary key") as raised:
            load(
                spark, dataset, [{"id": 1}], write_disposition={"disposition": "merge", "strategy": strategy}
            )
        assert raised.value.argument == "primary_key"
    with pytest.raises(ConfigError, match="'delete-insert'") as raised:
        load(spark, dataset, [{"id": 1}], write_disposition={"disposition": "merge", "strategy": "upsertt"})
    with pytest.raises(ConfigError, match="'append'"):
        load(spark, dataset, [{"id": 1}], write_disposition="merged")
    with pytest.raises(ConfigError, match="'asc'"):
        load(spark, dataset, [{"id": 1}], primary_key="id", columns={"id": {"dedup_sort": "latest"}})
    if delta_spark_status(spark)[0]:  # Delta's classes are in this session: the writer is there to take
        assert select_writer("delta-spark", spark).name == "delta-spark"
    else:
        with pytest.raises(ConfigError) as raised:
            load(spark, dataset, [{"id": 1}], backend="delta-spark")
        assert raised.value.argument == "backend" and "delta-rs" in str(raised.value)
    with pytest.raises(ConfigError, match="'delta-rs'"):
        load(spark, dataset, [{"id": 1}], backend="spark")
    assert not DeltaTable.is_deltatable(f"{dataset}/orders")
    assert not DeltaTable.is_deltatable(f"{dataset}/_dlt_loads")


# -- a DataFrame source's keys checked on the driver, or in Spark -------------------------------------


def refusal(check, source, key):
    """(examples, duplicate keys) of `check`'s DuplicateKeyError, or None where it found none."""
    from airflow_provider_deltamerge.plan.merge import MergePlan, Operation

    try:
        check(source, MergePlan(Operation.MERGE, unique_key=key, strategy="upsert"))
    except DuplicateKeyError as error:
        return sorted((tuple(map(_as_compared, e)) for e in error.examples), key=repr), error.duplicate_keys
    return None


def _as_compared(value):
    """A key value as the two checks' errors can be compared: an instant (Arrow's are in UTC, Spark's in
    the session's time zone), NaN as text."""
    return value.timestamp() if isinstance(value, datetime) else repr(value)


KEYED_ROWS = {  # schema, rows: each key's values as Spark tells them apart
    "long": ("id long, v string", [(1, "a"), (2, "b"), (1, "c"), (3, "d")]),
    "both zeros and NaNs": (
        "id double, v string",
        [(0.0, "a"), (-0.0, "b"), (float("nan"), "c"), (float("nan"), "d")],
    ),
    "text": ("id string, v string", [("a", "x"), ("A", "y"), ("b", "z")]),
    "compound": ("a string, b int, v string", [("x", 1, "p"), ("x", 2, "q"), ("x", 1, "r")]),
    "timestamp": (
        "id timestamp, v string",
        [(datetime(2024, 3, 31, 1, 30), "a"), (datetime(2024, 3, 31, 1, 30), "b")],
    ),
    "decimal": (
        "id decimal(20,4), v string",
        [(Decimal("1.5000"), "a"), (Decimal("1.5"), "b"), (Decimal("2"), "c")],
    ),
    "unique": ("id long, v string", [(1, "a"), (2, "b")]),
}


@pytest.mark.parametrize("case", KEYED_ROWS, ids=list(KEYED_ROWS))
def test_a_small_batch_s_keys_checked_on_the_driver_are_refused_as_spark_refuses_them(spark, case):
    from airflow_provider_deltamerge.delta import unique_keys

    schema, rows = KEYED_ROWS[case]
    source = spark.createDataFrame(rows, schema)
    key = ("a", "b") if case == "compound" else ("id",)
    on_driver = refusal(lambda s, p: unique_keys.check_dataframe(s, p, 1024), source, key)
    in_spark = refusal(unique_keys.check_spark, source, key)
    assert on_driver == in_spark
    assert (in_spark is None) == (case in ("unique", "text"))


def test_keys_arrow_would_tell_apart_otherwise_are_checked_in_spark(spark, monkeypatch):
    """A struct key, or text in a case-insensitive collation, is grouped by Spark whatever the batch's
    size; a key of numbers only where its values are many (by the batch's rows, else its size), text where
    the batch is large. Each is refused alike."""
    from airflow_provider_deltamerge.delta import unique_keys

    grouped = []
    check_spark = unique_keys.check_spark
    monkeypatch.setattr(unique_keys, "check_spark", lambda s, p: grouped.append(p) or check_spark(s, p))

    def checked_by_spark(source, batch_bytes: int | None = 1024, rows: int | None = None) -> bool:
        grouped.clear()
        found = refusal(lambda s, p: unique_keys.check_dataframe(s, p, batch_bytes, rows), source, ("id",))
        assert found is not None and found[1] == 1
        return bool(grouped)

    numbers = spark.createDataFrame([(1,), (1,)], "id long")
    assert not checked_by_spark(numbers)
    assert checked_by_spark(numbers, unique_keys.KEYS_ON_DRIVER_BYTES + 1)
    rows = unique_keys.KEYS_ON_DRIVER_BYTES // 9  # 8 bytes and a validity bit a value
    assert not checked_by_spark(numbers, unique_keys.KEYS_ON_DRIVER_BYTES + 1, rows)  # counted: small keys
    assert checked_by_spark(numbers, None, rows * 2)
    texts = spark.createDataFrame([("a",), ("a",)], "id string")
    assert checked_by_spark(texts, unique_keys.KEYS_ON_DRIVER_BYTES + 1, 2)  # text: the batch's size
    assert checked_by_spark(spark.createDataFrame([((1, "a"),), ((1, "a"),)], "id struct<n: int, t: string>"))
    if int(pyspark.__version__.split(".")[0]) >= 4:
        collated = spark.createDataFrame([("a",), ("A",)], "id string").selectExpr(
            "id COLLATE UTF8_LCASE AS id"
        )
        assert checked_by_spark(collated)
