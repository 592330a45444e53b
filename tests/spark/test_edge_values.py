"""Every value a type can hold is loaded exactly (read back and compared) or refused with the package's
own typed error before anything is committed (the table version unchanged), on every strategy.

The edge values of each type share one batch, so each strategy costs one or two loads per writer.
"""

from __future__ import annotations

import math
from datetime import date, datetime, timezone
from decimal import Decimal

import pandas as pd
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import (
    CastError,
    DeltaMergeError,
    DuplicateKeyError,
    Incremental,
    SequenceError,
    run_load,
)
from airflow_provider_deltamerge.errors import TruncationWarning

pytestmark = pytest.mark.spark

UTC = timezone.utc
NINES = Decimal("0." + "9" * 38)
WIDEST = 10**38 - 1
STRATEGIES = {
    "append": {"write_disposition": "append"},
    "replace": {"write_disposition": "replace"},
    "delete-insert": {"write_disposition": "merge", "primary_key": "id"},
    "upsert": {"write_disposition": {"disposition": "merge", "strategy": "upsert"}, "primary_key": "id"},
    "insert-only": {
        "write_disposition": {"disposition": "merge", "strategy": "insert-only"},
        "primary_key": "id",
    },
    "scd2": {"write_disposition": {"disposition": "merge", "strategy": "scd2"}, "merge_key": "id"},
}
COLUMNS = {
    "i8": {"data_type": "bigint", "precision": 8},
    "i16": {"data_type": "bigint", "precision": 16},
    "i32": {"data_type": "bigint", "precision": 32},
    "frac": {"data_type": "decimal", "precision": 38, "scale": 38},
    "whole": {"data_type": "decimal", "precision": 38, "scale": 0},
    "half": {"data_type": "decimal", "precision": 38, "scale": 19},
    "wall": {"data_type": "timestamp", "timezone": False},
}
# column -> its edge values, a null among them; row n holds each column's value n (null past its end)
EDGES = {
    "i8": [-(2**7), 2**7 - 1, None],
    "i16": [-(2**15), 2**15 - 1, None],
    "i32": [-(2**31), 2**31 - 1, None],
    "i64": [-(2**63), 2**63 - 1, 0, None],
    "f": [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, -5e-324, 1.7976931348623157e308, None],
    "frac": [NINES, Decimal(0), Decimal("-0." + "9" * 38), Decimal("1E-38"), None],
    "whole": [Decimal(WIDEST), Decimal(-WIDEST), Decimal(0), None],
    "half": [Decimal("9" * 19 + "." + "9" * 19), Decimal("-0." + "0" * 18 + "1"), None],
    "d": [date(1, 1, 1), date(9999, 12, 31), date(1970, 1, 1), None],
    "ts": [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2024, 2, 29, 12, 0, 0, 1, tzinfo=UTC),
        datetime(2024, 6, 1, 12, 0, 0, 123456),  # naive: read as UTC
        None,
    ],
    "wall": [datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999), None],
    "s": ["a\x00b", "😀 emoji \u200d", "x" * 100_000, "", None],
    "b": [b"\x00\xff", b"", bytes(range(256)), None],
    "flag": [True, False, None],
}
ROWS = [
    {"id": n, **{c: values[n] if n < len(values) else None for c, values in EDGES.items()}}
    for n in range(max(map(len, EDGES.values())))
]


def expected(column: str, value):
    """What a value reads back as: naive datetimes of a timestamp column (not timestamp_ntz) as UTC."""
    if column == "ts" and value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def same(value) -> object:
    """A value compared exactly: floats by their repr (-0.0 is not 0.0, NaN is NaN), instants in UTC."""
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    return value


def differences(path: str, want: list[dict]) -> list[tuple]:
    """(id, column, read back, loaded) of each value that did not come back as it was loaded."""
    got = {r["id"]: r for r in table(path, list(want[0]))}
    assert sorted(got) == [r["id"] for r in want]
    return [(r["id"], c, got[r["id"]][c], v) for r in want for c, v in r.items() if got[r["id"]][c] != v]


