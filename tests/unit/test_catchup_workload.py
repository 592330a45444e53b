"""The weekly catchup benchmark's workload (benchmarks/catchup_work.py): its windows' events and the table
they must leave, checked against a row-by-row upsert of every event in window order."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import catchup_work as work  # noqa: E402

sys.path.pop(0)


def upserted(rows: int, per_window: int) -> pa.Table:
    """The table a row-by-row upsert on id of every window's events, in order, leaves."""
    table: dict[int, dict] = {}
    for week in range(work.WINDOWS):
        for event in work.window_events(rows, per_window, week).to_pylist():
            table[event["id"]] = event
    return pa.Table.from_pylist(list(table.values()))


@pytest.mark.parametrize(("rows", "per_window"), [(520, 13), (1000, 30), (53, 1), (104, 2)])
def test_the_expected_figures_are_those_of_every_event_upserted_once_in_order(rows, per_window):
    want = work.expected(rows, per_window)
    assert work.mismatches(want, work.observed(upserted(rows, per_window))) == []
    assert want["rows"] == want["distinct_ids"] == rows


def test_each_window_holds_distinct_keys_inside_its_bounds_and_later_weeks_update_earlier_keys():
    rows, per_window = 5200, 125
    seen: set[int] = set()
    updated = 0
    for week in range(work.WINDOWS):
        events = work.window_events(rows, per_window, week).to_pydict()
        start, end = work.window_bounds(week)
        assert len(set(events["id"])) == len(events["id"]) == (100 if week == 0 else 125)
        assert all(start <= ts < end for ts in events["ts"])
        updated += len(seen & set(events["id"]))
        seen |= set(events["id"])
    assert updated == 51 * 25 and len(seen) == rows


def test_a_window_loaded_twice_or_missed_is_told():
    rows, per_window = 520, 13
    want = work.expected(rows, per_window)
    final = upserted(rows, per_window)
    twice = pa.concat_tables([final, final.slice(0, 3)])
    assert "rows: expected 520, found 523" in work.mismatches(want, work.observed(twice))
    missed = final.filter(pa.compute.not_equal(final["week"], 51))
    told = work.mismatches(want, work.observed(missed))
    assert any(line.startswith("rows per week differ in 1 week(s), first week 51") for line in told)
    stale = final.set_column(2, "s", pa.array(["w0-0"] * final.num_rows))
    assert work.mismatches(want, work.observed(stale))[-1].endswith("hold values not of their (id, week)")
