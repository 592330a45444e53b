"""`Incremental`: the cursor column, its bounds and how boundary rows are deduplicated (pure).

Also the value helpers every incremental step shares: the one parser of instants (`parse_instant`),
coercing a bound to the cursor column's type (`coerce_bound`) and JSON-safe values.
No Spark, no Airflow, no I/O.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

from ..errors import ConfigError
from .checks import choice, key_tuple

LAST_VALUE_FUNCS = ("max", "min")
RANGE_BOUNDS = ("closed", "open")
ON_CURSOR_VALUE_MISSING = ("raise", "include", "exclude")
# The cursor column's Spark type, as the caller maps it (see cursor.spark_cursor_type).
CURSOR_TYPES = ("timestamp", "timestamp_ntz", "date", "int", "float", "string")

Bound = str | int | float | datetime | date
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_INTEGER = re.compile(r"^[+-]?\d+$")


@dataclass(frozen=True)
class Incremental:
    """Load only rows whose cursor lies after the last loaded value (dlt's `dlt.sources.incremental`).

    `end_value` makes a fixed, stateless range [initial_value, end_value) (INC-5). `primary_key=()`
    turns boundary dedup off; None falls back to the table's primary key, then to the whole row.
    `lag` re-loads that much before the last value: seconds for timestamps and ISO timestamp strings,
    days for dates and ISO date strings, plain units for numbers (INC-11).
    """

    cursor_path: str
    initial_value: Bound | None = None
    end_value: Bound | None = None
    last_value_func: str = "max"
    range_start: str = "closed"
    range_end: str = "open"
    primary_key: tuple[str, ...] | None = None
    lag: float | None = None
    on_cursor_value_missing: str = "raise"
    allow_external_schedulers: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.cursor_path, str) or not all(self.cursor_path.split(".")):
            raise ConfigError(
                "cursor_path", f"{self.cursor_path!r} must be a column name or a dotted path a.b.c"
            )
        choice("last_value_func", self.last_value_func, LAST_VALUE_FUNCS)
        choice("range_start", self.range_start, RANGE_BOUNDS)
        choice("range_end", self.range_end, RANGE_BOUNDS)
        choice("on_cursor_value_missing", self.on_cursor_value_missing, ON_CURSOR_VALUE_MISSING)
        if not isinstance(self.allow_external_schedulers, bool):
            raise ConfigError(
                "allow_external_schedulers", f"must be true or false, got {self.allow_external_schedulers!r}"
            )
        if self.primary_key is not None:
            object.__setattr__(self, "primary_key", key_tuple("primary_key", self.primary_key))
        if self.lag is not None and (
            isinstance(self.lag, bool) or not isinstance(self.lag, (int, float)) or self.lag < 0
        ):
            raise ConfigError(
                "lag", f"{self.lag!r} must be a number >= 0 (seconds, days or units of the cursor)"
            )
        for argument in ("initial_value", "end_value"):
            _check_bound_kind(argument, getattr(self, argument))
        if self.end_value is not None:
            self._check_end_value()

    def _check_end_value(self) -> None:
        if self.initial_value is None:
            raise ConfigError(
                "end_value",
                "needs initial_value: a range load runs from initial_value to end_value; set both",
            )
        initial, end = _comparable("end_value", self.initial_value, self.end_value)
        ordered = end > initial if self.last_value_func == "max" else end < initial
        single_point = end == initial and self.range_start == self.range_end == "closed"
        if not (ordered or single_point):
            direction = "later" if self.last_value_func == "max" else "earlier"
            raise ConfigError(
                "end_value",
                f"{self.end_value!r} must be {direction} than initial_value {self.initial_value!r} with "
                f"last_value_func={self.last_value_func!r}; the range would be empty or reversed",
            )

    @property
    def has_lag(self) -> bool:
        return bool(self.lag)

    @property
    def records_boundary_hashes(self) -> bool:
        """Whether loads keep hashes of the rows at the last value, for a later run's boundary dedup."""
        return self.primary_key != () and self.range_start == "closed" and not self.has_lag

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe; datetimes and dates are tagged so that from_dict restores them exactly."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["initial_value"] = _tagged(self.initial_value)
        out["end_value"] = _tagged(self.end_value)
        out["primary_key"] = None if self.primary_key is None else list(self.primary_key)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Incremental:
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError("incremental", f"unknown key(s) {unknown}; valid: {', '.join(known)}")
        if "cursor_path" not in data:
            raise ConfigError("incremental", "cursor_path is required: the column that orders the rows")
        values = dict(data)
        for argument in ("initial_value", "end_value"):
            values[argument] = _untagged(argument, values.get(argument))
        return cls(**values)


def cursor_state(stored_state: dict[str, Any] | None, cursor_path: str) -> dict[str, Any]:
    """The stored entry of one cursor: {initial_value, last_value, unique_hashes, start_value} or {}."""
    return dict(((stored_state or {}).get("incremental") or {}).get(cursor_path) or {})


def _check_bound_kind(argument: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (str, int, float, datetime, date)):
        raise ConfigError(
            argument,
            f"{value!r} is a {type(value).__name__}; use an ISO 8601 string, a number, a datetime or a date",
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(
            argument,
            f"{value!r} is not a finite number, and no cursor value compares with it; give a real bound",
        )


def _comparable(argument: str, first: Bound, second: Bound) -> tuple[Any, Any]:
    """Both values in one comparable form: numbers, UTC datetimes, or plain text."""
    kinds = (_kind(first), _kind(second))
    if kinds[0] == kinds[1]:
        return _order_key(first), _order_key(second)
    if set(kinds) == {"number", "time"}:
        return coerce_bound(first, "float", argument), coerce_bound(second, "float", argument)
    raise ConfigError(
        argument, f"{second!r} cannot be compared with {first!r}; give both as the same kind of value"
    )


def _kind(value: Bound) -> str:
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, (datetime, date)) or parse_iso(value) is not None:
        return "time"
    return "text"


def _order_key(value: Bound) -> Any:
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        parsed = parse_iso(value)
        return value if parsed is None else to_utc(parsed)
    return to_utc(value)


# -- values -----------------------------------------------------------------------------------------


def parse_iso(text: str) -> datetime | date | None:
    """An ISO 8601 date ('2024-01-31') as a date, a timestamp as a datetime; None if it is neither."""
    text = text.strip()
    if _DATE_ONLY.match(text):
        try:
            return date.fromisoformat(text)
        except ValueError:
            return None
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def to_utc(value: datetime | date) -> datetime:
    """A tz-aware UTC datetime; naive datetimes are read as UTC, dates as their midnight UTC (INC-13).

    Always a plain ``datetime``: a subclass (pendulum's) in UTC drops its zone in arithmetic
    (``pendulum_utc + timedelta`` is naive), and a naive bound then fails every comparison."""
    if not isinstance(value, datetime):
        return datetime.combine(value, time(), tzinfo=timezone.utc)
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return datetime(*value.timetuple()[:6], value.microsecond, tzinfo=timezone.utc)


def json_safe(value: Bound | None) -> str | int | float | None:
    """Datetimes and dates as ISO strings, everything else as is (the cursor type says how to read it)."""
    return value.isoformat() if isinstance(value, (datetime, date)) else value


def _tagged(value: Bound | None) -> Any:
    if isinstance(value, datetime):
        return {"type": "datetime", "value": value.isoformat()}
    if isinstance(value, date):
        return {"type": "date", "value": value.isoformat()}
    return value


def _untagged(argument: str, value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    kind, text = value.get("type"), value.get("value")
    if kind not in ("datetime", "date") or not isinstance(text, str):
        raise ConfigError(
            argument, f"{value!r} must be a plain value or {{'type': 'datetime'|'date', 'value': ISO}}"
        )
    try:
        return datetime.fromisoformat(text) if kind == "datetime" else date.fromisoformat(text)
    except ValueError:
        raise ConfigError(argument, f"{text!r} is not an ISO 8601 {kind}") from None


def coerce_bound(value: Bound | None, cursor_type: str, argument: str) -> Bound | None:
    """`value` as a bound for a cursor column of `cursor_type`, or a ConfigError naming both.

    timestamp -> tz-aware UTC datetime; timestamp_ntz -> naive datetime (UTC wall clock); date -> date
    (timestamps truncated to their UTC date); int -> epoch seconds, rounded up (exact for a closed start
    and an open end); float -> epoch seconds; string -> the string as given, datetimes as ISO 8601 UTC.
    """
    choice("cursor_type", cursor_type, CURSOR_TYPES)
    if value is None:
        return None
    _check_bound_kind(argument, value)
    try:
        return _COERCE[cursor_type](value)
    except (ValueError, OverflowError, OSError) as reason:
        raise ConfigError(
            argument, f"{value!r} cannot bound a cursor column of type {cursor_type}: {reason}"
        ) from None


def parse_instant(value: Bound) -> datetime:
    """The one parser of instants: a datetime, a date, epoch seconds or ISO 8601 text as an aware UTC
    datetime (naive values are UTC, dates their midnight UTC). ValueError says why a value is none."""
    if isinstance(value, (datetime, date)):
        return to_utc(value)
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, timezone.utc)
    parsed = parse_iso(value) if isinstance(value, str) else None
    if parsed is None:
        raise ValueError("it is not an ISO 8601 date or timestamp")
    return to_utc(parsed)


def _as_date(value: Bound) -> date:
    if isinstance(value, str) and _DATE_ONLY.match(value.strip()):
        parsed = parse_iso(value)
        if parsed is None:
            raise ValueError("it is not a valid calendar date")
        return parsed
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    return parse_instant(value).date()


def _as_epoch_int(value: Bound) -> int:
    if isinstance(value, str) and _INTEGER.match(value.strip()):
        return int(value)
    if isinstance(value, (int, float)):
        return int(value) if float(value).is_integer() else int(value // 1) + 1
    delta = parse_instant(value) - EPOCH
    return delta.days * 86400 + delta.seconds + (1 if delta.microseconds else 0)


def _as_epoch_float(value: Bound) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    return (parse_instant(value) - EPOCH) / timedelta(seconds=1)


def _as_text(value: Bound) -> str:
    """An ISO string that orders like the instant among the cursor's own ISO strings.

    A midnight UTC instant becomes the bare date: '2024-01-07' sorts before every text of that day
    ('2024-01-07', '2024-01-07T05:00:00Z', '2024-01-07 05:00') and after every text of the day before,
    so daily and weekly windows split date strings ("ds") and timestamp strings at the right day.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        instant = to_utc(value)
        return instant.date().isoformat() if instant.time() == time() else instant.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    raise ValueError("a number does not compare with text; give the bound as a string")


_COERCE = {
    "timestamp": parse_instant,
    "timestamp_ntz": lambda value: parse_instant(value).replace(tzinfo=None),
    "date": _as_date,
    "int": _as_epoch_int,
    "float": _as_epoch_float,
    "string": _as_text,
}


def as_incremental(value: Incremental | dict | None) -> Incremental | None:
    """An Incremental, from itself or its to_dict() form; None stays None."""
    if value is None or isinstance(value, Incremental):
        return value
    if isinstance(value, dict):
        return Incremental.from_dict(value)
    raise ConfigError("incremental", f"{value!r} must be an Incremental or its to_dict() form")


def parse_incremental(
    value: Incremental | dict | None, normalize: Callable[[str], str]
) -> Incremental | None:
    """The incremental with its cursor path's first segment in the table's naming convention."""
    value = as_incremental(value)
    if value is None:
        return None
    first, *rest = value.cursor_path.split(".")
    path = ".".join([normalize(first), *rest])
    primary_key = value.primary_key
    if primary_key:
        primary_key = tuple(normalize(c) for c in primary_key)
    return dataclasses.replace(value, cursor_path=path, primary_key=primary_key)
