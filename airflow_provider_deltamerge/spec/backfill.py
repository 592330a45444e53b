"""Backfills: a long range cut into consecutive half-open windows, one load (or mapped task) each."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any

from ..errors import ConfigError
from .incremental import coerce_bound

_EVERY = re.compile(r"^\s*(\d+)\s*(minute|hour|day|week)s?\s*$", re.IGNORECASE)


def parse_every(every: str | timedelta) -> timedelta:
    """'7 days', '1 week', '6 hours', '30 minutes' or a positive timedelta."""
    if isinstance(every, timedelta):
        step = every
    else:
        match = _EVERY.match(every) if isinstance(every, str) else None
        if match is None:
            raise ConfigError("every", f"{every!r} must be 'N minutes|hours|days|weeks' or a timedelta")
        step = timedelta(**{match.group(2).lower() + "s": int(match.group(1))})
    if step <= timedelta(0):
        raise ConfigError("every", f"{every!r} must be longer than zero")
    return step


def backfill_windows(
    start: str | datetime | date, end: str | datetime | date, every: str | timedelta = "7 days"
) -> list[tuple[datetime, datetime]]:
    """Consecutive half-open windows [a, b) of length `every` covering [start, end); the last is clipped.

    Bounds are returned as tz-aware UTC datetimes (naive input is read as UTC, dates as midnight UTC).
    """
    step = parse_every(every)
    first = _backfill_bound("start", start)
    last = _backfill_bound("end", end)
    if last <= first:
        raise ConfigError("end", f"{end!r} must be after start {start!r}")
    windows = []
    while first < last:
        windows.append((first, min(first + step, last)))
        first = windows[-1][1]
    return windows


def _backfill_bound(argument: str, value: Any) -> datetime:
    if isinstance(value, bool) or not isinstance(value, (str, datetime, date)):
        raise ConfigError(argument, f"{value!r} must be an ISO 8601 string, a datetime or a date")
    return coerce_bound(value, "timestamp", argument)
