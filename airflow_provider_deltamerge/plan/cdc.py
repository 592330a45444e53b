"""The merge condition of change events: an event applies only where it is newer than the row (pure).

A row keeps the sequence of the event that last changed it in the system columns of model/cdc.py; an
event updates the row only if its sequence is greater, compared column by column (the first that
differs decides). A row without a sequence (loaded before sequence_by was used) takes any event, and
a table without the sequence columns yet (its first load with sequence_by) compares none.

A truncate event at a sequence removes the rows not newer than it (`not_newer_than`): those whose
sequence is as old or older, and those without a sequence.
"""

from __future__ import annotations

from .expressions import SOURCE, TARGET, Cmp, Col, Expr, IsNull, Lit, Or, all_of, eq


def newer_than_target(columns: tuple[str, ...], table_columns: tuple[str, ...] | None = None) -> Expr | None:
    """s.seq > t.seq over the sequence columns in order, or t.seq IS NULL; over the leading columns
    the table has, where `table_columns` says which (None: no condition where it has none)."""
    if table_columns is not None:
        present = [c in table_columns for c in columns] + [False]
        columns = columns[: present.index(False)]
        if not columns:
            return None
    source, target = tuple(Col(c, SOURCE) for c in columns), tuple(Col(c, TARGET) for c in columns)
    unsequenced = IsNull(target[0])
    return Or((unsequenced, *greater_terms(source, target)))


def not_newer_than(
    columns: tuple[str, ...], values: tuple, table_columns: tuple[str, ...] | None = None
) -> Expr | None:
    """t.seq <= values over the sequence columns in order (the first that differs decides), or t.seq IS
    NULL: the rows a truncate at `values` removes; over the leading columns the table has, where
    `table_columns` says which (None: every row, the table has no sequence yet)."""
    pairs = list(zip(columns, values, strict=True))
    if table_columns is not None:
        present = [c in table_columns for c in columns] + [False]
        pairs = pairs[: present.index(False)]
        if not pairs:
            return None
    target = tuple(Col(c, TARGET) for c, _ in pairs)
    return Or((IsNull(target[0]), at_most(target, tuple(Lit(v) for _, v in pairs))))


def greater_terms(left: tuple[Expr, ...], right: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """The cases of `left > right` compared in order (the first that differs decides): one per part."""
    terms = []
    for i in range(len(left)):
        ties = [eq(a, b) for a, b in zip(left[:i], right[:i], strict=True)]
        terms.append(all_of(*ties, Cmp(">", left[i], right[i])))
    return tuple(terms)


def greater(left: tuple[Expr, ...], right: tuple[Expr, ...]) -> Expr:
    """`left > right`, two sequences of as many parts compared in order."""
    terms = greater_terms(left, right)
    return terms[0] if len(terms) == 1 else Or(terms)


def at_most(left: tuple[Expr, ...], right: tuple[Expr, ...]) -> Expr:
    """`left <= right`, two sequences of as many parts compared in order."""
    result: Expr = Cmp("<=", left[-1], right[-1])
    for a, b in reversed(tuple(zip(left[:-1], right[:-1], strict=True))):
        result = Or((Cmp("<", a, b), all_of(eq(a, b), result)))
    return result
