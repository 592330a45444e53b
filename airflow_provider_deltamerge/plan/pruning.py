"""File pruning: the batch's key ranges as literal bounds in a merge condition (pure).

Delta engines skip a target file only when the condition bounds the target's columns by literals
(delta-rs, Delta Lake's own MERGE). A target row outside the batch's range of a key cannot match any
batch row on that key, so bounding the join by the range changes no outcome, while every file whose
statistics lie outside it is left unread and unrewritten. Plans whose clauses act on target rows the
batch does not match (scd2's not-matched-by-source retirements) or that match on keys read from the
target are never bounded; scd2 of change events is, as its source holds only the batch's merge keys
(its new versions and the table's versions of those keys it closes).

Where a key column partitions the table and the batch holds few of its values, the bound names them
(`t.day IN (...)`) instead of spanning their range: a range of partitions takes in every partition
between the batch's lowest and highest, read by a streamed delta-rs merge and by Delta's own MERGE, and
it is the commit's read predicate, so a concurrent load into a partition in between would conflict.

`read_scope` says which partitions a commit reads, as Delta Lake's conflict check takes it: the
conjuncts of its condition on partition columns alone. A commit that lands after the plan's snapshot
and removes a file in that scope makes the plan stale (see delta/read_check.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import date, datetime

from .expressions import TARGET, And, Cmp, Col, Expr, In, IsNull, Lit, Not, all_of
from .merge import MergePlan, Operation, SourceShape

_BOUNDED_SHAPES = (
    SourceShape.ROWS,
    SourceShape.ROWS_WITH_FLAG,
    SourceShape.DELETE_KEYS_AND_ROWS,
    SourceShape.SCD2_EVENTS,  # its source holds the batch's keys only, and no clause acts on an unmatched row
    SourceShape.SCD2_HISTORY,  # likewise
)


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


def rewrites_files(plan: MergePlan) -> bool:
    """Whether the plan's commit removes files it read: an overwrite, or a merge (which rewrites the
    files holding the rows it changes)."""
    return plan.operation in (Operation.OVERWRITE, Operation.MERGE)


def read_scope(plan: MergePlan, partition_columns: tuple[str, ...]) -> tuple[Expr, ...]:
    """The conjuncts of the plan's condition that confine its read to some partitions: for a merge,
    those on target partition columns alone (`t.day IN (1, 5)`); for a window overwrite, those of its
    predicate on partition columns alone. Empty where the plan reads the whole table: a full overwrite,
    a merge whose source was read from the table, a condition without such conjuncts."""
    if plan.operation is Operation.MERGE and not plan.needs_target_read:
        condition, side = plan.on, TARGET
    elif plan.operation is Operation.OVERWRITE:
        condition, side = plan.replace_where, ""
    else:
        condition, side = None, ""
    if condition is None:
        return ()
    conjuncts = condition.operands if isinstance(condition, And) else (condition,)
    return tuple(c for c in conjuncts if _only_partitions(c, side, partition_columns))


def _only_partitions(expr: Expr, side: str, partition_columns: tuple[str, ...]) -> bool:
    columns = _columns(expr)
    return bool(columns) and all(c.side == side and c.name in partition_columns for c in columns)


def _columns(expr: Expr) -> list[Col]:
    if isinstance(expr, Col):
        return [expr]
    if isinstance(expr, Cmp):
        return _columns(expr.left) + _columns(expr.right)
    if isinstance(expr, (IsNull, Not)):
        return _columns(expr.operand)
    if isinstance(expr, And):
        return [c for o in expr.operands for c in _columns(o)]
    if isinstance(expr, In):
        return _columns(expr.operand) + [c for v in expr.values for c in _columns(v)]
    return []
