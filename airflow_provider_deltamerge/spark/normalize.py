"""dlt's normaliser for Python rows (a list of dicts), pure: names, flattening, types and variant columns.

A list of dicts goes through this before it becomes a DataFrame (DataFrames are not normalised, as in
dlt, whose Arrow and pandas items skip the normaliser):
- names follow the naming convention; a nested dict is flattened into `<field>__<subfield>` columns
  (dlt's layout), while its level allows; a list stays a list (its rows go to a child table);
- nesting levels count down from `max_table_nesting` as in dlt: the row's fields sit at that level, a
  dict's fields one level down; a dict or list at level 0 (or declared `json`/`text`) is one value,
  stored as JSON text;
- each value is coerced on its own to its column's type: the declared type, else the table's column,
  else the type of the column's first value in the batch; a value that cannot be coerced goes to the
  variant column `<column>__v_<its type>`. Key columns and declared columns have no variants: where one
  of their values cannot be coerced, the column is passed on as text and the cast to the declared (or
  stored) type refuses the value, naming it;
- `layout="struct"` keeps dicts as they are (Spark structs), for tables that want structs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation
from typing import Any

from ..errors import ColumnNameError, SourceError
from ..model.arguments import NESTED_LAYOUTS
from ..model.columns import variant_name
from ..model.incremental import parse_instant
from ..model.naming import name_key

LAYOUTS = NESTED_LAYOUTS
SEPARATOR = "__"
UNLIMITED_NESTING = 1000  # dlt's default max_table_nesting
_AS_TEXT_TYPES = ("json", "text")  # a dict or list in a column declared so is one value
_NANOSECONDS = re.compile(r"[.,][0-9]{6}[0-9]*[1-9]")  # a fraction of a second past microseconds
_TRUE, _FALSE = ("true", "yes", "1", "on", "t", "y"), ("false", "no", "0", "off", "f", "n")


class JsonText(str):
    """A nested value stored as JSON text: text to Arrow, of dlt type `json`."""


def json_text(value: Any) -> JsonText:
    return JsonText(json.dumps(value, separators=(",", ":"), default=_json_default, ensure_ascii=False))


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


# dlt's type of each Python type, in the order they are tried (bool before int: a bool is an int;
# datetime before date: a datetime is a date)
_PYTHON_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    ((JsonText, dict, list, tuple), "json"),
    (bool, "bool"),
    (int, "bigint"),
    (float, "double"),
    (str, "text"),
    (datetime, "timestamp"),
    (date, "date"),
    (time, "time"),
    (Decimal, "decimal"),
    ((bytes, bytearray), "binary"),
)


_TYPE_OF: dict[type, str | None] = {}  # each Python type's dlt type, as found


def dlt_type(value: Any) -> str | None:
    """dlt's type of a Python value; None for a type it does not know (passed on as it is)."""
    kind = type(value)
    if kind not in _TYPE_OF:
        _TYPE_OF[kind] = next((name for types, name in _PYTHON_TYPES if isinstance(value, types)), None)
    return _TYPE_OF[kind]


def coerce(to_type: str, value: Any) -> Any:
    """`value` as dlt's type `to_type`, as dlt's normaliser coerces it; ValueError where it cannot be."""
    from_type = dlt_type(value)
    if from_type == to_type and to_type != "timestamp":
        return value
    coerce_to = _COERCIONS.get(to_type)
    if coerce_to is None:
        raise ValueError(f"no coercion to {to_type}")
    try:
        return coerce_to(value)
    except (TypeError, ValueError, ArithmeticError, InvalidOperation) as exc:
        raise ValueError(str(exc)) from None


def _to_text(value: Any) -> str:
    if isinstance(value, (dict, list, tuple)):
        return json_text(value)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray)):
        raise ValueError("binary is not text")
    return str(value)


