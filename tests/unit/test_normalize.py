"""dlt's normaliser for Python rows (pure): names, flattening, nesting levels, coercion, variants."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import pytest

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.model.naming import snake_case
from airflow_provider_deltamerge.model.request import LoadRequest
from airflow_provider_deltamerge.spark.normalize import RowNormalizer, coerce


def rows(data, **settings):
    settings.setdefault("declared", {})
    settings.setdefault("existing", {})
    return RowNormalizer(snake_case, **settings).rows(data)


def test_dicts_flatten_into_double_underscore_columns_with_normalised_names():
    assert rows([{"Id": 1, "Addr": {"City": "Berlin", "Geo": {"lat": 1.5}}, "tags": [1]}]) == [
        {"id": 1, "addr__city": "Berlin", "addr__geo__lat": 1.5, "tags": [1]}
    ]


def test_levels_below_max_table_nesting_are_json_text():
    assert rows([{"a": {"b": {"c": 1}}, "l": [1]}], max_table_nesting=1) == [{"a__b": '{"c":1}', "l": [1]}]
    assert rows([{"a": {"b": 1}, "l": [{"x": 1}]}], max_table_nesting=0) == [
        {"a": '{"b":1}', "l": '[{"x":1}]'}
    ]


def test_child_rows_keep_nested_values_below_their_level_as_json_text():
    got = rows([{"items": [{"sku": 1, "meta": {"a": 1}, "tags": ["x"]}]}], max_table_nesting=1)
    assert got == [{"items": [{"sku": 1, "meta": '{"a":1}', "tags": '["x"]'}]}]
    got = rows([{"items": [{"meta": {"a": {"b": 1}}}]}], max_table_nesting=2)
    assert got == [{"items": [{"meta": {"a": '{"b":1}'}}]}]


def test_struct_layout_and_struct_columns_keep_dicts():
    assert rows([{"a": {"b": 1}}], layout="struct") == [{"a": {"b": 1}}]
    assert rows([{"a": {"b": 1}, "c": {"d": 2}}], struct_columns=frozenset({"a"})) == [
        {"a": {"b": 1}, "c__d": 2}
    ]


def test_declared_json_and_text_take_nested_values_as_json_text():
    got = rows([{"j": {"a": 1}}, {"j": [1, 2]}, {"j": "raw"}], declared={"j": "json"})
    assert [r["j"] for r in got] == ['{"a":1}', "[1,2]", "raw"]
    assert json.loads(rows([{"t": {"a": None}}], declared={"t": "text"})[0]["t"]) == {"a": None}


def test_values_coerce_one_by_one_and_the_rest_go_to_variants():
    got = rows([{"n": 1}, {"n": "7"}, {"n": 2.0}, {"n": "x"}, {"n": 2.5}])
    assert got == [{"n": 1}, {"n": 7}, {"n": 2}, {"n__v_text": "x"}, {"n__v_double": 2.5}]
    assert rows([{"n": "5"}, {"n": "x"}], existing={"n": "bigint"}) == [{"n": 5}, {"n__v_text": "x"}]


def test_declared_and_key_columns_never_get_variants():
    assert rows([{"n": 1}, {"n": "x"}], declared={"n": "bigint"}) == [{"n": "1"}, {"n": "x"}]
    assert rows([{"id": 1}, {"id": "x"}], keys=frozenset({"id"})) == [{"id": "1"}, {"id": "x"}]


def test_timestamps_coerce_to_utc_instants():
    got = rows(
        [{"t": datetime(2024, 1, 2, 3)}, {"t": "2024-01-02T03:00:00+02:00"}], declared={"t": "timestamp"}
    )
    assert [r["t"] for r in got] == [
        datetime(2024, 1, 2, 3, tzinfo=timezone.utc),
        datetime(2024, 1, 2, 1, tzinfo=timezone.utc),
    ]


@pytest.mark.parametrize(
    ("to_type", "value", "expected"),
    [
        ("text", 5, "5"),
        ("text", True, "true"),
        ("bigint", "0x10", 16),
        ("double", "1.5", 1.5),
        ("decimal", 1.5, Decimal("1.5")),
        ("bool", "yes", True),
        ("wei", str(2**70), Decimal(2**70)),
    ],
)
def test_coerce(to_type, value, expected):
    assert coerce(to_type, value) == expected


def test_two_fields_that_become_one_column_are_refused():
    with pytest.raises(ConfigError, match="'a_b' and 'A_B' .stored as 'a_b' and 'a_b'. of the batch"):
        rows([{"a_b": 1, "A_B": 2}])


def test_nested_layout_is_checked_and_travels_in_the_request_json():
    request = LoadRequest.create(dataset="/tmp/d", table_name="t", nested_layout="struct")
    assert LoadRequest.from_json(request.to_json()).nested_layout == "struct"
    with pytest.raises(ConfigError) as error:
        LoadRequest.create(dataset="/tmp/d", table_name="t", nested_layout="tree")
    assert error.value.argument == "nested_layout"


def test_text_with_nanoseconds_is_not_coerced_to_a_timestamp_that_would_drop_them():
    nanos = "2024-01-02T03:00:00.123456789Z"
    got = rows([{"t": datetime(2024, 1, 2, 3)}, {"t": nanos}, {"t": "2024-01-02T03:00:00.5Z"}])
    assert got[1] == {"t__v_text": nanos}  # kept whole, in the variant column
    assert got[2]["t"] == datetime(2024, 1, 2, 3, 0, 0, 500000, tzinfo=timezone.utc)
    declared = rows([{"t": datetime(2024, 1, 2, 3)}, {"t": nanos}], declared={"t": "timestamp"})
    assert declared[1] == {"t": nanos}  # as text: the cast to the declared type says what it drops
