"""A MergePlan in delta-rs's terms: SQL as delta-rs (DataFusion) parses it, and each clause of the plan as
the call of deltalake's TableMerger that makes it. Used by the delta-rs writer and the tombstones' merge.
"""

from __future__ import annotations

from datetime import date, datetime

from ..plan.expressions import SOURCE, render, standard_string
from ..plan.merge import Clause


class DataFusionDialect:
    """SQL as delta-rs parses it: double-quoted identifiers, microsecond UTC timestamp literals."""

    @staticmethod
    def quote(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    @staticmethod
    def timestamp(value: datetime) -> str:
        # A plain literal is typed Timestamp(ns) and overflows on tables holding 9999-12-31 markers.
        return f"arrow_cast('{value.isoformat()}', 'Timestamp(Microsecond, Some(\"UTC\"))')"

    @staticmethod
    def timestamp_ntz(value: datetime) -> str:
        return f"arrow_cast('{value.isoformat()}', 'Timestamp(Microsecond, None)')"

    @staticmethod
    def date(value: date) -> str:
        return f"arrow_cast('{value.isoformat()}', 'Date32')"

    string = staticmethod(standard_string)


def spelled_copies(columns, helpers, dialect) -> dict[str, str] | None:
    """{target column: the source column of the same name}, quoted, for "update all" and "insert all"
    where delta-rs cannot spell them itself: it puts each name in backticks without doubling one inside,
    so a name holding a backtick does not parse. None (delta-rs's own `*`) for every other batch."""
    if not any("`" in name for name in columns):
        return None
    kept = [name for name in columns if name not in set(helpers)]
    return {dialect.quote(name): f"{SOURCE}.{dialect.quote(name)}" for name in kept}


def add_clause(merger, clause: Clause, helpers: list[str], dialect, copied: dict[str, str] | None = None):
    condition = render(clause.condition, dialect) if clause.condition is not None else None
    if clause.when == "matched" and clause.action == "delete":
        return merger.when_matched_delete(predicate=condition)
    if clause.when == "not_matched_by_source" and clause.action == "delete":
        return merger.when_not_matched_by_source_delete(predicate=condition)
    if clause.when == "matched" and clause.action == "update_all":
        if copied is not None:
            return merger.when_matched_update(copied, predicate=condition)
        return merger.when_matched_update_all(predicate=condition, except_cols=helpers or None)
    if clause.when == "not_matched" and clause.action == "insert_all":
        if copied is not None:
            return merger.when_not_matched_insert(copied, predicate=condition)
        return merger.when_not_matched_insert_all(predicate=condition, except_cols=helpers or None)
    assignments = {dialect.quote(col): render(value, dialect) for col, value in clause.assignments}
    if clause.when == "matched" and clause.action == "update":
        return merger.when_matched_update(assignments, predicate=condition)
    if clause.when == "not_matched_by_source" and clause.action == "update":
        return merger.when_not_matched_by_source_update(assignments, predicate=condition)
    raise ValueError(f"the delta-rs writer has no translation for clause {clause}")
