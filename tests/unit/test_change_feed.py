"""A change data feed as a source, the pure part: the spec, the cursor, the versions each window reads
(checked against a reference model: windows that cut time into consecutive pieces read each commit
exactly once), and what is refused."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError, Incremental, LoadRequest
from airflow_provider_deltamerge.model.change_feed import Commit, range_problem, version_window
from airflow_provider_deltamerge.model.run import RunContext
from airflow_provider_deltamerge.model.sources import parse_source

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
NOW = datetime(2024, 6, 1, tzinfo=timezone.utc)
FEED = {"delta_changes": "/lake/bronze/orders"}
UPSERT = {"disposition": "merge", "strategy": "upsert"}


def request(**arguments):
    arguments.setdefault("write_disposition", UPSERT)
    arguments.setdefault("primary_key", "id")
    arguments.setdefault("sequence_by", "_commit_version")
    arguments.setdefault("source", FEED)
    return LoadRequest.create(dataset="/lake/silver", table_name="orders", **arguments)


def commits(hours: list[int]) -> list[Commit]:
    return [Commit(v, T0 + timedelta(hours=h)) for v, h in enumerate(hours)]


def window(incremental=None, *, interval=None, run=None, state=None, log=None, current=None, after=None):
    log = commits([0, 1, 2, 3]) if log is None else log
    return version_window(
        incremental or Incremental("_commit_version", range_start="open"),
        data_interval=interval,
        run_context=RunContext.from_value(run),
        stored_state=state,
        now=NOW,
        commits=log,
        current_version=log[-1].version if current is None else current,
        after=after,
    )


def test_the_spec_names_an_upstream_table():
    assert parse_source({"delta_changes": "s3://lake/bronze/orders/"}) == {
        "delta_changes": "s3://lake/bronze/orders"
    }
    with pytest.raises(ConfigError, match="source.delta_changes: 'bronze/orders' is a relative path"):
        parse_source({"delta_changes": "bronze/orders"})
    with pytest.raises(ConfigError, match=r"sig=\*\*\*. holds a credential"):
        parse_source({"delta_changes": "abfss://c@a.dfs.core.windows.net/t?sig=abcdef"})
    with pytest.raises(ConfigError, match="exactly one of the keys"):
        parse_source({"delta_changes": "/lake/t", "table": "x"})


def test_the_cursor_is_the_upstream_commit_version():
    assert request().cursor == Incremental("_commit_version", range_start="open")
    given = Incremental("_commit_version", initial_value=4, range_start="open")
    assert request(incremental=given).cursor == given
    with pytest.raises(ConfigError, match="cursor_path must be '_commit_version', not 'ts'"):
        request(incremental=Incremental("ts"))
    with pytest.raises(ConfigError, match="give range_start='open'"):
        request(incremental=Incremental("_commit_version", initial_value=4))
    with pytest.raises(ConfigError, match="initial_value: '4' must be an upstream version number"):
        request(incremental=Incremental("_commit_version", initial_value="4", range_start="open"))
    with pytest.raises(ConfigError, match="sequence_by: an upsert from a change feed needs sequence_by"):
        request(sequence_by=None)
    assert LoadRequest.from_json(request().to_json()).cursor == request().cursor


def test_from_the_stored_cursor_to_the_current_version():
    assert _range(window()) == (0, 4, True)
    stored = {"incremental": {"_commit_version": {"last_value": 1}}}
    assert _range(window(state=stored)) == (2, 4, True)
    assert _range(window(state={"incremental": {"_commit_version": {"last_value": 3}}})) == (4, 4, True)
    after = Incremental("_commit_version", initial_value=2, range_start="open")
    assert _range(window(after)) == (3, 4, True)
    manual = window(state=stored, run={"run_id": "m", "run_type": "manual"})
    assert _range(manual) == (2, 4, True) and manual.rule == "manual-from-cursor"


def test_an_end_value_range_of_versions():
    ranged = Incremental("_commit_version", initial_value=0, end_value=3, range_start="open")
    assert _range(window(ranged)) == (1, 3, False)
    closed = Incremental(
        "_commit_version", initial_value=0, end_value=2, range_start="open", range_end="closed"
    )
    assert _range(window(closed)) == (1, 3, False)
    beyond = Incremental("_commit_version", initial_value=0, end_value=99, range_start="open")
    assert _range(window(beyond)) == (1, 4, False)


def test_a_window_of_the_run_reads_the_versions_committed_in_it():
    scheduled = {"run_id": "s", "run_type": "scheduled"}
    interval = (T0 + timedelta(hours=1), T0 + timedelta(hours=3))
    assert _range(window(interval=interval, run=scheduled)) == (1, 3, False)
    assert _range(window(interval=(T0 - timedelta(days=1), T0), run=scheduled)) == (0, 0, False)
    later = (T0 + timedelta(hours=5), T0 + timedelta(hours=9))
    assert _range(window(interval=later, run=scheduled)) == (4, 4, False)
    conf = {"run_id": "m", "run_type": "manual", "conf": {"start": (T0 + timedelta(hours=2)).isoformat()}}
    assert _range(window(run=conf)) == (2, 4, False)


def test_a_window_reaching_before_the_log_starts_is_flagged():
    log = [Commit(5, T0 + timedelta(hours=5)), Commit(6, T0 + timedelta(hours=6))]
    scheduled = {"run_id": "s", "run_type": "scheduled"}
    early = window(interval=(T0, T0 + timedelta(hours=6)), run=scheduled, log=log)
    assert _range(early) == (0, 6, False)
    problem = range_problem(early.start, early.end, 5, [], "/lake/t", 6)
    assert "versions 0 to 4 are no longer in its log" in problem
    assert "(version 6), then go on after that version with the source " in problem
    assert problem.endswith("{'delta_changes': '/lake/t', 'start_after_version': 6}")
    late = window(
        interval=(T0 + timedelta(hours=5, minutes=30), T0 + timedelta(hours=7)), run=scheduled, log=log
    )
    assert _range(late) == (6, 7, False) and range_problem(6, 7, 5, [], "/lake/t", 6) is None


def test_versions_with_the_feed_off_are_named():
    problem = range_problem(0, 4, 0, [0, 1], "/lake/t", 3)
    assert problem.startswith("its change data feed was off at version(s) 0 to 1")
    assert "delta.enableChangeDataFeed" in problem
    assert problem.endswith("with the source {'delta_changes': '/lake/t', 'start_after_version': 1}")
    assert range_problem(3, 3, 5, [3], "/lake/t", 3) is None  # an empty range reads nothing


def test_the_source_may_name_the_version_to_start_after():
    spec = {"delta_changes": "/lake/bronze/orders/", "start_after_version": 4}
    assert parse_source(spec) == {"delta_changes": "/lake/bronze/orders", "start_after_version": 4}
    assert request(source=spec).source["start_after_version"] == 4
    for bad in (-1, "4", 4.0, True, None):
        with pytest.raises(ConfigError, match="source.start_after_version: .* must be an upstream version"):
            parse_source({"delta_changes": "/lake/t", "start_after_version": bad})
    with pytest.raises(ConfigError, match=r"unknown change feed key\(s\) \['table'\]"):
        parse_source({"delta_changes": "/lake/t", "start_after_version": 1, "table": "x"})
    with pytest.raises(ConfigError, match="relative path"):
        parse_source({"delta_changes": "t", "start_after_version": 1})


def test_no_window_starts_at_or_before_the_version_the_source_names():
    state = {"incremental": {"_commit_version": {"last_value": 1}}}
    assert _range(window(state=state)) == (2, 4, True)
    assert _range(window(state=state, after=2)) == (3, 4, True)  # past the stored cursor
    assert _range(window(state={"incremental": {"_commit_version": {"last_value": 3}}}, after=1)) == (
        4,
        4,
        True,
    )  # the cursor is past it
    assert _range(window(after=3)) == (4, 4, True)  # nothing after it yet: an empty range
    ranged = Incremental("_commit_version", initial_value=-1, end_value=3, range_start="open")
    assert _range(window(ranged, after=0)) == (1, 3, False)
    scheduled = {"run_id": "s", "run_type": "scheduled"}
    interval = (T0, T0 + timedelta(hours=2, minutes=30))
    assert _range(window(interval=interval, run=scheduled)) == (0, 3, False)
    assert _range(window(interval=interval, run=scheduled, after=1)) == (2, 3, False)


def _range(w) -> tuple[int, int, bool]:
    assert w.cursor_type == "int" and w.start_closed and not w.end_closed
    return w.start, w.end, w.stateful


@settings(max_examples=40, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=140), min_size=1, max_size=6, unique=True),
)
def test_consecutive_windows_read_each_commit_exactly_once(gaps, cuts):
    """Reference model: a version belongs to the window its commit timestamp falls in."""
    hours = [sum(gaps[: i + 1]) for i in range(len(gaps))]  # ascending, ties allowed
    log = commits(hours)
    bounds = [T0 + timedelta(minutes=30 * m) for m in sorted(cuts)]  # half of them at a commit
    scheduled = {"run_id": "s", "run_type": "scheduled"}
    read: list[int] = []
    for start, end in zip([T0 - timedelta(days=1), *bounds], [*bounds, NOW], strict=True):
        w = window(interval=(start, end), run=scheduled, log=log)
        expected = [c.version for c in log if start <= c.timestamp < end]
        assert list(range(w.start, w.end)) == expected
        read += expected
    assert read == [c.version for c in log]