def _to_bigint(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        return int(text[2:], 16) if text.lower().startswith("0x") else int(text)
    raise ValueError(f"{value!r} is not an integer")


def _to_double(value: Any) -> float:
    if isinstance(value, (int, Decimal)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        return float(value.strip())
    raise ValueError(f"{value!r} is not a number")


def _to_decimal(value: Any) -> Decimal:
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return Decimal(str(value).strip())
    raise ValueError(f"{value!r} is not a number")


def _to_bool(value: Any) -> bool:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
    elif isinstance(value, (int, float, Decimal)):
        return bool(value)
    raise ValueError(f"{value!r} is not a boolean")


def _to_timestamp(value: Any) -> datetime:
    if isinstance(value, bool) or not isinstance(value, (datetime, date, int, float, str)):
        raise ValueError(f"{value!r} is not a timestamp")
    if isinstance(value, str) and _NANOSECONDS.search(value):  # a datetime would drop them unsaid
        raise ValueError(f"{value!r} has digits of a second past microseconds")
    return parse_instant(value)  # naive values are UTC, as dlt reads them


def _to_date(value: Any) -> date:
    if isinstance(value, datetime):
        return parse_instant(value).date()
    if isinstance(value, str):
        text = value.strip()
        return date.fromisoformat(text) if len(text) == 10 else _to_timestamp(text).date()
    raise ValueError(f"{value!r} is not a date")


def _to_time(value: Any) -> str:
    if isinstance(value, time):
        return value.isoformat()
    if isinstance(value, str):
        return time.fromisoformat(value.strip()).isoformat()
    raise ValueError(f"{value!r} is not a time")


def _to_json(value: Any) -> Any:
    return value if isinstance(value, str) else json_text(value)


_COERCIONS: dict[str, Callable[[Any], Any]] = {
    "text": _to_text,
    "bigint": _to_bigint,
    "wei": lambda value: Decimal(_to_bigint(value)),
    "double": _to_double,
    "decimal": _to_decimal,
    "bool": _to_bool,
    "timestamp": _to_timestamp,
    "date": _to_date,
    "time": _to_time,
    "json": _to_json,
}


@dataclass(frozen=True)
class RowNormalizer:
    """What normalising one batch of rows needs to know: names are those stored (naming convention)."""

    normalize: Callable[[str], str]
    declared: dict[str, str | None]  # declared column -> its dlt data_type (None: declared untyped)
    existing: dict[str, str]  # the table's column -> its dlt type
    struct_columns: frozenset[str] = frozenset()  # the table's struct columns: dicts stay dicts there
    keys: frozenset[str] = frozenset()  # key columns: never a variant
    max_table_nesting: int | None = None
    layout: str = "flatten"
    table: str = ""  # the table's name, for errors

    def rows(self, rows: list[Any]) -> list[dict[str, Any]]:
        """The rows flattened and their values coerced; variant columns added where dlt adds them."""
        level = UNLIMITED_NESTING if self.max_table_nesting is None else self.max_table_nesting
        names: dict[tuple[str, Any], str] = {}  # (parent column or "", key) -> column, for this batch
        flat = []
        for position, row in enumerate(rows):
            if not isinstance(row, dict):
                raise SourceError(
                    f"row {position} is a {type(row).__name__}, not a dict; pass a list of dicts or a "
                    "DataFrame"
                )
            out: dict[str, Any] = {}
            self._flatten(row, level, "", out, names)
            flat.append(out)
        return self._typed(flat)

    def _flatten(self, row: dict, level: int, parent: str, out: dict[str, Any], names: dict) -> None:
        for key, value in row.items():
            name = names.get((parent, key)) or self._name(parent, key, names)
            if isinstance(value, (dict, list, tuple)):
                value = self._nested(name, value, level, out, names)
                if value is _FLATTENED:
                    continue
            out[name] = value

    def _name(self, parent: str, key: Any, names: dict) -> str:
        """The column of `key` in a dict flattened into `parent` (the row: ""); two keys may not share one,
        nor columns equal ignoring case (Spark and Delta take names so)."""
        fragment = self.normalize(str(key))
        name = f"{parent}{SEPARATOR}{fragment}" if parent else fragment
        clash = next(
            (
                (k, n)
                for (p, k), n in names.items()
                if name_key(n) == name_key(name) and (p, k) != (parent, key)
            ),
            None,
        )
        if clash is not None:
            raise ColumnNameError(self.table, (str(clash[0]), str(key)), "of the batch", (clash[1], name))
        names[(parent, key)] = name
        return name

    def _nested(self, name: str, value: Any, level: int, out: dict[str, Any], names: dict) -> Any:
        if level <= 0 or self.declared.get(name) in _AS_TEXT_TYPES:
            return json_text(value)
        if isinstance(value, dict) and self.layout == "flatten" and name not in self.struct_columns:
            self._flatten(value, level - 1, name, out, names)
            return _FLATTENED
        if isinstance(value, dict) or self.max_table_nesting is None:
            return list(value) if isinstance(value, tuple) else value
        return [_within(element, level - 1) for element in value]  # a child table's rows, a level down

    def _typed(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        columns: dict[str, None] = {}
        for row in rows:
            columns.update(dict.fromkeys(row))
        for name in columns:
            self._type_column(rows, name)
        return rows

    def _type_column(self, rows: list[dict[str, Any]], name: str) -> None:
        declared = self.declared.get(name)
        target = declared or self.existing.get(name)
        seen = {dlt_type(row[name]) for row in rows if row.get(name) is not None}
        if len(seen) <= 1 and (target is None or declared) or name in self.struct_columns:
            return  # one type: a declared column's cast (spark/casting.py) checks every value
        if target is None:
            target = next(dlt_type(row[name]) for row in rows if row.get(name) is not None)
        if seen == {target} and (target != "timestamp" or not _mixes_time_zones(rows, name)):
            return
        fixed = name in self.declared or name in self.keys
        coerced = []
        for row in rows:
            value = row.get(name)
            if value is None or target is None:
                coerced.append(value)
                continue
            try:
                coerced.append(coerce(target, value))
            except ValueError:
                if fixed:  # the cast to (or alignment with) the column's type refuses it, naming it
                    if len(seen) > 1:  # one type for Arrow: the values' text
                        _as_text(rows, name)
                    return
                coerced.append(_VARIANT)
        for row, value in zip(rows, coerced, strict=True):
            if value is _VARIANT:
                original = row.pop(name)
                row[variant_name(name, dlt_type(original) or "text")] = original
            elif name in row:
                row[name] = value


def _within(value: Any, level: int) -> Any:
    """A child row's value at `level`: its fields' nested values below level 1 as JSON text."""
    if isinstance(value, dict):
        return {key: _field(field, level) for key, field in value.items()}
    return _field(value, level)  # a list in a list: the row {"list": value}, at this level


def _field(value: Any, level: int) -> Any:
    """A field's value at `level`: nested values JSON text at level 0, dicts flattened a level down,
    lists a child table whose rows sit a level down."""
    if not isinstance(value, (dict, list, tuple)):
        return value
    if level <= 0:
        return json_text(value)
    if isinstance(value, dict):
        return {key: _field(field, level - 1) for key, field in value.items()}
    return [_within(element, level - 1) for element in value]


def _mixes_time_zones(rows: list[dict[str, Any]], name: str) -> bool:
    """Whether a column of datetimes has naive and aware ones (Arrow takes one kind per column)."""
    aware = {row[name].tzinfo is not None for row in rows if row.get(name) is not None}
    return len(aware) > 1


def _as_text(rows: list[dict[str, Any]], name: str) -> None:
    for row in rows:
        if row.get(name) is not None:
            value = row[name]
            row[name] = value.hex() if isinstance(value, (bytes, bytearray)) else _to_text(value)


_FLATTENED = object()
_VARIANT = object()
