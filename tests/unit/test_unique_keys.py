"""The writer's unique-key check of an Arrow merge source: a key of one column is counted distinct
first, and any batch it does not clear is grouped, so that the error names the duplicates. Compared
with a plain-Python count of each key's rows."""

from __future__ import annotations

import collections
import datetime as dt
import math
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge.delta.unique_keys import EXAMPLES, check_arrow_key
from airflow_provider_deltamerge.errors import DuplicateKeyError


def duplicated_keys(rows: list[tuple]) -> set[tuple]:
    """The reference: the key values held by more than one row (None equal to None, as grouping has it)."""
    return {key for key, count in collections.Counter(rows).items() if count > 1}


def checked(table: pa.Table, key: tuple[str, ...]) -> DuplicateKeyError | None:
    try:
        check_arrow_key(table, key, "upsert")
    except DuplicateKeyError as refused:
        return refused
    return None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-5, 40)), max_size=40))
def test_an_integer_key_is_refused_exactly_when_a_value_repeats(values):
    refused = checked(pa.table({"id": pa.array(values, pa.int64())}), ("id",))
    expected = duplicated_keys([(v,) for v in values])
    if not expected:
        assert refused is None
        return
    assert refused is not None and refused.duplicate_keys == len(expected)
    assert set(refused.examples) <= expected and len(refused.examples) == min(EXAMPLES, len(expected))


def one_value(value):
    """The reference's key equality for floats: by value, as every merge compares them (0.0 equals -0.0,
    NaN equals NaN, whatever its bits)."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return 0.0 if value == 0 else value


FLOATS = [0.0, -0.0, math.nan, -math.nan, struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.sampled_from([*FLOATS, 1.5, math.inf, -math.inf, 5e-324])), max_size=30)
)
def test_a_float_key_is_refused_exactly_when_a_value_repeats_by_value_not_by_bits(values):
    refused = checked(pa.table({"k": pa.array(values, pa.float64())}), ("k",))
    expected = duplicated_keys([(one_value(v),) for v in values])
    assert (refused.duplicate_keys if refused else 0) == len(expected)
    assert refused is None or {(one_value(e[0]),) for e in refused.examples} <= expected


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "é", ""]), st.integers(0, 3)), max_size=30))
def test_a_key_of_two_columns_is_refused_exactly_when_a_pair_repeats(pairs):
    table = pa.table({"k": [p[0] for p in pairs], "n": pa.array([p[1] for p in pairs], pa.int32())})
    refused = checked(table, ("k", "n"))
    expected = duplicated_keys(pairs)
    assert (refused.duplicate_keys if refused else 0) == len(expected)
    assert refused is None or set(refused.examples) <= expected


@pytest.mark.parametrize(
    "column",
    [
        pa.array(["x", "y", "x"]),
        pa.array([b"x", b"y", b"x"], pa.binary()),
        pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 1)]),
        pa.array([1, 2, 1], pa.timestamp("us", tz="UTC")),
        pa.array([True, False, True]),
        pa.array([1, 2, 1], pa.decimal128(10, 2)),
        pa.array(["x", "y", "x"], pa.large_string()),
        pa.array([1.5, 2.0, 1.5]),
    ],
    ids=lambda column: str(column.type),
)
def test_each_key_type_names_its_repeated_value(column):
    table = pa.table({"key": column, "other": [1, 2, 3]})
    refused = checked(table, ("key",))
    assert refused is not None and refused.duplicate_keys == 1
    assert refused.examples == [(column[0].as_py(),)]
    assert checked(table.slice(0, 2), ("key",)) is None
