"""Incremental: validation, JSON round trip, bound coercion and backfill windows (pure)."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import pytest

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.model.backfill import backfill_windows, parse_every
from airflow_provider_deltamerge.model.incremental import Incremental, coerce_bound, cursor_state, json_safe

UTC = timezone.utc


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


# -- defaults and validation ---------------------------------------------------------------------------------


def test_defaults_follow_dlt():
    inc = Incremental("updated_at")
    assert (inc.last_value_func, inc.range_start, inc.range_end) == ("max", "closed", "open")
    assert (inc.on_cursor_value_missing, inc.allow_external_schedulers) == ("raise", True)
    assert inc.primary_key is None and inc.lag is None and inc.records_boundary_hashes


@pytest.mark.parametrize(
    "argument, value, valid",
    [
        ("last_value_func", "maximum", "'max', 'min'"),
        ("range_start", "half", "'closed', 'open'"),
        ("range_end", "inclusive", "'closed', 'open'"),
        ("on_cursor_value_missing", "skip", "'raise', 'include', 'exclude'"),
    ],
)
def test_enum_arguments_list_valid_values(argument, value, valid):
    with pytest.raises(ConfigError) as error:
        Incremental("updated_at", **{argument: value})
    assert error.value.argument == argument
    assert str(error.value) == f"{argument}: {value!r} is not valid; use one of {valid}"


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a.", None])
def test_cursor_path_must_name_a_column(path):
    with pytest.raises(ConfigError, match="cursor_path: .* must be a column name or a dotted path"):
        Incremental(path)


def test_dotted_cursor_path_is_accepted():
    assert Incremental("meta.updated_at").cursor_path == "meta.updated_at"


@pytest.mark.parametrize("lag", [-1, "10", True])
def test_lag_must_be_a_non_negative_number(lag):
    with pytest.raises(ConfigError, match="lag: .* must be a number >= 0"):
        Incremental("id", lag=lag)


def test_allow_external_schedulers_must_be_bool():
    with pytest.raises(ConfigError, match="allow_external_schedulers: must be true or false, got 'yes'"):
        Incremental("id", allow_external_schedulers="yes")


@pytest.mark.parametrize("argument", ["initial_value", "end_value"])
def test_bounds_must_be_plain_values(argument):
    values = {"initial_value": 1, argument: [1, 2]}
    with pytest.raises(ConfigError, match=f"{argument}: \\[1, 2\\] is a list; use an ISO 8601 string"):
        Incremental("id", **values)


def test_primary_key_becomes_a_tuple_and_empty_turns_dedup_off():
    assert Incremental("id", primary_key="pk").primary_key == ("pk",)
    assert Incremental("id", primary_key=["a", "b"]).primary_key == ("a", "b")
    no_dedup = Incremental("id", primary_key=[])
    assert no_dedup.primary_key == () and not no_dedup.records_boundary_hashes


def test_boundary_hashes_are_recorded_only_when_dedup_can_run():
    assert not Incremental("id", range_start="open").records_boundary_hashes
    assert not Incremental("id", lag=5).records_boundary_hashes
    assert Incremental("id", lag=0).records_boundary_hashes


def test_end_value_needs_initial_value():
    with pytest.raises(ConfigError) as error:
        Incremental("id", end_value=10)
    assert error.value.argument == "end_value"
    assert "needs initial_value" in str(error.value)


@pytest.mark.parametrize(
    "initial, end",
    [
        (10, 5),
        (10, 10),
        ("2024-02-01T00:00:00Z", "2024-01-31T23:59:59Z"),
        (date(2024, 2, 1), "2024-01-01"),
        (utc(2024, 2, 1), datetime(2024, 1, 31)),
    ],
)
def test_end_value_must_be_after_initial_value_for_max(initial, end):
    with pytest.raises(
        ConfigError, match="end_value: .* must be later than initial_value .*empty or reversed"
    ):
        Incremental("c", initial_value=initial, end_value=end)


def test_end_value_must_be_before_initial_value_for_min():
    with pytest.raises(ConfigError, match="end_value: 20 must be earlier than initial_value 10"):
        Incremental("c", initial_value=10, end_value=20, last_value_func="min")
    assert Incremental("c", initial_value=20, end_value=10, last_value_func="min").end_value == 10


def test_equal_bounds_are_a_valid_single_point_when_both_ends_are_closed():
    inc = Incremental("c", initial_value=5, end_value=5, range_end="closed")
    assert (inc.initial_value, inc.end_value) == (5, 5)


def test_end_value_compares_across_iso_strings_datetimes_and_epochs():
    assert Incremental("c", initial_value="2024-01-01", end_value=utc(2024, 1, 1, 0, 0, 1)).end_value
    assert Incremental("c", initial_value=1704067200, end_value="2024-01-01T00:00:01Z").end_value
    with pytest.raises(ConfigError, match="end_value: 1704067199 must be later"):
        Incremental("c", initial_value="2024-01-01T00:00:00Z", end_value=1704067199)


def test_bounds_that_cannot_be_compared_are_an_error():
    with pytest.raises(ConfigError, match="end_value: 'b' cannot be compared with 5"):
        Incremental("c", initial_value=5, end_value="b")


def test_text_bounds_compare_as_text():
    assert Incremental("c", initial_value="a", end_value="b").end_value == "b"


# -- JSON round trip -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "initial, end",
    [
        ("2024-01-01T00:00:00Z", None),
        (utc(2024, 1, 1, 12, 30, 0, 123456), utc(2024, 2, 1)),
        (datetime(2024, 1, 1, 12), datetime(2024, 1, 2)),
        (datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=2))), None),
        (date(2024, 1, 1), date(2024, 3, 1)),
        (7, 9.5),
        (None, None),
    ],
)
def test_to_dict_round_trips_through_json(initial, end):
    inc = Incremental(
        "meta.updated_at",
        initial_value=initial,
        end_value=end,
        primary_key=["a", "b"],
        lag=3600,
        on_cursor_value_missing="include",
        allow_external_schedulers=False,
    )
    restored = Incremental.from_dict(json.loads(json.dumps(inc.to_dict())))
    assert restored == inc
    assert type(restored.initial_value) is type(inc.initial_value)
    assert type(restored.end_value) is type(inc.end_value)
    if isinstance(initial, datetime):
        assert restored.initial_value.utcoffset() == initial.utcoffset()


def test_to_dict_tags_datetimes_and_dates():
    data = Incremental("c", initial_value=date(2024, 1, 1), end_value=utc(2024, 2, 1)).to_dict()
    assert data["initial_value"] == {"type": "date", "value": "2024-01-01"}
    assert data["end_value"] == {"type": "datetime", "value": "2024-02-01T00:00:00+00:00"}


def test_from_dict_keeps_empty_primary_key():
    assert Incremental.from_dict({"cursor_path": "c", "primary_key": []}).primary_key == ()


def test_from_dict_rejects_unknown_keys_and_missing_cursor():
    with pytest.raises(
        ConfigError, match=r"incremental: unknown key\(s\) \['cursor'\]; valid: cursor_path, "
    ):
        Incremental.from_dict({"cursor": "c"})
    with pytest.raises(ConfigError, match="incremental: cursor_path is required"):
        Incremental.from_dict({})


def test_from_dict_rejects_bad_tags():
    with pytest.raises(ConfigError, match="initial_value: 'yesterday' is not an ISO 8601 date"):
        Incremental.from_dict({"cursor_path": "c", "initial_value": {"type": "date", "value": "yesterday"}})
    with pytest.raises(ConfigError, match="initial_value: .* must be a plain value or"):
        Incremental.from_dict({"cursor_path": "c", "initial_value": {"type": "time", "value": "x"}})


# -- coercion to the cursor column's type --------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, cursor_type, expected",
    [
        ("2024-01-01T10:00:00Z", "timestamp", utc(2024, 1, 1, 10)),
        ("2024-01-01T12:00:00+02:00", "timestamp", utc(2024, 1, 1, 10)),
        ("2024-01-01 10:00:00", "timestamp", utc(2024, 1, 1, 10)),
        ("2024-01-01", "timestamp", utc(2024, 1, 1)),
        (datetime(2024, 1, 1, 10), "timestamp", utc(2024, 1, 1, 10)),
        (date(2024, 1, 1), "timestamp", utc(2024, 1, 1)),
        (1704067200, "timestamp", utc(2024, 1, 1)),
        (1704067200.5, "timestamp", utc(2024, 1, 1, 0, 0, 0, 500000)),
        ("2024-01-01T12:00:00+02:00", "timestamp_ntz", datetime(2024, 1, 1, 10)),
        (datetime(2024, 1, 1, 10), "timestamp_ntz", datetime(2024, 1, 1, 10)),
        ("2024-01-31", "date", date(2024, 1, 31)),
        ("2024-01-31T23:00:00-02:00", "date", date(2024, 2, 1)),
        (utc(2024, 1, 31, 15), "date", date(2024, 1, 31)),
        (1704067200, "date", date(2024, 1, 1)),
        (utc(2024, 1, 1), "int", 1704067200),
        (utc(2024, 1, 1, 0, 0, 0, 1), "int", 1704067201),
        ("2024-01-01", "int", 1704067200),
        ("42", "int", 42),
        (42, "int", 42),
        (41.5, "int", 42),
        (utc(2024, 1, 1, 0, 0, 0, 250000), "float", 1704067200.25),
        ("2.5", "float", 2.5),
        (3, "float", 3.0),
        ("2024-01-01T10:00:00Z", "string", "2024-01-01T10:00:00Z"),
        (datetime(2024, 1, 1, 10), "string", "2024-01-01T10:00:00+00:00"),
        (date(2024, 1, 1), "string", "2024-01-01"),
    ],
)
def test_coerce_bound(value, cursor_type, expected):
    coerced = coerce_bound(value, cursor_type, "initial_value")
    assert coerced == expected
    assert type(coerced) is type(expected)
    if cursor_type == "timestamp":
        assert coerced.tzinfo is UTC
    if cursor_type == "timestamp_ntz":
        assert coerced.tzinfo is None


@pytest.mark.parametrize(
    "value, cursor_type, reason",
    [
        ("yesterday", "timestamp", "it is not an ISO 8601 date or timestamp"),
        ("2024-02-30", "date", "it is not a valid calendar date"),
        ("abc", "int", "it is not an ISO 8601 date or timestamp"),
        ("abc", "float", "it is not an ISO 8601 date or timestamp"),
        (5, "string", "a number does not compare with text; give the bound as a string"),
    ],
)
def test_impossible_coercion_names_value_and_type(value, cursor_type, reason):
    with pytest.raises(ConfigError) as error:
        coerce_bound(value, cursor_type, "end_value")
    assert (
        str(error.value)
        == f"end_value: {value!r} cannot bound a cursor column of type {cursor_type}: {reason}"
    )


def test_coerce_rejects_unknown_cursor_type_and_booleans():
    with pytest.raises(ConfigError, match="cursor_type: 'bigint' is not valid; use one of 'timestamp'"):
        coerce_bound(1, "bigint", "initial_value")
    with pytest.raises(ConfigError, match="initial_value: True is a bool"):
        coerce_bound(True, "int", "initial_value")


def test_coerce_none_is_unbounded():
    assert coerce_bound(None, "timestamp", "end_value") is None


def test_json_safe_writes_iso_strings():
    assert json_safe(utc(2024, 1, 1, 10)) == "2024-01-01T10:00:00+00:00"
    assert json_safe(date(2024, 1, 1)) == "2024-01-01"
    assert [json_safe(v) for v in (3, 2.5, "x", None)] == [3, 2.5, "x", None]


def test_cursor_state_reads_one_cursor_entry():
    state = {"incremental": {"updated_at": {"last_value": 5}}}
    assert cursor_state(state, "updated_at") == {"last_value": 5}
    assert cursor_state(state, "id") == {}
    assert cursor_state(None, "id") == {}


# -- backfill windows ----------------------------------------------------------------------------------------


def test_backfill_windows_are_consecutive_and_the_last_is_clipped():
    assert backfill_windows("2024-01-01", "2024-01-20") == [
        (utc(2024, 1, 1), utc(2024, 1, 8)),
        (utc(2024, 1, 8), utc(2024, 1, 15)),
        (utc(2024, 1, 15), utc(2024, 1, 20)),
    ]


def test_backfill_windows_accept_datetimes_dates_and_timedeltas():
    windows = backfill_windows(date(2024, 1, 1), datetime(2024, 1, 1, 5), timedelta(hours=2))
    assert windows == [
        (utc(2024, 1, 1, 0), utc(2024, 1, 1, 2)),
        (utc(2024, 1, 1, 2), utc(2024, 1, 1, 4)),
        (utc(2024, 1, 1, 4), utc(2024, 1, 1, 5)),
    ]


def test_backfill_window_of_exact_multiple_has_no_empty_tail():
    assert backfill_windows("2024-01-01T00:00:00Z", "2024-01-15T00:00:00Z", "1 week") == [
        (utc(2024, 1, 1), utc(2024, 1, 8)),
        (utc(2024, 1, 8), utc(2024, 1, 15)),
    ]


@pytest.mark.parametrize(
    "every, expected",
    [
        ("7 days", timedelta(days=7)),
        ("1 day", timedelta(days=1)),
        ("6 Hours", timedelta(hours=6)),
        ("30 minutes", timedelta(minutes=30)),
        ("2 weeks", timedelta(weeks=2)),
    ],
)
def test_parse_every(every, expected):
    assert parse_every(every) == expected


@pytest.mark.parametrize("every", ["7", "weekly", "1.5 days", "3 months", 7])
def test_backfill_every_must_be_a_known_unit(every):
    with pytest.raises(
        ConfigError, match="every: .* must be 'N minutes\\|hours\\|days\\|weeks' or a timedelta"
    ):
        backfill_windows("2024-01-01", "2024-02-01", every)


@pytest.mark.parametrize("every", ["0 days", timedelta(0), timedelta(hours=-1)])
def test_backfill_every_must_be_positive(every):
    with pytest.raises(ConfigError, match="every: .* must be longer than zero"):
        backfill_windows("2024-01-01", "2024-02-01", every)


def test_backfill_end_must_be_after_start():
    with pytest.raises(ConfigError, match="end: '2024-01-01' must be after start '2024-01-01'"):
        backfill_windows("2024-01-01", "2024-01-01")


@pytest.mark.parametrize("start", ["soon", 1704067200, None])
def test_backfill_start_must_be_a_date_or_timestamp(start):
    with pytest.raises(ConfigError) as error:
        backfill_windows(start, "2024-02-01")
    assert error.value.argument == "start"
