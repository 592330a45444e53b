"""A commit over a stale read, refused before it is made (delta-rs).

A plan that removes or rewrites files (an overwrite, a merge) is made on a snapshot. delta-rs commits at
the snapshot's next version and, where another commit took that version, rebases the commit with its
own conflict check, which 1.6 gets wrong: an overwrite rebased over an OPTIMIZE removes the files the
OPTIMIZE removed already and keeps the file the OPTIMIZE wrote, with every old row in it. So such a
commit is made on the table as it is now, once `require_reads_current` found that no commit since the
snapshot removed a file the plan read, and it may land only at the version after that one (`PINNED`
as delta-rs's `max_commit_retries`): a commit landing in between fails it, and the load is planned
again. What a plan read is its `read_scope` (plan/pruning.py): the files of the partitions its
condition names, else all of them.
"""

from __future__ import annotations

from deltalake import DeltaTable

from ..errors import ConflictError
from ..plan.expressions import And, Cmp, Col, Expr, In, IsNull, Lit, Not

PINNED = 0  # commit retries: the commit lands at the version after the table's, or fails
_COMPARE = {
    "=": lambda a, b: a == b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def files_read(table: DeltaTable, scope: tuple[Expr, ...] = ()) -> set[str]:
    """The data files of the table's loaded version in the scope (conjuncts on partition columns; empty:
    the whole table), by their partition values."""
    actions = table.get_add_actions(flatten=True)
    paths = actions.column("path").to_pylist()
    if not scope:
        return set(paths)
    partitions = table.metadata().partition_columns
    values = {c: actions.column(f"partition.{c}").to_pylist() for c in partitions}
    rows = ({c: values[c][i] for c in partitions} for i in range(len(paths)))
    return {p for p, row in zip(paths, rows, strict=True) if all(_holds(c, row) for c in scope)}


def require_reads_current(
    read: DeltaTable, current: DeltaTable, scope: tuple[Expr, ...] = (), added_too: bool = False
) -> None:
    """Raise ConflictError where a commit between `read`'s version and `current`'s changed the table's
    schema (the plan's columns are the old schema's), or removed a file in the scope (with `added_too`,
    or added one: a plan whose source holds rows it read from the table)."""
    if current.version() == read.version():
        return
    if current.schema().to_json() != read.schema().to_json() or (
        current.metadata().partition_columns != read.metadata().partition_columns
    ):
        raise ConflictError(
            f"table {current.table_uri}: a commit after version {read.version()}, which this load planned "
            f"on, changed the table's schema (the table is at version {current.version()} now); nothing "
            "was written by this load. Retry the load."
        )
    before, now = files_read(read, scope), files_read(current, scope)
    changed = (before - now) | ((now - before) if added_too else set())
    if changed:
        raise ConflictError(
            f"table {current.table_uri}: a commit after version {read.version()}, which this load planned "
            f"on, {'changed' if added_too else 'removed'} {len(changed)} of the files the load read (the "
            f"table is at version {current.version()} now); nothing was written by this load. Retry the load."
        )


def require_version(read: DeltaTable, current: DeltaTable) -> None:
    """Raise ConflictError where any commit landed after `read`'s version: a plan that took more than
    the table from that version (change events filtered by the tombstones of the loads committed up to
    it) is planned again."""
    if current.version() != read.version():
        raise ConflictError(
            f"table {current.table_uri}: a commit after version {read.version()}, which this load planned "
            f"on, may have deleted keys this load's events would bring back (the table is at version "
            f"{current.version()} now); nothing was written by this load. Retry the load."
        )


def _holds(expr: Expr, row: dict) -> bool:
    """Whether a file with these partition values can hold rows matching expr; where the values do not
    compare with the literals, it is counted as read."""
    try:
        return _value(expr, row) is True
    except TypeError:
        return True


def _value(expr: Expr, row: dict):
    """SQL's three-valued result: True, False, or None for unknown (a NULL operand)."""
    if isinstance(expr, Col):
        return row[expr.name]
    if isinstance(expr, Lit):
        return expr.value
    if isinstance(expr, In):
        value = _value(expr.operand, row)
        return None if value is None else value in {_value(v, row) for v in expr.values}
    if isinstance(expr, IsNull):
        return _value(expr.operand, row) is None
    if isinstance(expr, Not):
        value = _value(expr.operand, row)
        return None if value is None else not value
    if isinstance(expr, And):
        values = [_value(o, row) for o in expr.operands]
        return False if False in values else (None if None in values else True)
    if isinstance(expr, Cmp):
        left, right = _value(expr.left, row), _value(expr.right, row)
        if expr.op == "IS NOT DISTINCT FROM":
            return left == right
        return None if left is None or right is None else _COMPARE[expr.op](left, right)
    raise TypeError(f"not an expression: {expr!r}")
