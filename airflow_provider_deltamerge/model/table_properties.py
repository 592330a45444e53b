"""Delta table properties a load asks for (`table_properties=`): checked, in canonical text form, and
the rules that keep them compatible with loading.

A table gets them when the load creates it; on an existing table the ones whose value differs are set
by a metadata commit before the load's own. Properties the load does not name are left as they are.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import ConfigError

ARGUMENT = "table_properties"
APPEND_ONLY = "delta.appendOnly"
_DURATION = re.compile(r"^interval\s+(\d+)\s+(second|minute|hour|day|week)s?$", re.IGNORECASE)
_UNIT_HOURS = {"second": 1 / 3600, "minute": 1 / 60, "hour": 1, "day": 24, "week": 168}
_BOOLEAN = ("true", "false")
# The longest duration and the largest integer a property may hold: Delta reads integer properties as
# 32-bit integers, and delta-rs turns a retention into a time span that panics past about 290 million
# years; a century is as long as any retention need be.
LONGEST_HOURS = 100 * 365 * 24
LARGEST_INTEGER = 2**31 - 1

# The Delta table properties a load may set, and the form each value takes: each is one both engines
# know (Delta's DeltaConfigs, delta-rs's TableProperty); Delta refuses an unknown `delta.` property
# (DELTA_UNKNOWN_CONFIGURATION), delta-rs any unknown one.
SUPPORTED: dict[str, str] = {
    APPEND_ONLY: "boolean",
    "delta.enableChangeDataFeed": "boolean",
    "delta.deletedFileRetentionDuration": "duration",
    "delta.logRetentionDuration": "duration",
    "delta.setTransactionRetentionDuration": "duration",
    "delta.checkpointInterval": "positive integer",
    "delta.dataSkippingNumIndexedCols": "integer",
    "delta.dataSkippingStatsColumns": "text",
    "delta.checkpoint.writeStatsAsJson": "boolean",
    "delta.checkpoint.writeStatsAsStruct": "boolean",
    "delta.randomizeFilePrefixes": "boolean",
    "delta.autoOptimize.optimizeWrite": "boolean",
}
# Databricks' properties that delta-rs knows but open-source Delta's DeltaConfigs lacks: Delta refuses them.
DATABRICKS_ONLY = ("delta.targetFileSize", "delta.tuneFileSizesForRewrites", "delta.autoOptimize.autoCompact")
# The shortest retentions a load may set, and why: the log and the txn identifiers are the evidence a
# load whose record was lost is recorded from, and a retry recognises its earlier attempt by; deleted
# files are what readers of older versions and a load still writing need.
RETENTION_FLOORS: dict[str, tuple[float, str]] = {
    "delta.logRetentionDuration": (
        168,
        "log cleanup (after each checkpoint) deletes the commits older than it, and a load's commit is "
        "what a retry finds its earlier attempt by and what a lost record is rebuilt from",
    ),
    "delta.setTransactionRetentionDuration": (
        168,
        "Delta forgets a load's transaction identifier after it, and that identifier is what tells a "
        "retry that its earlier attempt committed",
    ),
    "delta.deletedFileRetentionDuration": (
        24,
        "VACUUM deletes the files older than it that no current version needs, and readers of older "
        "versions and a load still writing its files need them",
    ),
}
# Properties that change the table's protocol or its physical layout: a table with them could no
# longer be read or written by both writers, so loads never set them.
PROTOCOL_CHANGING = (
    "delta.minReaderVersion",
    "delta.minWriterVersion",
    "delta.columnMapping.mode",
    "delta.enableDeletionVectors",
    "delta.enableTypeWidening",
    "delta.enableRowTracking",
    "delta.feature.",
    "delta.universalFormat.",
    "delta.enableIcebergCompat",
)


def check_table_properties(value: Any) -> dict[str, str] | None:
    """The properties as {name: text}, booleans as 'true'/'false'; ConfigError names a bad one."""
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise ConfigError(ARGUMENT, f"{value!r} must be a dict of property name -> value")
    return {_checked_name(name): _checked_value(name, raw) for name, raw in value.items()}


def _checked_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(ARGUMENT, f"property name {name!r} must be a non-empty string")
    if name.startswith(PROTOCOL_CHANGING):
        raise ConfigError(
            ARGUMENT,
            f"{name!r} changes the table's protocol or column layout, which loads do not do: both writers "
            "must keep reading and writing the table. Set it outside the load if you need it, and load with "
            "the writer that supports it.",
        )
    if name in DATABRICKS_ONLY:
        raise ConfigError(
            ARGUMENT,
            f"{name!r} is a Databricks table property that open-source Delta Lake refuses as unknown "
            "(DELTA_UNKNOWN_CONFIGURATION), so the delta-spark writer could no longer set properties on "
            "the table. Leave it out: the delta-rs writer sizes its files itself.",
        )
    if name not in SUPPORTED:  # delta-rs refuses any other, free-form names included
        raise ConfigError(
            ARGUMENT,
            f"{name!r} is not a Delta table property loads set; supported: {', '.join(sorted(SUPPORTED))}",
        )
    return name


def _checked_value(name: str, raw: Any) -> str:
    kind = SUPPORTED[name]
    text = _as_text(raw)
    valid = {
        "boolean": text.lower() in _BOOLEAN,
        "duration": bool(_DURATION.match(text)),
        "integer": _is_int(text, minimum=-1) and int(text) <= LARGEST_INTEGER,
        "positive integer": _is_int(text, minimum=1) and int(text) <= LARGEST_INTEGER,
        "text": text != "",
    }[kind]
    if not valid:
        example = {"boolean": "true", "duration": "interval 7 days", "text": "a,b"}.get(kind, "10")
        bound = f" of at most {LARGEST_INTEGER}" if "integer" in kind else ""
        raise ConfigError(ARGUMENT, f"{name} = {raw!r} is not a {kind}{bound} (for example {example!r})")
    if kind == "duration" and duration_hours(text) > LONGEST_HOURS:
        raise ConfigError(
            ARGUMENT,
            f"{name} = {text!r} is longer than the {LONGEST_HOURS // 24 // 365} years a retention may be: "
            "VACUUM and log cleanup fail on spans the engines cannot represent. Nothing was loaded; give "
            "a shorter duration.",
        )
    if name in RETENTION_FLOORS:
        _check_floor(name, text)
    return text.lower() if kind == "boolean" else text


def _check_floor(name: str, text: str) -> None:
    floor, why = RETENTION_FLOORS[name]
    if duration_hours(text) < floor:
        raise ConfigError(
            ARGUMENT,
            f"{name} = {text!r} is shorter than the {floor:g} hours loads keep at least: {why}. Nothing was "
            f"loaded; give 'interval {floor / 24:g} days' or more.",
        )


def duration_hours(text: str) -> float:
    """A duration `interval N <unit>` (checked already) in hours."""
    amount, unit = _DURATION.match(text).groups()
    return int(amount) * _UNIT_HOURS[unit.lower()]


def _as_text(raw: Any) -> str:
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (int, str)):
        return str(raw).strip()
    raise ConfigError(ARGUMENT, f"value {raw!r} must be text, a number or a boolean")


def _is_int(text: str, minimum: int) -> bool:
    try:
        return int(text) >= minimum
    except ValueError:
        return False


def is_append_only(properties: dict[str, str] | None) -> bool:
    return (properties or {}).get(APPEND_ONLY, "false").lower() == "true"


def check_loading_allowed(
    properties: dict[str, str] | None, disposition: str, replaces_window: bool, table: str
) -> None:
    """Refuse a load the table's properties would make fail at commit: an append-only table takes appends
    that add rows, never a merge, a replace or an append that replaces its window's rows."""
    if not is_append_only(properties):
        return
    if disposition != "append":
        raise ConfigError(
            ARGUMENT,
            f"{APPEND_ONLY}=true on table {table!r} forbids updating and deleting rows, which the "
            f"{disposition!r} disposition does. Load it with write_disposition='append', or leave "
            f"{APPEND_ONLY} unset.",
        )
    if replaces_window:
        raise ConfigError(
            ARGUMENT,
            f"{APPEND_ONLY}=true on table {table!r} forbids removing rows, and this append replaces the rows "
            "of its window (window_overwrite=True). Pass window_overwrite=False, or leave "
            f"{APPEND_ONLY} unset.",
        )


def differing(wanted: dict[str, str] | None, current: dict[str, str] | None) -> dict[str, str]:
    """The wanted properties whose value the table does not have yet (booleans compared as booleans)."""
    current = current or {}
    return {
        name: value
        for name, value in (wanted or {}).items()
        if _comparable(name, current.get(name)) != _comparable(name, value)
    }


def _comparable(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    return value.lower() if SUPPORTED.get(name) in ("boolean", "duration") else value