def table(path: str, columns) -> list[dict]:
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted(({c: same(r[c]) for c in columns} for r in rows), key=lambda r: r["id"])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_edge_values_of_every_type_load_exactly_on_every_strategy(spark, dataset, strategy):
    arguments = {"dataset": dataset, "table_name": "edges", "columns": COLUMNS, **STRATEGIES[strategy]}
    run_load(ROWS, spark=spark, **arguments)
    path = f"{dataset}/edges"
    want = [{"id": r["id"], **{c: same(expected(c, r[c])) for c in EDGES}} for r in ROWS]
    assert differences(path, want) == []
    if strategy in ("delete-insert", "upsert", "insert-only", "scd2"):  # the same rows matched again
        version = DeltaTable(path).version()
        run_load(ROWS, spark=spark, **arguments)
        assert differences(path, want) == []  # scd2: equal rows (NaN, -0.0...) open no versions
        assert DeltaTable(path).version() >= version


# -- refused: each before anything is committed ---

REFUSED = [
    # (columns, the bad row's values, the column named)
    ({"d": {"data_type": "decimal", "precision": 38, "scale": 0}}, {"d": Decimal(10**38)}, "d"),
    ({"d": {"data_type": "decimal", "precision": 38, "scale": 0}}, {"d": Decimal("0.5")}, "d"),
    ({"d": {"data_type": "decimal", "precision": 38, "scale": 38}}, {"d": Decimal(1)}, "d"),
    ({"d": {"data_type": "decimal", "precision": 10, "scale": 2}}, {"d": 0.125}, "d"),
    ({"d": {"data_type": "decimal", "precision": 10, "scale": 2}}, {"d": "0.125"}, "d"),
    ({"d": {"data_type": "decimal", "precision": 10, "scale": 2}}, {"d": Decimal("Infinity")}, "d"),
    ({"d": {"data_type": "wei"}}, {"d": 10**38}, "d"),
    ({}, {"d": Decimal("NaN")}, "d"),
    ({}, {"d": Decimal("1E-39")}, "d"),
    ({}, {"n": 2**63}, "n"),
    ({}, {"n": -(2**63) - 1}, "n"),
    ({"n": {"data_type": "bigint", "precision": 8}}, {"n": 128}, "n"),
    ({"n": {"data_type": "bigint", "precision": 32}}, {"n": -(2**31) - 1}, "n"),
]


@pytest.mark.writer_independent
@pytest.mark.parametrize(("columns", "bad", "column"), REFUSED, ids=lambda v: repr(v)[:40])
def test_a_value_no_type_holds_exactly_is_refused_naming_its_column(spark, dataset, columns, bad, column):
    good = {name: None for name in bad}
    first = run_load([{"id": 1, **good}], spark=spark, dataset=dataset, table_name="t", columns=columns)
    with pytest.raises(CastError) as raised:
        run_load(
            [{"id": 2, **good}, {"id": 3, **bad}],
            spark=spark,
            dataset=dataset,
            table_name="t",
            columns=columns,
        )
    assert raised.value.column == column and repr(column) in str(raised.value)
    assert "Nothing was loaded" in str(raised.value)
    assert DeltaTable(f"{dataset}/t").version() == first.table_version


@pytest.mark.writer_independent
def test_undeclared_decimals_needing_39_digits_together_are_refused_and_declared_ones_load(spark, dataset):
    rows = [{"id": 1, "d": Decimal(10**37)}, {"id": 2, "d": Decimal("0.5")}]
    with pytest.raises(CastError) as raised:
        run_load(rows, spark=spark, dataset=dataset, table_name="t")
    assert raised.value.column == "d" and "decimal(39,1)" in str(raised.value)
    assert not DeltaTable.is_deltatable(f"{dataset}/t")
    frame = pd.DataFrame({"id": [1, 2], "d": [NINES, Decimal(0)]})
    run_load(frame, spark=spark, dataset=dataset, table_name="t", columns={"d": COLUMNS["frac"]})
    assert [r["d"] for r in table(f"{dataset}/t", ["id", "d"])] == [NINES, Decimal(0)]


# -- nanoseconds: Delta stores microseconds ---

NANOS = "2024-01-01T00:00:00.123456789"


