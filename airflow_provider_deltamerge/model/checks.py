"""Argument checks every spec shares (pure): a choice among listed values, a key of column names."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError


def choice(argument: str, value: Any, allowed: tuple[str, ...]) -> str:
    """Return value if it is one of allowed, else raise a ConfigError listing the valid values."""
    if value not in allowed:
        raise ConfigError(argument, f"{value!r} is not valid; use one of {', '.join(map(repr, allowed))}")
    return value


def key_tuple(argument: str, value: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """A key hint as a tuple of column names: one name, a list of names, or None for no key."""
    if value is None:
        return ()
    if not isinstance(value, (str, list, tuple)):
        raise ConfigError(argument, f"{value!r} is not a column name or a list of column names")
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(n, str) and n for n in names):
        raise ConfigError(argument, f"{value!r} is not a column name or a list of column names")
    if len(set(names)) != len(names):
        raise ConfigError(argument, f"{list(names)} names a column twice")
    return names
