"""Each key's newest change event, chosen by pyarrow in collected rows (spark/arrow_events.py): no Spark
session, the Arrow rows as staging collects them."""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_deltamerge.spark.arrow_events import EVENT_PREFIX, Events, newest_per_key
from airflow_provider_deltamerge.spark.frames import INPUT_ORDER

OP = EVENT_PREFIX + "op"  # a column the table does not take, kept under its helper name until ranked
EVENTS = Events(frame=None, content=("id", "seq", OP, "v"), renamed={"op": OP})


def collected(rows: list[tuple]) -> pa.Table:
    """Rows (id, seq, op, v) as collected: the sequence also in its system column, the input order."""
    table = pa.Table.from_pylist(
        [{"id": i, "seq": s, OP: op, "v": v, INPUT_ORDER: n} for n, (i, s, op, v) in enumerate(rows)]
    )
    return table.append_column("_dlt_sequence", table.column("seq"))


def test_the_greatest_sequence_wins_then_the_first_in_the_input():
    newest, ties = newest_per_key(
        collected([(1, 2, "u", 1.0), (2, 1, "c", 5.0), (1, 3, "u", 2.0), (1, 3, "u", 2.0), (1, 1, "c", 0.0)]),
        EVENTS,
        ("id",),
        1,
    )
    assert ties == 0
    assert newest.column_names == ["id", "seq", "v", "_dlt_sequence"]  # helper columns dropped
    assert newest.to_pylist() == [
        {"id": 1, "seq": 3, "v": 2.0, "_dlt_sequence": 3},
        {"id": 2, "seq": 1, "v": 5.0, "_dlt_sequence": 1},
    ]


def test_events_that_differ_at_one_sequence_are_ties_even_in_a_column_the_table_does_not_take():
    _, ties = newest_per_key(
        collected([(1, 4, "c", 1.0), (1, 4, "u", 1.0), (2, 4, "u", 1.0), (2, 4, "u", 9.0), (3, 1, "u", 1.0)]),
        EVENTS,
        ("id",),
        1,
    )
    assert ties == 2


def test_nan_and_null_equal_themselves_as_in_sparks_comparison_of_rows():
    nan = float("nan")
    _, ties = newest_per_key(
        collected([(1, 4, None, nan), (1, 4, None, nan), (2, 1, "u", None), (2, 1, "u", None)]),
        EVENTS,
        ("id",),
        1,
    )
    assert ties == 0


def test_a_nan_sequence_is_newer_than_any_number_as_in_sparks_order():
    nan, inf = float("nan"), float("inf")
    rows = [
        (1, 5.0, "u", 1.0),
        (1, nan, "u", 2.0),
        (1, inf, "u", 3.0),
        (2, -inf, "u", 4.0),
        (2, 0.0, "u", 5.0),
    ]
    for order in (rows, rows[::-1]):
        newest, ties = newest_per_key(collected(order), EVENTS, ("id",), 1)
        assert ties == 0
        assert [(r["id"], r["v"]) for r in newest.to_pylist()] == [(1, 2.0), (2, 5.0)]


def test_an_empty_batch_stays_empty():
    newest, ties = newest_per_key(collected([(1, 1, "u", 1.0)]).slice(0, 0), EVENTS, ("id",), 1)
    assert (newest.num_rows, ties) == (0, 0)
