"""The scd2 merge strategy's options, and their validation (pure).

Every option is checked up front, before anything is read, with a ConfigError naming the option;
column names go through the naming convention. `plan.scd2` turns the validated options into settings
and the plan of a load.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from ..errors import ConfigError
from .incremental import parse_instant
from .naming import HELPER_PREFIX, LOAD_ID

SCD2_OPTIONS = (
    "validity_column_names",
    "active_record_timestamp",
    "boundary_timestamp",
    "row_version_column_name",
    "boundary_column",
    "active_column_name",
)
TIMESTAMP_EXAMPLES = "e.g. '9999-12-31' or '2024-04-09T18:27:53Z'"


@dataclass(frozen=True)
class Scd2Options:
    """Options of the scd2 merge strategy (validated in full by the scd2 planner)."""

    validity_column_names: tuple[str, str] = ("_dlt_valid_from", "_dlt_valid_to")
    active_record_timestamp: str | None = None
    boundary_timestamp: str | None = None
    row_version_column_name: str | None = None
    boundary_column: str | None = None
    active_column_name: str | None = None

    @classmethod
    def from_dict(cls, options: dict[str, Any]) -> Scd2Options:
        unknown = sorted(set(options) - set(SCD2_OPTIONS))
        if unknown:
            raise ConfigError(
                "write_disposition", f"unknown scd2 option(s) {unknown}; valid: {', '.join(SCD2_OPTIONS)}"
            )
        values = {k: v for k, v in options.items() if v is not None}
        names = values.get("validity_column_names")
        if names is not None:
            if isinstance(names, str) or len(names) != 2 or not all(isinstance(n, str) and n for n in names):
                raise ConfigError(
                    "validity_column_names", f"{names!r} must be a list of two column names (from, to)"
                )
            if names[0] == names[1]:
                raise ConfigError("validity_column_names", f"{list(names)} names the same column twice")
            values["validity_column_names"] = tuple(names)
        for key in ("active_record_timestamp", "boundary_timestamp"):
            if key in values:
                values[key] = str(values[key])
        return cls(**values)


def parse_timestamp(option: str, value: str | datetime | date | None) -> datetime | None:
    """A date or ISO 8601 timestamp as an aware UTC datetime; naive values and dates are UTC."""
    if value is None:
        return None
    try:
        return parse_instant(value if isinstance(value, (datetime, date)) else str(value).strip())
    except ValueError:
        raise ConfigError(
            option, f"{value!r} is not a date or an ISO 8601 timestamp; give one, {TIMESTAMP_EXAMPLES}"
        ) from None
    except OverflowError:
        raise ConfigError(option, f"{value!r} is out of range once converted to UTC") from None


def validate_options(
    options: Scd2Options, merge_key: tuple[str, ...], normalize: Callable[[str], str]
) -> Scd2Options:
    """Check every scd2 option up front (ConfigError naming the option); names go through `normalize`.

    Timestamps come back as ISO 8601 UTC strings, so the options stay JSON-serialisable.
    """
    names = {
        option: _column_name(option, getattr(options, option), normalize)
        for option in ("row_version_column_name", "boundary_column", "active_column_name")
    }
    valid_from, valid_to = (
        _column_name("validity_column_names", n, normalize) for n in options.validity_column_names
    )
    if valid_from == valid_to:
        raise ConfigError(
            "validity_column_names",
            f"{list(options.validity_column_names)} both become {valid_from!r}; give two different names",
        )
    _check_no_clashes(valid_from, valid_to, names, merge_key)
    marker = parse_timestamp("active_record_timestamp", options.active_record_timestamp)
    boundary = parse_timestamp("boundary_timestamp", options.boundary_timestamp)
    if boundary is not None and names["boundary_column"]:
        raise ConfigError(
            "boundary_column",
            "cannot be combined with boundary_timestamp: the boundary comes either from a fixed time or from "
            "a column of the data; remove one of them",
        )
    if boundary is not None and boundary == marker:
        raise ConfigError(
            "boundary_timestamp",
            f"equals active_record_timestamp ({marker.isoformat()}), so retired rows would look active; "
            "use a boundary before the active marker",
        )
    if names["boundary_column"] and not merge_key:
        raise ConfigError(
            "boundary_column",
            "needs a merge_key: the merge key links a new version to the version it replaces, which is "
            "retired at the new version's boundary value. Set merge_key to the natural key "
            "(or a partition column)",
        )
    return Scd2Options(
        validity_column_names=(valid_from, valid_to),
        active_record_timestamp=marker.isoformat() if marker else None,
        boundary_timestamp=boundary.isoformat() if boundary else None,
        **names,
    )


def _column_name(option: str, value, normalize: Callable[[str], str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(option, f"{value!r} must be a column name")
    name = normalize(value)
    if name.startswith(HELPER_PREFIX):
        raise ConfigError(
            option, f"{name!r} starts with {HELPER_PREFIX!r}, which is reserved for helper columns"
        )
    return name


def _check_no_clashes(
    valid_from: str, valid_to: str, names: dict[str, str | None], merge_key: tuple[str, ...]
) -> None:
    """A validity column or the active flag may not double as another column scd2 reads or writes."""
    written = {valid_from: "validity_column_names", valid_to: "validity_column_names"}
    if names["active_column_name"]:
        if names["active_column_name"] in written:
            raise ConfigError(
                "active_column_name", f"{names['active_column_name']!r} is also a validity column"
            )
        written[names["active_column_name"]] = "active_column_name"
    read = [
        ("row_version_column_name", names["row_version_column_name"]),
        ("boundary_column", names["boundary_column"]),
    ]
    read += [("merge_key", column) for column in merge_key]
    for option, column in read:
        if column in written:
            raise ConfigError(
                option,
                f"{column!r} is also the {written[column]} column, which scd2 writes; choose another column",
            )
    if names["row_version_column_name"] == LOAD_ID:
        raise ConfigError("row_version_column_name", f"'{LOAD_ID}' is the load id, not a row version")
