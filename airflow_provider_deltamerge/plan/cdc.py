"""The merge condition of change events: an event applies only where it is newer than the row (pure).

A row keeps the sequence of the event that last changed it in the system columns of spec/cdc.py; an
event updates the row only if its sequence is greater, compared column by column (the first that
differs decides). A row without a sequence (loaded before sequence_by was used) takes any event, and
a table without the sequence columns yet (its first load with sequence_by) compares none.
"""

from __future__ import annotations

from .expressions import SOURCE, TARGET, Cmp, Col, Expr, IsNull, Or, all_of, eq


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
