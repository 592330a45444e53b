"""The merge condition of change events: an event applies only where it is newer than the row (pure).

A row keeps the sequence of the event that last changed it in the system columns of spec/cdc.py; an
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
    greater = []
    for i, column in enumerate(columns):
        ties = [eq(Col(c, SOURCE), Col(c, TARGET)) for c in columns[:i]]
        greater.append(all_of(*ties, Cmp(">", Col(column, SOURCE), Col(column, TARGET))))
    unsequenced = IsNull(Col(columns[0], TARGET))
    return Or((unsequenced, *greater))


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
    last, value = pairs[-1]
    result: Expr = Cmp("<=", Col(last, TARGET), Lit(value))
    for column, value in reversed(pairs[:-1]):
        target, bound = Col(column, TARGET), Lit(value)
        result = Or((Cmp("<", target, bound), all_of(eq(target, bound), result)))
    return Or((IsNull(Col(pairs[0][0], TARGET)), result))
