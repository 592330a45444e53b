"""Names (pure): naming conventions, dlt's system columns, our helper columns, table locations.

`snake_case` follows dlt's default convention, so a key given in source spelling ("TxId") matches the
stored column (`tx_id`), and tables look the same as when dlt loads them. `direct` keeps names as given.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from ..errors import ConfigError
from .checks import choice

NAMINGS = ("snake_case", "direct")
LOAD_ID = "_dlt_load_id"  # the load that wrote the row
ROW_ID = "_dlt_id"  # unique row id; scd2 keeps the row version hash in it
SYSTEM_PREFIX = "_dlt"  # dlt's system columns and tables
HELPER_PREFIX = "__"  # columns that exist only while a load is staged and never reach a table

_REDUCE_ALPHABET = str.maketrans("+-*@|", "x_xal")
_NON_ALPHANUMERIC = re.compile(r"[^a-zA-Z\d_]+")
_BREAK_BEFORE_WORD = re.compile(r"([^_])([A-Z][a-z]+)")
_BREAK_LOWER_UPPER = re.compile(r"([a-z0-9])([A-Z])")
_LEADING_DIGITS = re.compile(r"^\d+")
_UNDERSCORE_RUNS = re.compile(r"__+")


@lru_cache(maxsize=4096)
def snake_case(identifier: str) -> str:
    """dlt's snake_case: 'CamelCase' -> 'camel_case', 'Zip-Code' -> 'zip_code', '1st' -> '_1st'."""
    name = identifier.strip()
    if not name:
        raise ConfigError("name", f"{identifier!r} is empty after stripping white space")
    name = _NON_ALPHANUMERIC.sub("_", name.translate(_REDUCE_ALPHABET))
    name = _BREAK_BEFORE_WORD.sub(r"\1_\2", name)
    name = _BREAK_LOWER_UPPER.sub(r"\1_\2", name).lower()
    if _LEADING_DIGITS.match(name):
        name = "_" + name
    stripped = name.rstrip("_")
    name = stripped + "x" * (len(name) - len(stripped))
    return _UNDERSCORE_RUNS.sub("_", name)


def direct(identifier: str) -> str:
    if not identifier:
        raise ConfigError("name", "an empty name cannot be used as a column or table name")
    return identifier


def naming_convention(name: str) -> Callable[[str], str]:
    """The function that normalises identifiers for the named convention."""
    choice("naming", name, NAMINGS)
    return snake_case if name == "snake_case" else direct


def normalize_columns(columns: list[str], normalize: Callable[[str], str]) -> dict[str, str]:
    """Map each source column to its stored name; two source columns may not share a stored name."""
    mapping: dict[str, str] = {}
    seen: dict[str, str] = {}
    for column in columns:
        stored = normalize(column)
        if stored in seen:
            raise ConfigError(
                "naming",
                f"columns {seen[stored]!r} and {column!r} both become {stored!r}; rename one in the source "
                "or use naming='direct'",
            )
        seen[stored] = column
        mapping[column] = stored
    return mapping


def table_path(dataset: str, name: str) -> str:
    """Where a table (already named by the convention) lives: ``<dataset>/<name>``."""
    return dataset.rstrip("/") + "/" + name


def table_uri(dataset: str, table_name: str, naming: str = "snake_case") -> str:
    """The URI of a table as stored: ``<dataset>/<normalized table_name>``, ``file://`` for local paths."""
    base = dataset.rstrip("/")
    if "://" not in base:
        base = f"file://{base}"
    return f"{base}/{naming_convention(naming)(table_name)}"
