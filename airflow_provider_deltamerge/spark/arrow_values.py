"""A batch's values as Arrow holds them exactly, or refused naming the column (Python rows and pandas).

Arrow types Python values from the values themselves; Delta (and Spark) then have narrower types:
- decimals: Delta's widest holds 38 digits. A column declared decimal (or wei) is built in its declared
  type, which takes every value that fits it exactly and no other (Arrow never rounds); an undeclared
  column whose values need more than 38 digits together, a NaN or an infinity is refused;
- integers beyond bigint's range have no integer type: refused (declare the column decimal or text);
- timestamps: Delta stores microseconds. Nanoseconds a value holds are dropped with a
  TruncationWarning, and refused in the columns whose values tell rows apart (keys, sequence, cursor),
  where dropping them could make two values one.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CastError, TruncationWarning

MAX_DIGITS = 38  # Delta's (and Spark's) widest decimal


def column_array(
    name: str,
    values: list[Any],
    declared: pa.DataType | None,
    row_key: Callable[[int], dict],
    exact: bool = False,
) -> pa.Array:
    """`values` of column `name` as one Arrow array: in the `declared` decimal type where every value is a
    number Arrow can hold as it (else as inferred), exactly; CastError where a value cannot be held so.
    `row_key(i)` names the row of value i; `exact`: nanoseconds (pandas Timestamps) refused, not dropped."""
    if declared is not None and all(_exact_number(v) for v in values):
        try:
            return pa.array(values, type=declared)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            position = next(i for i, v in enumerate(values) if not _fits(v, declared))
            stored = f"decimal({declared.precision},{declared.scale})"
            raise CastError(name, values[position], stored, row_key(position)) from None
    try:
        array = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        _refuse_number(name, values, row_key)
        raise
    if pa.types.is_decimal(array.type) and array.type.precision > MAX_DIGITS:
        _refuse_wide_decimals(name, values, array.type, row_key)
    if pa.types.is_timestamp(array.type):  # Arrow takes a pandas Timestamp's microseconds only
        nanos = next((i for i, v in enumerate(values) if getattr(v, "nanosecond", 0)), None)
        if nanos is not None:
            _dropped(name, values[nanos], row_key(nanos), exact)
    return array


def in_micros(table: pa.Table, exact: Callable[[str], bool]) -> pa.Table:
    """`table` with its timestamps in microseconds, naive ones read as UTC; a timestamp with nanoseconds
    warned of, or refused in a column where `exact(name)`."""
    fields = []
    for position, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type):
            if field.type.unit == "ns":
                _check_nanoseconds(field.name, table.column(position), exact(field.name))
            field = field.with_type(pa.timestamp("us", tz=field.type.tz or "UTC"))
        fields.append(field)
    return table.cast(pa.schema(fields), safe=False)


def _check_nanoseconds(name: str, column: pa.ChunkedArray, exact: bool) -> None:
    nanos = column.cast(pa.int64())
    lost = pc.not_equal(pc.subtract(nanos, pc.multiply(pc.divide(nanos, 1000), 1000)), 0)
    if not pc.any(lost).as_py():
        return
    position = pc.index(lost, True).as_py()
    _dropped(name, column[position].as_py(), {"row": position}, exact)


def _dropped(name: str, value: Any, row: dict, exact: bool) -> None:
    if exact:
        raise CastError(
            name,
            value,
            "timestamp",
            row,
            problem=f"the value {value!r} of the row {row} has nanoseconds, and Delta stores microseconds; "
            "in a key, sequence_by or cursor column dropping them could make two values one, so they are "
            "not dropped silently. Round the column to microseconds in the source "
            "(pandas: .dt.floor('us'))",
        )
    warnings.warn(
        f"column {name!r} holds nanoseconds (e.g. {value!r} of the row {row}); Delta stores microseconds, "
        "so they are dropped",
        TruncationWarning,
        stacklevel=2,
    )


def _exact_number(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, Decimal)
        or (isinstance(value, int) and not isinstance(value, bool))
    )


def _fits(value: Any, declared: pa.DataType) -> bool:
    try:
        pa.array([value], type=declared)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return False
    return True


def _refuse_number(name: str, values: list[Any], row_key) -> None:
    """A CastError for the first number no Arrow type holds (an int beyond 64 bits, a decimal NaN or
    infinity); nothing where the failure is another's (mixed types: the caller's error)."""
    for position, value in enumerate(values):
        if isinstance(value, Decimal) and not value.is_finite():
            problem = f"the value {value!r} of the row {row_key(position)} is not a finite number, and "
            raise CastError(name, value, "decimal", row_key(position), problem + "Delta's decimals hold none")
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            raise CastError(
                name,
                value,
                "bigint",
                row_key(position),
                problem=f"the value {value!r} of the row {row_key(position)} is beyond bigint's range "
                f"(-2**63 to 2**63-1); declare the column decimal (up to {MAX_DIGITS} digits) or text",
            )


def _refuse_wide_decimals(name: str, values: list[Any], inferred: pa.DataType, row_key) -> None:
    """Undeclared decimals that need more than 38 digits together: named, with the widest value."""
    numbers = [(i, v) for i, v in enumerate(values) if isinstance(v, Decimal)]
    widest, value = max(numbers, key=lambda item: _integer_digits(item[1]))
    finest = max(numbers, key=lambda item: -item[1].as_tuple().exponent)[1]
    beside = f" beside {finest!r}" if finest != value else ""
    raise CastError(
        name,
        value,
        "decimal",
        row_key(widest),
        problem=f"its values need decimal({inferred.precision},{inferred.scale}) together (e.g. {value!r} "
        f"of the row {row_key(widest)}{beside}), and Delta's widest decimal holds {MAX_DIGITS} digits. "
        "Declare the column's precision and scale (columns={"
        f"{name!r}: {{'data_type': 'decimal', 'precision': 38, 'scale': ...}}}}: a value with more "
        "fraction digits than the scale is then refused, never rounded), or declare it text or double",
    )


def _integer_digits(value: Decimal) -> int:
    sign, digits, exponent = value.as_tuple()
    return len(digits) + int(exponent)