@pytest.mark.writer_independent
def test_nanoseconds_of_a_value_column_are_dropped_with_a_warning(spark, dataset):
    frame = pd.DataFrame({"id": [1], "at": pd.to_datetime([NANOS])})
    with pytest.warns(TruncationWarning, match="'at' holds nanoseconds"):
        run_load(frame, spark=spark, dataset=dataset, table_name="t")
    text = [{"id": 2, "at": NANOS + "Z"}]
    with pytest.warns(TruncationWarning, match="'at' holds nanoseconds"):
        run_load(
            text, spark=spark, dataset=dataset, table_name="t", columns={"at": {"data_type": "timestamp"}}
        )
    stored = datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    assert [r["at"] for r in table(f"{dataset}/t", ["id", "at"])] == [stored, stored]


@pytest.mark.writer_independent
@pytest.mark.parametrize("source", ["pandas", "text"])
@pytest.mark.parametrize("role", ["primary_key", "cursor"])
def test_nanoseconds_of_a_key_or_cursor_are_refused_not_dropped(spark, dataset, source, role):
    columns = {"at": {"data_type": "timestamp"}}
    seed = [{"id": 0, "at": "2023-01-01T00:00:00Z"}]
    first = run_load(seed, spark=spark, dataset=dataset, table_name="t", columns=columns)
    at = pd.to_datetime([NANOS, "2024-01-01T00:00:00.123456"]) if source == "pandas" else [NANOS + "Z"] * 2
    data = pd.DataFrame({"id": [1, 2], "at": at})
    if source == "text":
        data = data.to_dict("records")
    arguments = (
        {"write_disposition": "merge", "primary_key": "at"}
        if role == "primary_key"
        else {"incremental": Incremental("at", initial_value="2020-01-01T00:00:00Z")}
    )
    with pytest.raises(CastError) as raised:
        run_load(data, spark=spark, dataset=dataset, table_name="t", columns=columns, **arguments)
    assert raised.value.column == "at"
    assert "nanoseconds" in str(raised.value) or "without loss" in str(raised.value)
    assert DeltaTable(f"{dataset}/t").version() == first.table_version


# -- float keys: 0.0 and -0.0 are one key, NaN is one key, at every step ---

KEYS = [0.0, math.nan, math.inf, -math.inf, 5e-324, 1.5]


@pytest.mark.parametrize("strategy", ["delete-insert", "upsert", "insert-only", "scd2"])
def test_float_keys_minus_zero_and_nan_are_one_key_across_loads(spark, dataset, strategy):
    key = "merge_key" if strategy == "scd2" else "primary_key"
    arguments = {**STRATEGIES[strategy], key: "k", "dataset": dataset, "table_name": "t"}
    arguments.pop("primary_key" if key == "merge_key" else "merge_key", None)
    run_load([{"k": k, "v": 1} for k in KEYS], spark=spark, **arguments)
    again = [{"k": -0.0 if k == 0 else k, "v": 2} for k in KEYS]
    run_load(again, spark=spark, **arguments)
    rows = DeltaTable(f"{dataset}/t").to_pyarrow_table().to_pylist()
    if strategy == "scd2":
        rows = [r for r in rows if r["_dlt_valid_to"] is None]
    current = sorted((repr(r["k"]), r["v"]) for r in rows)
    v = 1 if strategy == "insert-only" else 2
    assert current == sorted((repr(k), v) for k in KEYS)  # 0.0 stored as 0.0, never a -0.0 beside it
    assert len({r["_dlt_id"] for r in rows}) == len(rows)


def test_an_upsert_of_both_zeros_or_two_nans_as_keys_is_refused_as_one_duplicate_key(spark, dataset):
    arguments = {**STRATEGIES["upsert"], "primary_key": "k", "dataset": dataset, "table_name": "t"}
    first = run_load([{"k": 0.0, "v": 1}], spark=spark, **arguments)
    for pair in ([0.0, -0.0], [math.nan, -math.nan]):
        with pytest.raises(DuplicateKeyError) as raised:
            run_load([{"k": k, "v": 2} for k in pair], spark=spark, **arguments)
        assert raised.value.duplicate_keys == 1 and isinstance(raised.value, DeltaMergeError)
    assert DeltaTable(f"{dataset}/t").version() == first.table_version


