"""resolve_window: every rule, its precedence, coercion to the cursor type and its errors (pure)."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import pytest

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.model.incremental import Incremental
from airflow_provider_deltamerge.model.run import RunContext
from airflow_provider_deltamerge.model.window import Window, resolve_window

UTC = timezone.utc
NOW = datetime(2024, 3, 10, 12, 0, tzinfo=UTC)
INC = Incremental("updated_at", initial_value="2024-01-01T00:00:00Z")


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def stored(last_value, path="updated_at"):
    return {"incremental": {path: {"last_value": last_value, "unique_hashes": ["h1"]}}}


def resolve(
    incremental=INC, *, cursor_type="timestamp", data_interval=None, stored_state=None, now=NOW, **run
):
    return resolve_window(
        incremental,
        cursor_type=cursor_type,
        data_interval=data_interval,
        run_context=RunContext(**run),
        stored_state=stored_state,
        now=now,
    )


def bounds(window: Window):
    return window.start, window.end, window.start_closed, window.end_closed


# -- rule: stateful incremental (outside Airflow) ------------------------------------------------------------


def test_outside_airflow_first_run_starts_at_initial_value_with_no_end():
    window = resolve()
    assert bounds(window) == (utc(2024, 1, 1), None, True, False)
    assert (window.rule, window.stateful, window.boundary_dedup, window.descending) == (
        "stateful-incremental",
        True,
        True,
        False,
    )


def test_outside_airflow_continues_from_the_stored_last_value():
    window = resolve(stored_state=stored("2024-02-01T08:30:00+00:00"))
    assert bounds(window) == (utc(2024, 2, 1, 8, 30), None, True, False)
    assert window.stateful and window.boundary_dedup


def test_no_initial_value_and_no_state_is_unbounded():
    window = resolve(Incremental("updated_at"))
    assert bounds(window) == (None, None, True, False)
    assert window.stateful and not window.boundary_dedup


def test_state_of_another_cursor_is_ignored():
    window = resolve(stored_state=stored("2024-02-01T00:00:00+00:00", path="created_at"))
    assert window.start == utc(2024, 1, 1)


def test_open_range_start_turns_boundary_dedup_off():
    window = resolve(Incremental("updated_at", range_start="open"), stored_state=stored("2024-02-01"))
    assert (window.start_closed, window.boundary_dedup) == (False, False)


def test_empty_primary_key_turns_boundary_dedup_off():
    window = resolve(Incremental("updated_at", primary_key=()), stored_state=stored("2024-02-01"))
    assert window.stateful and not window.boundary_dedup


def test_min_last_value_func_walks_downwards():
    inc = Incremental("id", initial_value=1000, last_value_func="min")
    window = resolve(inc, cursor_type="int", stored_state=stored(700, path="id"))
    assert bounds(window) == (700, None, True, False)
    assert window.descending and window.stateful


def test_allow_external_schedulers_false_ignores_the_airflow_run():
    inc = Incremental("updated_at", initial_value="2024-01-01", allow_external_schedulers=False)
    window = resolve(
        inc,
        data_interval=(utc(2024, 3, 1), utc(2024, 3, 2)),
        run_type="scheduled",
        conf={"start": "2024-03-05"},
        stored_state=stored("2024-02-15T00:00:00+00:00"),
    )
    assert (window.rule, window.start, window.end, window.stateful) == (
        "stateful-incremental",
        utc(2024, 2, 15),
        None,
        True,
    )


# -- lag (INC-11) --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cursor_type, last_value, lag, initial, expected",
    [
        ("int", 500, 100, None, 400),
        ("int", 150, 100, 100, 100),  # never before initial_value
        ("float", 10.5, 0.25, None, 10.25),
        ("timestamp", "2024-02-01T00:10:00+00:00", 600, None, utc(2024, 2, 1)),
        ("timestamp_ntz", "2024-02-01T00:10:00", 600, None, datetime(2024, 2, 1)),
        ("date", "2024-02-10", 3, None, date(2024, 2, 7)),
        ("date", "2024-02-10", 3, "2024-02-09", date(2024, 2, 9)),
        ("string", "2024-02-10", 3, None, "2024-02-07"),
        ("string", "2024-02-01T00:10:00Z", 600, None, "2024-02-01T00:00:00Z"),
        ("string", "2024-02-01 00:10:00+00:00", 600, None, "2024-02-01 00:00:00+00:00"),
    ],
)
def test_lag_moves_the_start_back_and_turns_dedup_off(cursor_type, last_value, lag, initial, expected):
    inc = Incremental("c", initial_value=initial, lag=lag)
    window = resolve(inc, cursor_type=cursor_type, stored_state=stored(last_value, path="c"))
    assert window.start == expected
    assert window.stateful and not window.boundary_dedup


def test_lag_moves_a_min_cursor_up_but_not_above_initial_value():
    inc = Incremental("id", initial_value=1000, last_value_func="min", lag=100)
    assert resolve(inc, cursor_type="int", stored_state=stored(500, path="id")).start == 600
    assert resolve(inc, cursor_type="int", stored_state=stored(950, path="id")).start == 1000


def test_lag_does_not_apply_without_stored_state():
    inc = Incremental("id", initial_value=100, lag=50)
    assert resolve(inc, cursor_type="int").start == 100


@pytest.mark.parametrize("cursor_type, unit", [("int", "units"), ("date", "days")])
def test_fractional_lag_on_whole_unit_cursor_is_an_error(cursor_type, unit):
    inc = Incremental("c", lag=1.5)
    last = 10 if cursor_type == "int" else "2024-01-10"
    with pytest.raises(
        ConfigError, match=f"lag: 1.5 must be a whole number of {unit} for a {cursor_type} cursor"
    ):
        resolve(inc, cursor_type=cursor_type, stored_state=stored(last, path="c"))


def test_lag_on_non_iso_string_cursor_is_an_error():
    with pytest.raises(
        ConfigError, match="lag: the cursor value 'v0042' is not an ISO 8601 date or timestamp"
    ):
        resolve(Incremental("c", lag=1), cursor_type="string", stored_state=stored("v0042", path="c"))


# -- rule: end_value range (INC-5) ---------------------------------------------------------------------------


def test_end_value_is_a_stateless_range_without_dedup_or_lag():
    inc = Incremental("id", initial_value=10, end_value=20, lag=5, range_end="closed")
    window = resolve(inc, cursor_type="int", stored_state=stored(15, path="id"))
    assert bounds(window) == (10, 20, True, True)
    assert (window.rule, window.stateful, window.boundary_dedup) == ("end-value-range", False, False)


def test_end_value_range_wins_over_the_airflow_run():
    inc = Incremental("updated_at", initial_value="2023-01-01", end_value="2023-06-01")
    window = resolve(inc, data_interval=(utc(2024, 3, 1), utc(2024, 3, 2)), run_type="scheduled")
    assert (window.rule, window.start, window.end) == ("end-value-range", utc(2023, 1, 1), utc(2023, 6, 1))


def test_end_value_range_with_min_is_descending():
    inc = Incremental("id", initial_value=20, end_value=10, last_value_func="min")
    window = resolve(inc, cursor_type="int")
    assert (window.start, window.end, window.descending) == (20, 10, True)


# -- rule: run conf (manual backfill with config) ------------------------------------------------------------


def test_conf_start_and_end_give_exactly_that_range():
    window = resolve(
        run_type="manual",
        conf={"start": "2023-05-01T00:00:00Z", "end": "2023-06-01T00:00:00+00:00"},
        stored_state=stored("2024-02-01T00:00:00+00:00"),
    )
    assert bounds(window) == (utc(2023, 5, 1), utc(2023, 6, 1), True, False)
    assert (window.rule, window.stateful, window.boundary_dedup) == ("run-conf-range", False, False)


def test_conf_end_defaults_to_now_and_is_not_clamped():
    assert resolve(run_type="manual", conf={"start": "2024-03-01"}).end == NOW
    future = resolve(run_type="manual", conf={"start": "2024-03-01", "end": "2030-01-01"})
    assert future.end == utc(2030, 1, 1)


def test_conf_without_start_starts_at_initial_value_or_unbounded():
    assert resolve(run_type="manual", conf={"end": "2024-02-01"}).start == utc(2024, 1, 1)
    unbounded = resolve(Incremental("updated_at"), run_type="manual", conf={"end": "2024-02-01"})
    assert (unbounded.start, unbounded.end) == (None, utc(2024, 2, 1))


@pytest.mark.parametrize("run_type", ["scheduled", "backfill"])
def test_conf_narrows_the_interval_of_a_scheduled_run(run_type):
    interval = (utc(2024, 3, 1), utc(2024, 3, 2))
    window = resolve(data_interval=interval, run_type=run_type, conf={"start": "2024-03-01T12:00:00Z"})
    assert (window.rule, window.start, window.end) == ("conf-narrowed", utc(2024, 3, 1, 12), utc(2024, 3, 2))
    assert (window.stateful, window.boundary_dedup) == (False, False)
    both = resolve(
        data_interval=interval, run_type=run_type, conf={"start": "2024-03-01", "end": "2024-03-01T06:00:00Z"}
    )
    assert (both.start, both.end) == (utc(2024, 3, 1), utc(2024, 3, 1, 6))


def test_conf_narrows_a_schedule_period_and_keeps_its_end_clamped_to_now():
    period = resolve(
        data_interval=(NOW + timedelta(hours=1), NOW + timedelta(hours=1)),
        run_type="scheduled",
        period_start=(NOW - timedelta(days=1)).isoformat(),
        conf={"end": (NOW + timedelta(hours=1)).isoformat()},
    )
    assert (period.rule, period.start, period.end) == ("conf-narrowed", NOW - timedelta(days=1), NOW)


@pytest.mark.parametrize(
    "conf",
    [
        {"start": "2024-01-01", "end": "2024-03-01"},  # wider on both sides
        {"start": "2024-01-31"},  # starts before the interval
        {"end": "2024-02-09"},  # ends after it
    ],
)
def test_conf_reaching_outside_a_scheduled_runs_interval_is_refused(conf):
    with pytest.raises(ConfigError) as error:
        resolve(data_interval=(utc(2024, 2, 1), utc(2024, 2, 8)), run_type="scheduled", conf=conf)
    assert error.value.argument == "run_context.conf"
    assert "reaches outside this data-interval run's window [2024-02-01T00:00:00+00:00, 2024-02-08" in str(
        error.value
    )
    assert "conf may only narrow" in str(error.value) and "DeltaBackfillOperator" in str(error.value)


def test_a_tasks_own_window_is_loaded_as_given_in_any_run():
    window = resolve(
        data_interval=(utc(2024, 3, 1), utc(2024, 3, 2)),
        run_type="scheduled",
        conf={"start": "2024-03-01T06:00:00Z"},
        window={"start": "2024-02-01", "end": "2024-02-08"},
    )
    assert (window.rule, window.start, window.end) == ("task-window", utc(2024, 2, 1), utc(2024, 2, 8))


def test_conf_applies_outside_airflow():
    window = resolve(conf={"start": "2024-02-01", "end": "2024-02-02"})
    assert (window.rule, window.start, window.end) == ("run-conf-range", utc(2024, 2, 1), utc(2024, 2, 2))


@pytest.mark.parametrize("conf", [{"start": None, "end": ""}, {"table": "orders"}, {}])
def test_conf_without_bounds_is_ignored(conf):
    assert resolve(run_type="manual", conf=conf).rule == "manual-from-cursor"


def test_conf_end_before_start_is_an_error():
    with pytest.raises(ConfigError) as error:
        resolve(run_type="manual", conf={"start": "2024-02-02", "end": "2024-02-01"})
    assert str(error.value) == (
        "run_context.conf.end: '2024-02-01T00:00:00+00:00' is before the window's start "
        "'2024-02-02T00:00:00+00:00'"
    )


def test_conf_bound_that_is_not_a_timestamp_names_the_conf_key():
    with pytest.raises(ConfigError) as error:
        resolve(run_type="manual", conf={"start": "last week"})
    assert str(error.value) == (
        "run_context.conf.start: 'last week' cannot bound a cursor column of type timestamp: "
        "it is not an ISO 8601 date or timestamp"
    )


def test_conf_numbers_bound_an_int_cursor():
    window = resolve(
        Incremental("id"), cursor_type="int", run_type="manual", conf={"start": 100, "end": "200"}
    )
    assert (window.start, window.end) == (100, 200)


# -- rule: real data interval --------------------------------------------------------------------------------


@pytest.mark.parametrize("run_type", ["scheduled", "backfill"])
def test_real_interval_is_the_window(run_type):
    window = resolve(
        data_interval=(utc(2024, 3, 4), utc(2024, 3, 5)),
        run_type=run_type,
        stored_state=stored("2024-03-09T00:00:00+00:00"),
    )
    assert bounds(window) == (utc(2024, 3, 4), utc(2024, 3, 5), True, False)
    assert (window.rule, window.stateful, window.boundary_dedup) == ("data-interval", False, False)


def test_interval_end_in_the_future_is_clamped_to_now():
    window = resolve(data_interval=(utc(2024, 3, 10), utc(2024, 3, 11)), run_type="scheduled")
    assert (window.start, window.end) == (utc(2024, 3, 10), NOW)


def test_interval_that_starts_after_now_is_an_error():
    with pytest.raises(
        ConfigError, match=r"data_interval: the window \[2024-03-11T00:00:00\+00:00, .* starts after now"
    ):
        resolve(data_interval=(utc(2024, 3, 11), utc(2024, 3, 12)), run_type="scheduled")


def test_interval_end_before_start_is_an_error():
    with pytest.raises(
        ConfigError, match="data_interval: the end 2024-03-04T00:00:00\\+00:00 is before the start"
    ):
        resolve(data_interval=(utc(2024, 3, 5), utc(2024, 3, 4)), run_type="scheduled")


def test_interval_in_other_time_zones_and_iso_strings_is_read_as_instants():
    from datetime import timedelta

    berlin = timezone(timedelta(hours=1))
    window = resolve(
        data_interval=(datetime(2024, 3, 4, 1, tzinfo=berlin), "2024-03-05T00:00:00Z"), run_type="scheduled"
    )
    assert (window.start, window.end) == (utc(2024, 3, 4), utc(2024, 3, 5))
    assert window.start.tzinfo is UTC


def test_interval_without_run_type_is_treated_as_scheduled():
    window = resolve(data_interval=(utc(2024, 3, 4), utc(2024, 3, 5)))
    assert (window.rule, window.stateful) == ("data-interval", False)


@pytest.mark.parametrize(
    "cursor_type, start, end",
    [
        ("timestamp_ntz", datetime(2024, 3, 4), datetime(2024, 3, 5)),
        ("date", date(2024, 3, 4), date(2024, 3, 5)),
        ("int", 1709510400, 1709596800),
        ("float", 1709510400.0, 1709596800.0),
        ("string", "2024-03-04", "2024-03-05"),  # midnight: the bare date, so "ds" strings split right
    ],
)
def test_interval_is_coerced_to_the_cursor_type(cursor_type, start, end):
    window = resolve(
        Incremental("c"),
        cursor_type=cursor_type,
        data_interval=(utc(2024, 3, 4), utc(2024, 3, 5)),
        run_type="scheduled",
    )
    assert (window.start, window.end) == (start, end)
    assert (type(window.start), type(window.end)) == (type(start), type(end))


def test_clamped_now_on_an_int_cursor_rounds_up_to_whole_seconds():
    now = utc(2024, 3, 4, 12, 0, 0, 1)
    window = resolve(
        Incremental("c"),
        cursor_type="int",
        data_interval=(utc(2024, 3, 4), utc(2024, 3, 5)),
        run_type="scheduled",
        now=now,
    )
    assert window.end == 1709553601


# -- rule: zero-width interval -> schedule period ------------------------------------------------------------


def test_zero_width_interval_uses_the_schedule_period():
    window = resolve(
        data_interval=(utc(2024, 3, 5), utc(2024, 3, 5)),
        run_type="scheduled",
        period_start="2024-03-04T00:00:00+00:00",
    )
    assert bounds(window) == (utc(2024, 3, 4), utc(2024, 3, 5), True, False)
    assert (window.rule, window.stateful, window.boundary_dedup) == ("schedule-period", False, False)


def test_zero_width_interval_without_period_start_is_an_error_never_a_guess():
    with pytest.raises(ConfigError) as error:
        resolve(data_interval=(utc(2024, 3, 5), utc(2024, 3, 5)), run_type="scheduled", run_id="scheduled__x")
    assert error.value.argument == "run_context.period_start"
    message = str(error.value)
    assert "run 'scheduled__x' has a zero-width data interval at 2024-03-05T00:00:00+00:00" in message
    assert "CronTriggerTimetable" in message and "CronDataIntervalTimetable" in message


def test_missing_interval_falls_back_to_logical_date_and_period():
    window = resolve(
        data_interval=(None, None),
        run_type="backfill",
        logical_date="2024-03-05T00:00:00+00:00",
        period_start="2024-03-04T00:00:00+00:00",
    )
    assert (window.rule, window.start, window.end) == ("schedule-period", utc(2024, 3, 4), utc(2024, 3, 5))


def test_scheduled_run_with_no_interval_and_no_logical_date_is_an_error():
    with pytest.raises(
        ConfigError, match="data_interval: run 'r1' of type 'scheduled' has neither a data interval"
    ):
        resolve(run_type="scheduled", run_id="r1")


def test_period_start_after_the_run_is_an_error():
    with pytest.raises(
        ConfigError, match="run_context.period_start: 2024-03-06T00:00:00\\+00:00 must be before"
    ):
        resolve(
            data_interval=(utc(2024, 3, 5), utc(2024, 3, 5)),
            run_type="scheduled",
            period_start="2024-03-06T00:00:00Z",
        )


def test_period_start_that_is_not_a_timestamp_is_an_error():
    with pytest.raises(ConfigError, match="run_context.period_start: 'monday' must be an ISO 8601 timestamp"):
        resolve(data_interval=(utc(2024, 3, 5), utc(2024, 3, 5)), run_type="scheduled", period_start="monday")


def test_consecutive_scheduled_windows_chain_without_gaps():
    days = [utc(2024, 3, d) for d in range(1, 6)]
    windows = [
        resolve(data_interval=(end, end), run_type="scheduled", period_start=start.isoformat())
        for start, end in zip(days, days[1:], strict=False)
    ]
    assert [(w.start, w.end) for w in windows] == list(zip(days, days[1:], strict=False))


# -- rule: manual run without conf ---------------------------------------------------------------------------


@pytest.mark.parametrize("run_type", ["manual", "asset_triggered", "asset_materialization"])
def test_manual_run_loads_from_the_stored_cursor_to_now(run_type):
    window = resolve(
        run_type=run_type,
        data_interval=(utc(2024, 3, 10), utc(2024, 3, 10)),
        stored_state=stored("2024-03-01T06:00:00+00:00"),
    )
    assert bounds(window) == (utc(2024, 3, 1, 6), NOW, True, False)
    assert (window.rule, window.stateful, window.boundary_dedup) == ("manual-from-cursor", True, True)


def test_manual_run_without_state_starts_at_initial_value():
    assert (resolve(run_type="manual").start, resolve(run_type="manual").end) == (utc(2024, 1, 1), NOW)


def test_manual_run_with_a_stored_cursor_after_now_is_an_error():
    with pytest.raises(ConfigError) as error:
        resolve(run_type="manual", stored_state=stored("2024-04-01T00:00:00+00:00"))
    assert error.value.argument == "stored last_value"
    assert "'2024-04-01T00:00:00+00:00' is after now ('2024-03-10T12:00:00+00:00')" in str(error.value)


def test_manual_run_with_min_cursor_has_no_end():
    inc = Incremental("id", initial_value=1000, last_value_func="min")
    window = resolve(inc, cursor_type="int", run_type="manual")
    assert (window.start, window.end, window.descending, window.stateful) == (1000, None, True, True)


def test_unknown_run_type_is_an_error():
    with pytest.raises(
        ConfigError, match="run_context.run_type: 'weird' is not a run type this provider knows"
    ):
        resolve(run_type="weird")


# -- coercion errors and arguments ---------------------------------------------------------------------------


def test_stored_last_value_that_does_not_fit_the_cursor_type_is_named():
    with pytest.raises(ConfigError) as error:
        resolve(Incremental("c"), cursor_type="timestamp", stored_state=stored("v42", path="c"))
    assert str(error.value).startswith(
        "stored last_value: 'v42' cannot bound a cursor column of type timestamp"
    )


def test_initial_value_that_does_not_fit_the_cursor_type_is_named():
    with pytest.raises(ConfigError) as error:
        resolve(Incremental("c", initial_value="first"), cursor_type="int")
    assert str(error.value) == (
        "initial_value: 'first' cannot bound a cursor column of type int: "
        "it is not an ISO 8601 date or timestamp"
    )


def test_unknown_cursor_type_is_an_error():
    with pytest.raises(ConfigError, match="cursor_type: 'bigint' is not valid"):
        resolve(cursor_type="bigint")


def test_naive_now_is_read_as_utc():
    window = resolve(run_type="manual", now=datetime(2024, 3, 10, 12))
    assert window.end == NOW and window.end.tzinfo is UTC


# -- as_dict -------------------------------------------------------------------------------------------------


def test_as_dict_is_json_and_round_trips():
    window = resolve(data_interval=(utc(2024, 3, 4), utc(2024, 3, 5)), run_type="scheduled")
    data = json.loads(json.dumps(window.as_dict()))
    assert data == {
        "start": "2024-03-04T00:00:00+00:00",
        "end": "2024-03-05T00:00:00+00:00",
        "start_closed": True,
        "end_closed": False,
        "stateful": False,
        "boundary_dedup": False,
        "rule": "data-interval",
        "cursor_type": "timestamp",
        "descending": False,
    }
    assert Window.from_dict(data) == window


@pytest.mark.parametrize("cursor_type", ["timestamp_ntz", "date", "int", "float", "string"])
def test_as_dict_round_trips_every_cursor_type(cursor_type):
    window = resolve(
        Incremental("c"),
        cursor_type=cursor_type,
        data_interval=(utc(2024, 3, 4), utc(2024, 3, 5)),
        run_type="scheduled",
    )
    assert Window.from_dict(json.loads(json.dumps(window.as_dict()))) == window


def test_a_period_start_wins_over_a_real_interval_that_is_not_the_period():
    """A trigger timetable's `interval=` of one day, on the 23-hour day of a spring-forward change: the
    window is the period since the previous run, not the day before the run."""
    window = resolve(
        data_interval=(utc(2024, 3, 30, 1), utc(2024, 3, 31, 1)),
        run_type="scheduled",
        now=utc(2024, 5, 1),
        period_start="2024-03-30T01:00:00Z",
    )
    assert (window.rule, window.start, window.end) == (
        "schedule-period",
        utc(2024, 3, 30, 1),
        utc(2024, 3, 31, 1),
    )
    shorter = resolve(
        data_interval=(utc(2024, 3, 31, 0), utc(2024, 4, 1, 0)),
        run_type="scheduled",
        now=utc(2024, 5, 1),
        period_start="2024-03-31T01:00:00Z",
    )
    assert (shorter.start, shorter.end) == (utc(2024, 3, 31, 1), utc(2024, 4, 1, 0))


def test_pendulum_bounds_in_any_zone_are_read_as_their_instants():
    import pendulum

    amsterdam = pendulum.datetime(2024, 3, 31, 3, tz="Europe/Amsterdam")  # 01:00 UTC, just after the change
    window = resolve(
        data_interval=(amsterdam.subtract(hours=23), amsterdam), run_type="scheduled", now=utc(2024, 5, 1)
    )
    assert (window.start, window.end) == (utc(2024, 3, 30, 2), utc(2024, 3, 31, 1))
    assert type(window.start) is datetime and window.start + timedelta(hours=1) > window.start
