"""Expectations decided on the driver (spark/expectations.py): where staging's pass collects every row of
the batch to the driver as Arrow anyway (load/staged_arrow.py) and keeps each row as it is (no
deduplication, no ranking of events), the pass collects the rows with their flags, one boolean column
per expectation computed by Spark, and the driver counts them and leaves the rows set aside out with
pyarrow. The pass then observes nothing and filters nothing: a fresh process compiles no more for the
expectations than their conditions.

`split` makes of the collected rows: those kept (without the flags), the counts, the rows to quarantine
and those failing a `fail` expectation (the batch's own columns, as the batch types them, and the names
of the expectations each failed)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc

from ..model.expectations import ACTIONS, Expectation

SET_ASIDE = ("drop", "quarantine", "fail")
FAILED_TYPE = pa.list_(pa.field("element", pa.string(), nullable=False))  # as Spark's array of the names


@dataclass(frozen=True)
class Split:
    kept: pa.Table  # the rows that go on, without the flags
    rows: int  # every row checked
    failed: dict[str, int]  # expectation name -> rows failing it
    set_aside: dict[str, int]  # drop / quarantine / fail -> rows whose strictest failed action it is
    quarantined: pa.Table  # the batch's own columns and `failed_column`
    failing: pa.Table  # the same, of the rows failing a `fail` expectation


def split(
    collected: pa.Table,
    expectations: tuple[Expectation, ...],
    flags: list[str],
    own: list[str],
    failed_column: str,
) -> Split:
    """The collected rows (with `flags`: each expectation's condition for the row, true, false or null)
    split; a row fails an expectation whose condition is not true. `own` names the batch's own columns,
    which the rows set aside keep (the collection keeps them as the batch types them:
    load/staged_arrow.py decides where it applies)."""
    fails = [pc.invert(pc.fill_null(collected[f], False)).combine_chunks() for f in flags]
    strictest = {action: _strictest(fails, expectations, action) for action in SET_ASIDE}
    kept = collected.filter(pc.invert(_any(list(strictest.values()), collected.num_rows))).drop_columns(flags)
    return Split(
        kept,
        collected.num_rows,
        {e.name: _count(fails[i]) for i, e in enumerate(expectations)},
        {action: _count(mask) for action, mask in strictest.items()},
        _named(collected, fails, strictest["quarantine"], expectations, own, failed_column),
        _named(collected, fails, strictest["fail"], expectations, own, failed_column),
    )


def _count(mask: pa.BooleanArray) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


def _any(masks: list[pa.BooleanArray], rows: int) -> pa.BooleanArray:
    return reduce(pc.or_, masks) if masks else pa.array([False] * rows, pa.bool_())


def _strictest(fails: list, expectations: tuple[Expectation, ...], action: str) -> pa.BooleanArray:
    """Per row, whether it fails an expectation of `action` and none stricter."""
    rows = len(fails[0]) if fails else 0
    of = [fails[i] for i, e in enumerate(expectations) if e.action == action]
    stricter = [
        fails[i] for i, e in enumerate(expectations) if ACTIONS.index(e.action) > ACTIONS.index(action)
    ]
    return pc.and_(_any(of, rows), pc.invert(_any(stricter, rows)))


def _named(
    collected: pa.Table,
    fails: list,
    picked: pa.BooleanArray,
    expectations: tuple[Expectation, ...],
    own: list[str],
    failed_column: str,
) -> pa.Table:
    """The picked rows: the batch's own columns (every one nullable, as Spark's rows come to Arrow), then
    the names of the expectations each failed, in order."""
    rows = collected.select(own).filter(picked)
    rows = rows.cast(pa.schema([f.with_nullable(True) for f in rows.schema]))
    flags = [mask.filter(picked) for mask in fails]
    # every (row, expectation) a row fails, row by row and in the expectations' order within a row
    row_of = pa.concat_arrays([pc.indices_nonzero(f) for f in flags] or [pa.array([], pa.uint64())])
    index = pa.concat_arrays(
        [pa.array([i] * _count(f), pa.int64()) for i, f in enumerate(flags)] or [pa.array([], pa.int64())]
    )
    order = pc.sort_indices(
        pa.table({"row": row_of, "index": index}), [("row", "ascending"), ("index", "ascending")]
    )
    names = pa.array([e.name for e in expectations], pa.string()).take(index.take(order))
    per_row = reduce(pc.add, [pc.cast(f, pa.int32()) for f in flags]) if flags else pa.array([], pa.int32())
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(per_row).cast(pa.int32())])
    failed = pa.ListArray.from_arrays(offsets, names, type=FAILED_TYPE)
    return rows.append_column(failed_column, failed)
