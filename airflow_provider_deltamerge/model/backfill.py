"""Backfills: a long range cut into consecutive half-open windows, one load (or mapped task) each."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone, tzinfo
from typing import Any

from ..errors import ConfigError
from .incremental import coerce_bound, to_utc

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

    Bounds are ISO 8601 text, dates or datetimes (naive, aware, pendulum's) in any zone, compared as
    instants; the windows are tz-aware UTC datetimes, each starting where the one before ended. A step
    of whole days ('1 day', '2 weeks', timedelta(days=1)) is calendar days in the zone `start` is given
    in: every window starts at the same local time of day, so the day of a daylight saving change is
    23 or 25 hours long, as a daily schedule's is. Any other step ('6 hours', '90 minutes') is that much
    elapsed time. Naive datetimes and text without an offset are UTC, dates their midnight UTC.
    """
    step = parse_every(every)
    first = _backfill_bound("start", start)
    last = _backfill_bound("end", end)
    if last <= first:
        raise ConfigError("end", f"{end!r} must be after start {start!r}")
    bounds = (
        _calendar_days(first, _zone_of(start), step) if step % timedelta(days=1) == timedelta(0) else None
    )
    windows: list[tuple[datetime, datetime]] = []
    while first < last:
        following = first + step if bounds is None else next(bounds)
        windows.append((first, min(following, last)))
        first = windows[-1][1]
    return windows


def _zone_of(value: Any) -> tzinfo:
    """The zone a bound is given in: a datetime's own (pendulum's or zoneinfo's, or a fixed offset),
    else UTC."""
    return value.tzinfo if isinstance(value, datetime) and value.tzinfo is not None else timezone.utc


def _calendar_days(first: datetime, zone: tzinfo, step: timedelta) -> Iterator[datetime]:
    """The instants `step`, 2 * `step`, ... after `first` on the wall clock of `zone`: each counted from
    `first` (a wall time that does not exist, skipped by a change, is read before it, so it lands after
    the change), in UTC."""
    wall = first.astimezone(zone).replace(tzinfo=None)
    for count in itertools.count(1):
        local = wall + count * step
        yield to_utc(zone.localize(local) if hasattr(zone, "localize") else local.replace(tzinfo=zone))


def _backfill_bound(argument: str, value: Any) -> datetime:
    if isinstance(value, bool) or not isinstance(value, (str, datetime, date)):
        raise ConfigError(argument, f"{value!r} must be an ISO 8601 string, a datetime or a date")
    return coerce_bound(value, "timestamp", argument)
