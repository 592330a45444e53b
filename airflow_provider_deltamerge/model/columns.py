"""dlt's column schema (`columns=`): data types, precision, nullability and hints, parsed and checked (pure).

`columns` is a dict of column name -> hints, or a list of ``{"name": ..., <hints>}``. Every hint dlt
accepts in a column schema is parsed here; the key hints (primary_key, merge_key, hard_delete,
dedup_sort) feed `options.resolve_hints`, the data types the casts in `spark/casting.py`.

How each dlt type is stored (`storage_type`, Spark's type names; Delta uses the same ones):
text -> string, bigint -> bigint (tinyint/smallint/int by `precision` in bits), double -> double,
bool -> boolean, timestamp -> timestamp (UTC) or timestamp_ntz (`timezone: False`), date -> date,
time -> string 'HH:MM:SS[.ffffff]' (Delta has no time type), decimal -> decimal(p, s) (default 38, 9),
wei -> decimal(38, 0) (dlt's wei holds 256-bit integers; larger values are refused),
binary -> binary, json -> string holding the JSON text.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .checks import choice

DATA_TYPES = (
    "text",
    "bigint",
    "double",
    "bool",
    "timestamp",
    "date",
    "time",
    "decimal",
    "binary",
    "json",
    "wei",
)
KEY_HINTS = ("primary_key", "merge_key", "hard_delete", "dedup_sort")
# Accepted as dlt accepts them; only `partition` changes how the table is stored (see docs/SCHEMA.md).
TABLE_HINTS = ("unique", "partition", "cluster", "sort", "row_key", "parent_key", "root_key", "incremental")
# dlt's hints that describe a column and mean nothing to a Delta table: accepted, kept, unused.
INFO_HINTS = ("variant", "description")
EXTENSION_PREFIX = "x-"  # dlt's custom hints (`x-...`): accepted and kept, unused
TYPE_HINTS = ("data_type", "precision", "scale", "timezone", "nullable")
COLUMN_HINTS = ("name", *TYPE_HINTS, *KEY_HINTS, *TABLE_HINTS, *INFO_HINTS)
DEDUP_SORT_ORDERS = ("asc", "desc")
DEFAULT_DECIMAL = (38, 9)  # dlt's default precision and scale
MAX_DECIMAL_PRECISION = 38  # Delta's (and Spark's) widest decimal
TIMESTAMP_PRECISIONS = range(0, 7)  # digits of a second; Delta stores microseconds
_INTEGER_BITS = ((8, "tinyint"), (16, "smallint"), (32, "int"), (64, "bigint"))
_PLAIN_STORAGE = {
    "text": "string",
    "double": "double",
    "bool": "boolean",
    "date": "date",
    "time": "string",
    "binary": "binary",
    "json": "string",
    "wei": "decimal(38,0)",
}
# The dlt type of a stored (Spark) type name, for variant column names (`<column>__v_<type>`).
DLT_TYPE_OF_STORAGE = {
    "string": "text",
    "tinyint": "bigint",
    "smallint": "bigint",
    "int": "bigint",
    "bigint": "bigint",
    "float": "double",
    "double": "double",
    "boolean": "bool",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp",
    "date": "date",
    "binary": "binary",
}
VARIANT_SEPARATOR = "__v_"
# What the table keeps of a declaration for later loads: how the column is stored, not how a load uses it
# (key hints are not sticky).
STORED_HINTS = (*TYPE_HINTS, "partition")


@dataclass(frozen=True)
class ColumnSchema:
    """One column as declared: its dlt type and hints. None means "not said" (dlt's defaults apply)."""

    name: str
    data_type: str | None = None
    precision: int | None = None
    scale: int | None = None
    timezone: bool | None = None
    nullable: bool | None = None
    primary_key: bool | None = None
    merge_key: bool | None = None
    hard_delete: bool = False
    dedup_sort: str | None = None
    unique: bool | None = None
    partition: bool | None = None
    cluster: bool | None = None
    row_key: bool | None = None
    parent_key: bool | None = None
    root_key: bool | None = None
    sort: bool | None = None
    incremental: bool | None = None
    variant: bool | None = None
    description: str | None = None
    extensions: tuple[tuple[str, Any], ...] = ()  # `x-...` hints, as given

    def to_dict(self) -> dict[str, Any]:
        """The hints that were given, without the name (the canonical dict form's value)."""
        given = {
            k: v
            for k, v in dataclasses.asdict(self).items()
            if v is not None and k not in ("name", "extensions")
        }
        if not self.hard_delete:
            given.pop("hard_delete")
        return {**given, **dict(self.extensions)}

    @property
    def is_key(self) -> bool:
        return bool(self.primary_key or self.merge_key)

    @property
    def required(self) -> bool:
        """Whether NULL is refused and the Delta column is NOT NULL: `nullable: False`. Key columns refuse
        NULL whatever their hints (staging checks them), but stay nullable in Delta."""
        return self.nullable is False


def column_entries(columns: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, hints) pairs of the dict form or the list form, in order; names unique."""
    if columns is None:
        return []
    if isinstance(columns, dict):
        entries = []
        for name, hints in columns.items():
            if not isinstance(hints, dict):
                raise ConfigError(f"columns[{name!r}]", f"{hints!r} must be a dict of hints")
            if hints.get("name", name) != name:
                raise ConfigError(f"columns[{name!r}]", f"has the name {hints['name']!r}; give one name")
            entries.append((name, {k: v for k, v in hints.items() if k != "name"}))
        return entries
    if isinstance(columns, (list, tuple)):
        entries = []
        for position, hints in enumerate(columns):
            name = hints.get("name") if isinstance(hints, dict) else None
            if not isinstance(name, str) or not name:
                raise ConfigError(f"columns[{position}]", f"{hints!r} must be a dict with a non-empty 'name'")
            if any(name == seen for seen, _ in entries):
                raise ConfigError(f"columns[{position}]", f"column {name!r} is declared twice")
            entries.append((name, {k: v for k, v in hints.items() if k != "name"}))
        return entries
    raise ConfigError("columns", f"{columns!r} must be a dict of column -> hints or a list of columns")


def parse_column_schema(columns: Any) -> dict[str, ColumnSchema]:
    """The declared columns, each checked; at most one hard_delete and one dedup_sort column."""
    parsed = {name: parse_column(name, hints) for name, hints in column_entries(columns)}
    for hint in ("hard_delete", "dedup_sort"):
        holders = [n for n, c in parsed.items() if getattr(c, hint)]
        if len(holders) > 1:
            raise ConfigError("columns", f"at most one column may have {hint}; got {holders}")
    return parsed


def canonical_columns(columns: Any) -> dict[str, dict[str, Any]] | None:
    """The dict form of `columns` (what a request keeps and sends as JSON), or None when empty."""
    parsed = parse_column_schema(columns)
    return {name: column.to_dict() for name, column in parsed.items()} or None


def parse_column(name: str, hints: dict[str, Any]) -> ColumnSchema:
    where = f"columns[{name!r}]"
    extensions = tuple(
        (k, v) for k, v in hints.items() if isinstance(k, str) and k.startswith(EXTENSION_PREFIX)
    )
    hints = {k: v for k, v in hints.items() if (k, v) not in extensions}
    unknown = sorted(set(hints) - set(COLUMN_HINTS), key=str)
    if unknown:
        raise ConfigError(
            where,
            f"unknown hint(s) {unknown}; valid: {', '.join(COLUMN_HINTS[1:])} and custom hints "
            f"named {EXTENSION_PREFIX}...",
        )
    for flag in ("primary_key", "merge_key", "hard_delete", "timezone", "nullable", "variant", *TABLE_HINTS):
        if hints.get(flag) is not None and not isinstance(hints[flag], bool):
            meant = "; to keep one row per key by this column, use dedup_sort" if flag == "sort" else ""
            raise ConfigError(f"{where}.{flag}", f"must be true or false, got {hints[flag]!r}{meant}")
    if hints.get("description") is not None and not isinstance(hints["description"], str):
        raise ConfigError(f"{where}.description", f"must be text, got {hints['description']!r}")
    if hints.get("dedup_sort") is not None:
        choice(f"{where}.dedup_sort", hints["dedup_sort"], DEDUP_SORT_ORDERS)
    given = {k: v for k, v in hints.items() if v is not None}
    column = ColumnSchema(name, **given, extensions=extensions)
    _check_type(where, column)
    return column


def _check_type(where: str, column: ColumnSchema) -> None:
    data_type, precision, scale = column.data_type, column.precision, column.scale
    if data_type is None:
        if precision is not None or scale is not None or column.timezone is not None:
            raise ConfigError(where, "precision, scale and timezone need a data_type")
        return
    choice(f"{where}.data_type", data_type, DATA_TYPES)
    for hint, value in (("precision", precision), ("scale", scale)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ConfigError(f"{where}.{hint}", f"must be a whole number >= 0, got {value!r}")
    if scale is not None and data_type != "decimal":
        raise ConfigError(f"{where}.scale", f"applies to decimal only, not {data_type}")
    if column.timezone is not None and data_type != "timestamp":
        raise ConfigError(f"{where}.timezone", f"applies to timestamp only on Delta, not {data_type}")
    if precision is None:
        return
    if data_type == "decimal":
        _check_decimal(where, precision, scale)
    elif data_type == "bigint" and not 1 <= precision <= 64:
        raise ConfigError(f"{where}.precision", f"a bigint's precision is in bits, 1..64; got {precision}")
    elif data_type == "timestamp" and precision not in TIMESTAMP_PRECISIONS:
        raise ConfigError(
            f"{where}.precision",
            f"{precision} digits of a second cannot be stored: Delta keeps timestamps in microseconds, "
            "so precision is 0..6",
        )
    elif data_type not in ("decimal", "bigint", "timestamp", "text", "binary"):
        raise ConfigError(f"{where}.precision", f"does not apply to {data_type}")


def _check_decimal(where: str, precision: int, scale: int | None) -> None:
    if not 1 <= precision <= MAX_DECIMAL_PRECISION:
        raise ConfigError(f"{where}.precision", f"a decimal's precision is 1..38 on Delta; got {precision}")
    if scale is not None and scale > precision:
        raise ConfigError(f"{where}.scale", f"{scale} is larger than the precision {precision}")


def storage_type(column: ColumnSchema) -> str | None:
    """The Spark (and Delta) type name a declared column is stored as; None without a data_type."""
    data_type = column.data_type
    if data_type is None:
        return None
    if data_type == "bigint":
        bits = column.precision or 64
        return next(name for limit, name in _INTEGER_BITS if bits <= limit)
    if data_type == "decimal":
        precision = column.precision or DEFAULT_DECIMAL[0]
        scale = column.scale if column.scale is not None else min(DEFAULT_DECIMAL[1], precision)
        return f"decimal({precision},{scale})"
    if data_type == "timestamp":
        return "timestamp_ntz" if column.timezone is False else "timestamp"
    return _PLAIN_STORAGE[data_type]


def variant_name(column: str, dlt_type: str) -> str:
    """dlt's name of the variant column holding `column`'s values of another type."""
    return f"{column}{VARIANT_SEPARATOR}{dlt_type}"


def dlt_type_of(storage: str) -> str:
    """The dlt type of a stored type name (decimal(p,s) -> decimal; structs, arrays, maps -> json)."""
    if storage.startswith("decimal"):
        return "decimal"
    return DLT_TYPE_OF_STORAGE.get(storage, "json")


def merged_columns(
    stored: dict[str, dict[str, Any]] | None, given: dict[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]] | None:
    """The table's declared schema after this load: the stored one, with this load's columns over it."""
    merged = {name: _stored_part(hints) for name, hints in (stored or {}).items()}
    for name, hints in (given or {}).items():
        before = merged.get(name, {})
        if "data_type" in hints:  # a new type comes with its own precision, scale and timezone
            before = {
                k: v for k, v in before.items() if k not in ("data_type", "precision", "scale", "timezone")
            }
        merged[name] = {**before, **_stored_part(hints)}
    return {name: hints for name, hints in merged.items() if hints} or None


def _stored_part(hints: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in hints.items() if k in STORED_HINTS}