def test_insert_only_takes_minus_zero_as_the_key_the_table_holds(spark, dataset):
    arguments = {**STRATEGIES["insert-only"], "primary_key": "k", "dataset": dataset, "table_name": "t"}
    run_load([{"k": 0.0, "v": 1}], spark=spark, **arguments)
    run_load([{"k": -0.0, "v": 2}, {"k": 0.0, "v": 3}], spark=spark, **arguments)
    rows = DeltaTable(f"{dataset}/t").to_pyarrow_table().to_pylist()
    assert [(repr(r["k"]), r["v"]) for r in rows] == [("0.0", 1)]


def test_a_float_cursor_named_with_dots_stores_minus_zero_as_zero(spark, dataset):
    """A top-level cursor column whose name holds dots is the column itself, so its floats follow the
    one rule of the columns that tell rows apart."""
    arguments = {"dataset": dataset, "table_name": "t", "naming": "direct", "write_disposition": "append"}
    run_load([{"at.time": -0.0, "v": 1}], spark=spark, incremental=Incremental("at.time"), **arguments)
    rows = DeltaTable(f"{dataset}/t").to_pyarrow_table().to_pylist()
    assert [(repr(r["at.time"]), r["v"]) for r in rows] == [("0.0", 1)]


def test_delete_insert_keeps_one_row_of_both_zeros_and_dedup_sort_picks_it(spark, dataset):
    columns = {"k": {"primary_key": True}, "v": {"dedup_sort": "desc"}}
    arguments = {"write_disposition": "merge", "columns": columns, "dataset": dataset, "table_name": "t"}
    run_load([{"k": 0.0, "v": 1}, {"k": -0.0, "v": 3}, {"k": 0.0, "v": 2}], spark=spark, **arguments)
    rows = DeltaTable(f"{dataset}/t").to_pyarrow_table().to_pylist()
    assert [(repr(r["k"]), r["v"]) for r in rows] == [("0.0", 3)]


def test_a_float_sequence_orders_events_one_way_in_a_batch_and_across_loads(spark, dataset):
    arguments = {**STRATEGIES["upsert"], "sequence_by": "s", "dataset": dataset, "table_name": "t"}
    batch = [{"id": 1, "s": 5.0, "v": 1}, {"id": 1, "s": math.nan, "v": 2}, {"id": 2, "s": 0.0, "v": 3}]
    run_load(batch, spark=spark, **arguments)  # NaN is newer than any number, as Spark orders it
    later = run_load(
        [{"id": 1, "s": math.inf, "v": 4}, {"id": 2, "s": -0.0, "v": 5}], spark=spark, **arguments
    )
    rows = DeltaTable(f"{dataset}/t").to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["v"], repr(r["s"])) for r in rows) == [(1, 2, "nan"), (2, 3, "0.0")]
    assert later.metrics["numEventsSkippedStale"] == 2  # inf is older than NaN; -0.0 is 0.0, not newer
    with pytest.raises(SequenceError):  # 0.0 and -0.0 are one sequence: a tie
        run_load([{"id": 3, "s": 0.0, "v": 6}, {"id": 3, "s": -0.0, "v": 7}], spark=spark, **arguments)
    assert DeltaTable(f"{dataset}/t").version() == later.table_version


@pytest.mark.writer_independent
@pytest.mark.parametrize(
    ("scale", "values"),
    [
        (0, [Decimal(WIDEST - 2), Decimal(WIDEST - 1), Decimal(WIDEST)]),
        (2, [Decimal("1.24"), Decimal("1.25"), Decimal("7.5")]),
    ],
)
def test_a_decimal_cursor_moves_on_and_filters_the_next_load(spark, dataset, scale, values):
    arguments = {
        "dataset": dataset,
        "table_name": "t",
        "incremental": Incremental("c"),
        "columns": {"c": {"data_type": "decimal", "precision": 38, "scale": scale}},
    }
    older, first, newer = values
    run_load([{"id": 1, "c": first}], spark=spark, **arguments)
    info = run_load([{"id": 2, "c": older}, {"id": 3, "c": newer}], spark=spark, **arguments)
    rows = DeltaTable(f"{dataset}/t").to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["c"]) for r in rows) == [(1, first), (3, newer)]  # the older row filtered
    assert info.metrics["rows_staged"] == 1
