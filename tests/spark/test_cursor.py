"""apply_cursor / next_state on a real local SparkSession: range filter, null cursors, boundary dedup,
last value, bounded hashes, lag, and the state a load leaves behind."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest
from pyspark.sql import types as T

from airflow_provider_deltamerge.errors import (
    ConfigError,
    CursorColumnMissingError,
    CursorValueMissingError,
    MissingKeyColumnError,
)
from airflow_provider_deltamerge.model.incremental import Incremental
from airflow_provider_deltamerge.model.run import RunContext
from airflow_provider_deltamerge.model.window import Window, resolve_window
from airflow_provider_deltamerge.spark import cursor_filter as cursor_module
from airflow_provider_deltamerge.spark.cursor_filter import (
    CursorResult,
    apply_cursor,
    cursor_type_of,
    dedup_key,
    next_state,
    spark_cursor_type,
)

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

UTC = timezone.utc
NOW = datetime(2024, 3, 10, 12, tzinfo=UTC)
INT_ROWS = T.StructType([T.StructField("id", T.LongType()), T.StructField("v", T.StringType())])


def window(
    start,
    end,
    *,
    cursor_type="int",
    start_closed=True,
    end_closed=False,
    stateful=False,
    dedup=False,
    descending=False,
) -> Window:
    return Window(start, end, start_closed, end_closed, stateful, dedup, "test", cursor_type, descending)


def stateful_window(incremental, cursor_type, state) -> Window:
    return resolve_window(
        incremental,
        cursor_type=cursor_type,
        data_interval=None,
        run_context=RunContext(),
        stored_state=state,
        now=NOW,
    )


def rows(df, *columns) -> list[tuple]:
    columns = columns or tuple(df.columns)
    return sorted(tuple(r[c] for c in columns) for r in df.collect())


def load(spark, data, incremental, state, *, cursor_type="int", schema=INT_ROWS, **kwargs):
    """One stateful load: window from state, cursor applied, new state. Returns (kept rows, result, state)."""
    df = spark.createDataFrame(data, schema)
    win = stateful_window(incremental, cursor_type, state)
    kept, result = apply_cursor(df, incremental, win, state, **kwargs)
    return rows(kept), result, next_state(state, incremental, win, result)


# -- Spark type -> cursor_type -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data_type, cursor_type",
    [
        (T.TimestampType(), "timestamp"),
        (T.TimestampNTZType(), "timestamp_ntz"),
        (T.DateType(), "date"),
        (T.ByteType(), "int"),
        (T.IntegerType(), "int"),
        (T.LongType(), "int"),
        (T.DecimalType(18, 0), "int"),
        (T.DecimalType(10, 2), "float"),
        (T.FloatType(), "float"),
        (T.DoubleType(), "float"),
        (T.StringType(), "string"),
    ],
)
def test_spark_cursor_type(data_type, cursor_type):
    assert spark_cursor_type(data_type) == cursor_type


def test_unusable_cursor_type_is_a_config_error():
    with pytest.raises(ConfigError) as error:
        spark_cursor_type(T.BooleanType(), "flag")
    assert str(error.value) == (
        "cursor_path: 'flag' is boolean; a cursor must be a timestamp, date, integer, floating point, "
        "decimal or string column"
    )


def test_cursor_type_of_walks_into_structs(spark):
    schema = "id long, meta struct<updated_at: timestamp, seq: decimal(20,0)>"
    df = spark.createDataFrame([], schema)
    assert cursor_type_of(df, "meta.updated_at") == "timestamp"
    assert cursor_type_of(df, "meta.seq") == "int"
    with pytest.raises(CursorColumnMissingError) as error:
        cursor_type_of(df, "meta.created_at")
    assert error.value.cursor_path == "meta.created_at"
    assert "incremental cursor 'meta.created_at' is not in the data; columns present: id, meta." in str(
        error.value
    )
    with pytest.raises(CursorColumnMissingError):
        cursor_type_of(df, "id.sub")


# -- INC-3 range ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start_closed, end_closed, kept",
    [(True, False, [3, 4, 5]), (False, True, [4, 5, 6]), (True, True, [3, 4, 5, 6]), (False, False, [4, 5])],
)
def test_range_inclusivity(spark, start_closed, end_closed, kept):
    df = spark.createDataFrame([(i, str(i)) for i in range(1, 9)], INT_ROWS)
    out, result = apply_cursor(
        df, Incremental("id"), window(3, 6, start_closed=start_closed, end_closed=end_closed), None
    )
    assert rows(out, "id") == [(i,) for i in kept]
    assert (result.rows_before, result.rows_after, result.last_value) == (8, len(kept), kept[-1])
    assert out.columns == ["id", "v"]


def test_unbounded_window_keeps_everything(spark):
    df = spark.createDataFrame([(i, "x") for i in (5, 1, 3)], INT_ROWS)
    out, result = apply_cursor(df, Incremental("id"), window(None, None), None)
    assert rows(out, "id") == [(1,), (3,), (5,)] and result.last_value == 5


def test_descending_window_for_min(spark):
    inc = Incremental("id", last_value_func="min", initial_value=6, end_value=2)
    win = stateful_window(inc, "int", None)
    df = spark.createDataFrame([(i, "x") for i in range(1, 9)], INT_ROWS)
    out, result = apply_cursor(df, inc, win, None)
    assert rows(out, "id") == [(3,), (4,), (5,), (6,)]  # 2 < id <= 6
    assert result.last_value == 3


def test_empty_batch_keeps_nothing_and_has_no_last_value(spark):
    out, result = apply_cursor(
        spark.createDataFrame([], INT_ROWS), Incremental("id"), window(None, None), None
    )
    assert rows(out) == []
    assert result == CursorResult(None, (), 0, 0, 0, 0)


# -- cursor types: window bounds mean the same instants in Spark ---------------------------------------------


def test_timestamp_window_from_airflow_interval_and_exact_last_value(spark):
    schema = "id long, updated_at timestamp"
    data = [
        (1, datetime(2024, 3, 3, 23, 59, 59, 999999, tzinfo=UTC)),
        (2, datetime(2024, 3, 4, tzinfo=UTC)),
        (3, datetime(2024, 3, 4, 17, 30, 0, 123456, tzinfo=UTC)),
        (4, datetime(2024, 3, 5, tzinfo=UTC)),
    ]
    df = spark.createDataFrame(data, schema)
    inc = Incremental("updated_at")
    win = resolve_window(
        inc,
        cursor_type=cursor_type_of(df, "updated_at"),
        data_interval=(datetime(2024, 3, 4, tzinfo=UTC), datetime(2024, 3, 5, tzinfo=UTC)),
        run_context=RunContext(run_type="scheduled"),
        stored_state=None,
        now=NOW,
    )
    out, result = apply_cursor(df, inc, win, None)
    assert rows(out, "id") == [(2,), (3,)]
    assert result.last_value == "2024-03-04T17:30:00.123456+00:00"


def test_timestamp_bounds_do_not_depend_on_the_session_time_zone(spark):
    df = spark.createDataFrame(
        [(1, datetime(2024, 3, 4, 0, 30, tzinfo=UTC)), (2, datetime(2024, 3, 3, 23, 30, tzinfo=UTC))],
        "id long, updated_at timestamp",
    )
    win = window(datetime(2024, 3, 4, tzinfo=UTC), None, cursor_type="timestamp")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        out, result = apply_cursor(df, Incremental("updated_at"), win, None)
        kept = rows(out, "id")
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert kept == [(1,)]
    assert result.last_value == "2024-03-04T00:30:00+00:00"


def test_timestamp_ntz_cursor(spark):
    df = spark.createDataFrame(
        [
            (1, datetime(2024, 3, 4, 10)),
            (2, datetime(2024, 3, 4, 11, 0, 0, 5)),
            (4, datetime(2024, 3, 4, 11, 0, 0, 500000)),
            (3, datetime(2024, 3, 4, 12)),
        ],
        T.StructType([T.StructField("id", T.LongType()), T.StructField("ts", T.TimestampNTZType())]),
    )
    win = window(datetime(2024, 3, 4, 10, 30), datetime(2024, 3, 4, 12), cursor_type="timestamp_ntz")
    out, result = apply_cursor(df, Incremental("ts"), win, None)
    assert rows(out, "id") == [(2,), (4,)]
    assert result.last_value == "2024-03-04T11:00:00.500000"  # Spark writes it as "11:00:00.5"


def test_date_cursor(spark):
    df = spark.createDataFrame([(i, date(2024, 3, i)) for i in range(1, 6)], "id long, day date")
    out, result = apply_cursor(
        df, Incremental("day"), window(date(2024, 3, 2), date(2024, 3, 4), cursor_type="date"), None
    )
    assert rows(out, "id") == [(2,), (3,)]
    assert result.last_value == "2024-03-03"


def test_string_cursor_compares_as_text(spark):
    df = spark.createDataFrame(
        [(1, "2024-03-04T09:00:00Z"), (2, "2024-03-05T00:00:00Z")], "id long, at string"
    )
    win = window("2024-03-04T00:00:00Z", "2024-03-05T00:00:00Z", cursor_type="string")
    out, result = apply_cursor(df, Incremental("at"), win, None)
    assert rows(out, "id") == [(1,)] and result.last_value == "2024-03-04T09:00:00Z"


def test_float_and_decimal_cursors(spark):
    df = spark.createDataFrame(
        [(1, 1.5, Decimal("1.50")), (2, 2.5, Decimal("2.50"))], "id long, f double, d decimal(10,2)"
    )
    out, result = apply_cursor(df, Incremental("f"), window(2.0, None, cursor_type="float"), None)
    assert rows(out, "id") == [(2,)] and result.last_value == 2.5
    out, result = apply_cursor(
        df, Incremental("d"), window(1.5, 2.0, cursor_type="float", start_closed=False), None
    )
    assert rows(out, "id") == [] and result.last_value is None


def test_nested_cursor_path(spark):
    df = spark.createDataFrame([(1, (5,)), (2, (7,)), (3, None)], "id long, meta struct<seq: long>")
    inc = Incremental("meta.seq", on_cursor_value_missing="exclude")
    out, result = apply_cursor(df, inc, window(6, None), None)
    assert rows(out, "id") == [(2,)]
    assert (result.last_value, result.rows_missing_cursor) == (7, 1)


# -- INC-9 missing cursor values -----------------------------------------------------------------------------


def test_null_cursor_raises_with_count(spark):
    df = spark.createDataFrame([(1, "a"), (None, "b"), (None, "c")], INT_ROWS)
    with pytest.raises(CursorValueMissingError) as error:
        apply_cursor(df, Incremental("id"), window(None, None), None)
    assert (error.value.cursor_path, error.value.missing_rows, error.value.total_rows) == ("id", 2, 3)
    assert str(error.value).startswith(
        "incremental cursor 'id' is null or missing in 2 of 3 row(s). Nothing was loaded."
    )


def test_null_cursor_include_keeps_rows_without_moving_last_value(spark):
    df = spark.createDataFrame([(1, "a"), (None, "b"), (9, "c")], INT_ROWS)
    inc = Incremental("id", on_cursor_value_missing="include")
    out, result = apply_cursor(df, inc, window(2, None), None)
    assert rows(out, "v") == [("b",), ("c",)]
    assert (result.last_value, result.rows_after, result.rows_missing_cursor) == (9, 2, 1)


def test_null_cursor_include_alone_leaves_no_last_value(spark):
    df = spark.createDataFrame([(None, "b")], INT_ROWS)
    out, result = apply_cursor(
        df, Incremental("id", on_cursor_value_missing="include"), window(2, None), None
    )
    assert rows(out, "v") == [("b",)] and result.last_value is None


def test_null_cursor_exclude_drops_rows(spark):
    df = spark.createDataFrame([(1, "a"), (None, "b"), (9, "c")], INT_ROWS)
    out, result = apply_cursor(
        df, Incremental("id", on_cursor_value_missing="exclude"), window(None, None), None
    )
    assert rows(out, "v") == [("a",), ("c",)]
    assert (result.rows_before, result.rows_after, result.rows_missing_cursor) == (3, 2, 1)


def test_absent_cursor_column_is_a_source_error(spark):
    df = spark.createDataFrame([(1, "a")], INT_ROWS)
    with pytest.raises(CursorColumnMissingError, match="incremental cursor 'updated_at' is not in the data"):
        apply_cursor(
            df, Incremental("updated_at", on_cursor_value_missing="include"), window(None, None), None
        )


# -- INC-6 / INC-7 / INC-8 boundary dedup across runs --------------------------------------------------------


def test_stateful_runs_drop_boundary_rows_already_loaded(spark):
    inc = Incremental("id", primary_key="v")
    kept, result, state = load(spark, [(1, "a"), (2, "b"), (2, "c")], inc, None)
    assert kept == [(1, "a"), (2, "b"), (2, "c")]
    assert state["incremental"]["id"]["last_value"] == 2
    assert len(state["incremental"]["id"]["unique_hashes"]) == 2
    kept, result, state = load(spark, [(1, "a"), (2, "b"), (2, "c"), (2, "d"), (3, "e")], inc, state)
    assert kept == [(2, "d"), (3, "e")]
    assert (result.rows_before, result.rows_after, result.rows_boundary_duplicates) == (5, 2, 2)
    assert state["incremental"]["id"]["last_value"] == 3


def test_boundary_hashes_accumulate_while_last_value_stays(spark):
    inc = Incremental("id", primary_key="v")
    _, first, state = load(spark, [(2, "b")], inc, None)
    kept, second, state = load(spark, [(2, "b"), (2, "c")], inc, state)
    assert kept == [(2, "c")]
    assert len(first.unique_hashes) == len(second.unique_hashes) == 1
    assert first.unique_hashes != second.unique_hashes
    assert state["incremental"]["id"]["unique_hashes"] == [*first.unique_hashes, *second.unique_hashes]
    kept, _, _ = load(spark, [(2, "b"), (2, "c")], inc, state)
    assert kept == []


def test_duplicates_inside_one_run_are_kept(spark):
    kept, result, _ = load(spark, [(2, "b"), (2, "b")], Incremental("id"), None)
    assert kept == [(2, "b"), (2, "b")] and len(result.unique_hashes) == 1


def test_dedup_key_precedence():
    assert dedup_key(Incremental("c", primary_key="k"), ("pk",)) == ("k",)
    assert dedup_key(Incremental("c"), ("pk",)) == ("pk",)
    assert dedup_key(Incremental("c")) is None
    assert dedup_key(Incremental("c", primary_key="k"), ("pk",), whole_row=True) is None
    assert dedup_key(Incremental("c", primary_key=()), ("pk",), whole_row=True) == ()


def test_table_primary_key_dedups_an_updated_row_at_the_boundary(spark):
    schema = "id long, pk string, amount long"
    inc = Incremental("id")
    _, _, state = load(spark, [(5, "a", 1)], inc, None, schema=schema, table_primary_key=("pk",))
    kept, _, _ = load(spark, [(5, "a", 2)], inc, state, schema=schema, table_primary_key=("pk",))
    assert kept == []  # dlt INC-17: the update is dropped when the key is the dedup key


def test_merge_dedups_whole_rows_so_boundary_updates_load(spark):
    schema = "id long, pk string, amount long"
    inc = Incremental("id", primary_key="pk")
    args = {"schema": schema, "table_primary_key": ("pk",), "whole_row_dedup": True}
    _, _, state = load(spark, [(5, "a", 1), (5, "b", 1)], inc, None, **args)
    kept, result, _ = load(spark, [(5, "a", 2), (5, "b", 1)], inc, state, **args)
    assert kept == [(5, "a", 2)]
    assert result.rows_boundary_duplicates == 1


def test_whole_row_hash_ignores_dlt_system_and_helper_columns(spark):
    schema = "id long, v string, _dlt_load_id string, __ord long"
    inc = Incremental("id")
    _, _, state = load(spark, [(5, "a", "load-1", 0)], inc, None, schema=schema)
    kept, _, _ = load(spark, [(5, "a", "load-2", 7)], inc, state, schema=schema)
    assert kept == []


def test_empty_primary_key_turns_dedup_and_hashes_off(spark):
    inc = Incremental("id", primary_key=())
    _, result, state = load(spark, [(5, "a")], inc, None)
    assert result.unique_hashes == () and state["incremental"]["id"]["unique_hashes"] == []
    kept, _, _ = load(spark, [(5, "a")], inc, state)
    assert kept == [(5, "a")]


def test_open_range_start_needs_no_hashes(spark):
    inc = Incremental("id", range_start="open")
    _, result, state = load(spark, [(5, "a")], inc, None)
    assert result.unique_hashes == ()
    kept, _, _ = load(spark, [(5, "a"), (6, "b")], inc, state)
    assert kept == [(6, "b")]


def test_missing_dedup_key_column_is_named(spark):
    df = spark.createDataFrame([(1, "a")], INT_ROWS)
    with pytest.raises(MissingKeyColumnError) as error:
        apply_cursor(df, Incremental("id", primary_key="order_id"), window(None, None), None)
    assert (error.value.column, error.value.hint) == ("order_id", "incremental.primary_key")


def test_unique_hashes_are_bounded(spark, monkeypatch):
    monkeypatch.setattr(cursor_module, "MAX_UNIQUE_HASHES", 3)
    kept, result, state = load(spark, [(1, "x")] + [(5, str(i)) for i in range(5)], Incremental("id"), None)
    assert len(kept) == 6
    assert len(result.unique_hashes) == 3 and len(set(result.unique_hashes)) == 3
    _, _, state = load(spark, [(5, str(i)) for i in range(5, 10)], Incremental("id"), state)
    assert len(state["incremental"]["id"]["unique_hashes"]) == 3


def test_bounded_hashes_over_a_thousand_rows(spark):
    data = [(7, str(i)) for i in range(cursor_module.MAX_UNIQUE_HASHES + 5)]
    _, result, _ = load(spark, data, Incremental("id"), None)
    assert len(result.unique_hashes) == cursor_module.MAX_UNIQUE_HASHES


# -- INC-11 lag ----------------------------------------------------------------------------------------------


def test_lag_reloads_a_margin_and_never_moves_last_value_back(spark):
    inc = Incremental("id", lag=100)
    kept, _, state = load(spark, [(i, "x") for i in (100, 200, 300)], inc, None)
    assert [k[0] for k in kept] == [100, 200, 300]
    kept, _, state = load(spark, [(i, "x") for i in (100, 200, 300, 400)], inc, state)
    assert [k[0] for k in kept] == [200, 300, 400]
    kept, _, state = load(spark, [(i, "x") for i in (100, 200, 300, 400, 500)], inc, state)
    assert [k[0] for k in kept] == [300, 400, 500]
    kept, _, state = load(spark, [(450, "x")], inc, state)
    assert kept == [(450, "x")] and state["incremental"]["id"]["last_value"] == 500
    assert state["incremental"]["id"]["unique_hashes"] == []


# -- next_state ----------------------------------------------------------------------------------------------


def result_with(last_value, hashes=(), rows_after=1) -> CursorResult:
    return CursorResult(last_value, tuple(hashes), rows_after, rows_after, 0)


def test_next_state_shape_on_first_load():
    inc = Incremental("updated_at", initial_value="2024-01-01T00:00:00Z")
    win = stateful_window(inc, "timestamp", None)
    state = next_state(None, inc, win, result_with("2024-02-01T00:00:00+00:00", ["h1"], 4))
    assert state == {
        "incremental": {
            "updated_at": {
                "initial_value": "2024-01-01T00:00:00Z",
                "last_value": "2024-02-01T00:00:00+00:00",
                "unique_hashes": ["h1"],
                "start_value": "2024-01-01T00:00:00+00:00",
            }
        },
        "windows": [{**win.as_dict(), "rows": 4, "last_value": "2024-02-01T00:00:00+00:00"}],
    }
    json.dumps(state)


def test_stateless_window_moves_last_value_forward_only():
    inc = Incremental("id")
    previous = {"incremental": {"id": {"last_value": 50, "unique_hashes": ["old"], "start_value": 40}}}
    backwards = next_state(previous, inc, window(10, 20), result_with(19, ["h19"]))
    assert backwards["incremental"]["id"]["last_value"] == 50
    assert backwards["incremental"]["id"]["unique_hashes"] == ["old"]
    assert backwards["incremental"]["id"]["start_value"] == 40
    forwards = next_state(previous, inc, window(60, 70), result_with(69, ["h69"]))
    assert forwards["incremental"]["id"]["last_value"] == 69
    assert forwards["incremental"]["id"]["unique_hashes"] == ["h69"]
    assert forwards["incremental"]["id"]["start_value"] == 40  # stateless loads keep start_value
    assert previous["incremental"]["id"]["last_value"] == 50  # input not mutated


def test_min_cursor_moves_downwards_only():
    inc = Incremental("id", last_value_func="min")
    previous = {"incremental": {"id": {"last_value": 50, "unique_hashes": ["old"]}}}
    assert (
        next_state(previous, inc, window(None, None), result_with(60))["incremental"]["id"]["last_value"]
        == 50
    )
    assert (
        next_state(previous, inc, window(None, None), result_with(40))["incremental"]["id"]["last_value"]
        == 40
    )


def test_timestamps_compare_as_instants_not_text():
    inc = Incremental("ts")
    previous = {"incremental": {"ts": {"last_value": "2024-03-04T10:00:00+00:00"}}}
    win = window(None, None, cursor_type="timestamp")
    state = next_state(previous, inc, win, result_with("2024-03-04T09:30:00.5+00:00"))
    assert state["incremental"]["ts"]["last_value"] == "2024-03-04T10:00:00+00:00"


def test_start_value_changes_only_when_a_stateful_load_kept_rows():
    inc = Incremental("id", initial_value=1)
    previous = {"incremental": {"id": {"last_value": 5, "start_value": 1}}}
    win = stateful_window(inc, "int", previous)
    assert (
        next_state(previous, inc, win, result_with(None, rows_after=0))["incremental"]["id"]["start_value"]
        == 1
    )
    assert next_state(previous, inc, win, result_with(9))["incremental"]["id"]["start_value"] == 5


def test_other_cursors_and_keys_are_kept_and_windows_are_bounded(monkeypatch):
    monkeypatch.setattr(cursor_module, "MAX_RECORDED_WINDOWS", 3)
    inc = Incremental("id")
    state = {"incremental": {"other": {"last_value": "x"}}, "custom": 1}
    for i in range(5):
        state = next_state(state, inc, window(i, i + 1), result_with(i, rows_after=i))
    assert state["incremental"]["other"] == {"last_value": "x"} and state["custom"] == 1
    assert [(w["start"], w["rows"]) for w in state["windows"]] == [(2, 2), (3, 3), (4, 4)]
    assert state["incremental"]["id"]["last_value"] == 4
