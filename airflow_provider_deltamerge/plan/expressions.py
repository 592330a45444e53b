"""A tiny expression tree for merge conditions, rendered to SQL by each writer's dialect (pure).

Plans hold structure, not SQL text, so that delta-rs (DataFusion SQL) and delta-spark (Spark SQL)
each quote identifiers and type literals their own way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Protocol

SOURCE = "s"
TARGET = "t"


@dataclass(frozen=True)
class Col:
    name: str
    side: str = ""  # SOURCE, TARGET, or "" for an unqualified column (replace predicates)


@dataclass(frozen=True)
class Lit:
    value: str | bool | int | float | datetime | date | None


@dataclass(frozen=True)
class Cmp:
    op: str  # one of = < <= > >= and IS NOT DISTINCT FROM (equality under which NULL matches NULL)
    left: Expr
    right: Expr


@dataclass(frozen=True)
class IsNull:
    operand: Expr


@dataclass(frozen=True)
class Not:
    operand: Expr


@dataclass(frozen=True)
class And:
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class In:
    """operand IN (values...): one of the listed values."""

    operand: Expr
    values: tuple[Expr, ...]


@dataclass(frozen=True)
class Case:
    """CASE WHEN condition THEN value ... ELSE otherwise END: the first condition that holds decides."""

    whens: tuple[tuple[Expr, Expr], ...]
    otherwise: Expr | None = None  # None: NULL


@dataclass(frozen=True)
class Field:
    """A field of a struct: operand.name."""

    operand: Expr
    name: str


@dataclass(frozen=True)
class Struct:
    """A struct of the named values, in order: named_struct('a', x, 'b', y) in either dialect."""

    fields: tuple[tuple[str, Expr], ...]


Expr = Col | Lit | Cmp | IsNull | Not | And | Or | In | Case | Field | Struct


def eq(left: Expr, right: Expr) -> Cmp:
    return Cmp("=", left, right)


def same(left: Expr, right: Expr) -> Cmp:
    """left IS NOT DISTINCT FROM right: equal, or both NULL."""
    return Cmp("IS NOT DISTINCT FROM", left, right)


def all_of(*operands: Expr) -> Expr:
    """AND of the operands; a single operand stands alone."""
    flat = tuple(operands)
    return flat[0] if len(flat) == 1 else And(flat)


def keys_equal(target_columns: tuple[str, ...], source_columns: tuple[str, ...]) -> Expr:
    """t.a = s.a AND t.b = s.b ...: compound keys compare column by column."""
    return all_of(
        *(eq(Col(t, TARGET), Col(s, SOURCE)) for t, s in zip(target_columns, source_columns, strict=True))
    )


class Dialect(Protocol):
    def quote(self, name: str) -> str: ...

    def timestamp(self, value: datetime) -> str: ...

    def timestamp_ntz(self, value: datetime) -> str: ...

    def date(self, value: date) -> str: ...

    def string(self, value: str) -> str: ...


def standard_string(value: str) -> str:
    """A SQL-standard string literal: single quotes, a quote inside doubled."""
    return "'" + value.replace("'", "''") + "'"


def render(expr: Expr, dialect: Dialect) -> str:
    """SQL text of expr in the given dialect."""
    if isinstance(expr, Col):
        quoted = dialect.quote(expr.name)
        return f"{expr.side}.{quoted}" if expr.side else quoted
    if isinstance(expr, Lit):
        return _literal(expr.value, dialect)
    if isinstance(expr, Cmp):
        return f"{render(expr.left, dialect)} {expr.op} {render(expr.right, dialect)}"
    if isinstance(expr, IsNull):
        return f"{render(expr.operand, dialect)} IS NULL"
    if isinstance(expr, Not):
        return f"NOT ({render(expr.operand, dialect)})"
    if isinstance(expr, And):
        return " AND ".join(f"({render(o, dialect)})" for o in expr.operands)
    if isinstance(expr, Or):
        return " OR ".join(f"({render(o, dialect)})" for o in expr.operands)
    if isinstance(expr, In):
        listed = ", ".join(render(v, dialect) for v in expr.values)
        return f"{render(expr.operand, dialect)} IN ({listed})"
    if isinstance(expr, Field):
        return f"{render(expr.operand, dialect)}.{dialect.quote(expr.name)}"
    if isinstance(expr, Struct):
        named = ", ".join(f"{dialect.string(n)}, {render(v, dialect)}" for n, v in expr.fields)
        return f"named_struct({named})"
    if isinstance(expr, Case):
        whens = " ".join(f"WHEN {render(c, dialect)} THEN {render(v, dialect)}" for c, v in expr.whens)
        otherwise = f" ELSE {render(expr.otherwise, dialect)}" if expr.otherwise is not None else ""
        return f"CASE {whens}{otherwise} END"
    raise TypeError(f"not an expression: {expr!r}")


def _literal(value, dialect: Dialect) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:  # a wall-clock value, for a timestamp column without time zone
            return dialect.timestamp_ntz(value)
        return dialect.timestamp(value.astimezone(timezone.utc))
    if isinstance(value, date):
        return dialect.date(value)
    return dialect.string(str(value))
