"""File pruning: the batch's key ranges as literal bounds in a merge condition (pure).

Delta engines skip a target file only when the condition bounds the target's columns by literals
(delta-rs, Delta Lake's own MERGE). A target row outside the batch's range of a key cannot match any
batch row on that key, so bounding the join by the range changes no outcome, while every file whose
statistics lie outside it is left unread and unrewritten. Plans whose clauses act on target rows the
batch does not match (scd2's not-matched-by-source retirements) or that match on keys read from the
target are never bounded.

Where a key column partitions the table and the batch holds few of its values, the bound names them
(`t.day IN (...)`) instead of spanning their range: a range of partitions takes in every partition
between the batch's lowest and highest, read by a streamed delta-rs merge and by Delta's own MERGE, and
it is the commit's read predicate, so a concurrent load into a partition in between would conflict.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import date, datetime

from .expressions import TARGET, And, Cmp, Col, Expr, In, Lit, all_of
from .merge import MergePlan, Operation, SourceShape

_BOUNDED_SHAPES = (SourceShape.ROWS, SourceShape.ROWS_WITH_FLAG, SourceShape.DELETE_KEYS_AND_ROWS)


@dataclass(frozen=True)
class KeyRange:
    """min and max of one key column over a batch (ints, text, dates or timestamps); for a column that
    partitions the table, also the batch's distinct values, sorted, where they are few (else empty)."""

    column: str
    low: int | str | date | datetime
    high: int | str | date | datetime
    values: tuple[int | str | date, ...] = ()


def target_bounds(ranges: tuple[KeyRange, ...]) -> Expr | None:
    """t.col IN (values) for each range that lists its values, low <= t.col <= high for the others,
    ANDed; None without ranges."""
    bounds: list[Expr] = []
    for r in ranges:
        column = Col(r.column, TARGET)
        if r.values:
            bounds.append(In(column, tuple(Lit(v) for v in r.values)))
        else:
            bounds += [Cmp(">=", column, Lit(r.low)), Cmp("<=", column, Lit(r.high))]
    return all_of(*bounds) if bounds else None


def bounded(plan: MergePlan, ranges: tuple[KeyRange, ...]) -> MergePlan:
    """`plan` with its merge condition bounded by the ranges of the columns it matches on.

    Only ranges of columns the condition compares to the batch are used, and only for plans where a
    target row outside them is untouched (see the module's docstring)."""
    if plan.operation is not Operation.MERGE or plan.source not in _BOUNDED_SHAPES or plan.on is None:
        return plan
    if any(c.when == "not_matched_by_source" for c in plan.clauses):
        return plan
    matched = _target_columns(plan.on)
    usable = tuple(r for r in ranges if r.column in matched)
    bounds = target_bounds(usable)
    if bounds is None:
        return plan
    operands = plan.on.operands if isinstance(plan.on, And) else (plan.on,)
    extra = bounds.operands if isinstance(bounds, And) else (bounds,)
    return dataclasses.replace(plan, on=And((*operands, *extra)))


def _target_columns(on: Expr) -> set[str]:
    """Target columns the condition compares for equality with a source column."""
    operands = on.operands if isinstance(on, And) else (on,)
    return {
        o.left.name
        for o in operands
        if isinstance(o, Cmp) and o.op == "=" and isinstance(o.left, Col) and o.left.side == TARGET
    }
