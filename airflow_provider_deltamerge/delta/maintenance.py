"""Table maintenance: OPTIMIZE (compaction or Z-order), VACUUM and checkpoints, with either writer.

Maintenance commits go through Delta's optimistic concurrency as loads do, so a load and an OPTIMIZE of
one table may run at the same time. When both rewrite the same files, the one that commits second fails
its conflict check and plans again: a load up to `load.COMMIT_ATTEMPTS` times, an OPTIMIZE here up to
`OPTIMIZE_ATTEMPTS` times. Neither commit is lost. VACUUM deletes only files older than its retention;
the retention may not go below the table's `delta.deletedFileRetentionDuration` unless force=True is
given, because a shorter one can delete files that readers of older versions, or a load still writing
its files, need.

Every option is checked, and the table's retention read, before the first commit. This module imports
deltalake and delta-spark only when it runs, so that operators can check options when a DAG is parsed.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, ConflictError
from ..model.arguments import check_dataset, check_table_name
from ..model.checks import key_tuple
from ..model.naming import check_folder_name, naming_convention, table_name_as_stored, table_path
from ..model.storage import check_storage_options, delta_rs_options
from ..model.table_properties import LONGEST_HOURS
from .maintenance_tables import DeltaRsTable, open_table
from .storage import store_errors

log = logging.getLogger(__name__)

RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
DEFAULT_RETENTION_HOURS = 168.0  # Delta's default for that property: one week
VACUUM_FLOOR_HOURS = 24.0  # the least VACUUM keeps without force, also where the table's property is less
OPTIMIZE_ATTEMPTS = 8  # a concurrent commit or maintenance run came first: plan again, this often in all
MAINTENANCE_STOPPED = "The maintenance stopped there; what it committed before stays, and it can run again."
STATE_TABLES = ("_dlt_loads", "_dlt_pipeline_state")  # the store's own tables (delta/store.py)

_HOURS_PER_UNIT = {
    "nanosecond": 1 / 3.6e12,
    "microsecond": 1 / 3.6e9,
    "millisecond": 1 / 3.6e6,
    "second": 1 / 3600,
    "minute": 1 / 60,
    "hour": 1.0,
    "day": 24.0,
    "week": 168.0,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+?)s?\b")


@dataclass(frozen=True)
class MaintenanceOptions:
    """What to do to a table, validated without touching it (operators check it when a DAG is parsed).

    :param optimize: compact small files (OPTIMIZE).
    :param z_order_by: column or columns to Z-order by; the OPTIMIZE then clusters rows by them.
    :param vacuum: delete files no version within the retention needs (VACUUM).
    :param retention_hours: VACUUM's retention; default: the table's ``delta.deletedFileRetentionDuration``.
    :param force: allow a retention below the table's configured one.
    :param checkpoint: write a checkpoint of the table's log at its latest version.
    """

    optimize: bool = True
    z_order_by: Any = ()
    vacuum: bool = False
    retention_hours: float | None = None
    force: bool = False
    checkpoint: bool = False

    def __post_init__(self) -> None:
        for name in ("optimize", "vacuum", "force", "checkpoint"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, f"must be true or false, got {getattr(self, name)!r}")
        object.__setattr__(self, "z_order_by", key_tuple("z_order_by", self.z_order_by or None))
        if self.z_order_by and not self.optimize:
            raise ConfigError("z_order_by", "Z-ordering is done by OPTIMIZE; set optimize=True")
        if self.retention_hours is not None:
            hours = self.retention_hours
            if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not math.isfinite(hours):
                raise ConfigError("retention_hours", f"{hours!r} must be a number of hours")
            if hours < 0:
                raise ConfigError("retention_hours", f"{hours!r} must not be negative")
            if not self.vacuum:
                raise ConfigError("retention_hours", "is VACUUM's retention; set vacuum=True")
        if self.force and not self.vacuum:
            raise ConfigError("force", "only lets VACUUM go below the table's retention; set vacuum=True")
        if not (self.optimize or self.vacuum or self.checkpoint):
            raise ConfigError("optimize", "nothing to do: set optimize, vacuum or checkpoint")


def maintain_table(
    dataset: str,
    table_name: str,
    *,
    optimize: bool = True,
    z_order_by: str | Sequence[str] | None = None,
    vacuum: bool = False,
    retention_hours: float | None = None,
    force: bool = False,
    checkpoint: bool = False,
    naming: str = "snake_case",
    backend: str = "auto",
    spark: Any = None,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run the chosen maintenance on ``<dataset>/<table_name>``, in the order OPTIMIZE, VACUUM, checkpoint.

    ``backend`` "delta-rs" needs no Spark; "delta-spark" runs Delta's own commands in ``spark``; "auto"
    takes delta-spark when ``spark`` is given and Delta's classes load in it, else delta-rs.
    ``storage_options`` go to delta-rs for object stores (see docs/STORAGE.md). Returns JSON-only
    metrics under Delta's names: ``numAddedFiles``, ``numRemovedFiles``, ``numAddedBytes``,
    ``numRemovedBytes`` (OPTIMIZE),
    ``numDeletedFiles`` and ``retentionHours`` (VACUUM), ``checkpointVersion``, and ``table``,
    ``writer``, ``operations`` and ``table_version`` (the version after the maintenance).
    """
    chosen = MaintenanceOptions(optimize, z_order_by, vacuum, retention_hours, force, checkpoint)
    normalize = naming_convention(naming)
    stored = table_name_as_stored(normalize, check_table_name(table_name))
    name = check_folder_name("table_name", stored, table_name)
    dataset = check_dataset(dataset)
    options = delta_rs_options(dataset, check_storage_options(storage_options))
    with store_errors(dataset, options, MAINTENANCE_STOPPED):
        return _maintain(chosen, normalize, table_path(dataset, name), name, backend, spark, options)


def _maintain(chosen: MaintenanceOptions, normalize, path: str, name: str, backend, spark, options) -> dict:
    if name in STATE_TABLES:
        if chosen.z_order_by:
            raise ConfigError(
                "z_order_by", f"{name} is one of the dataset's own tables, which are not Z-ordered"
            )
        table = DeltaRsTable(path, options, state_table=True)  # written by the store, with delta-rs
    else:
        table = open_table(path, backend, spark, options)
    retention = vacuum_retention(chosen, table.configuration(), table.path) if chosen.vacuum else None
    z_order = _z_order_columns([normalize(c) for c in chosen.z_order_by], table)
    metrics: dict[str, Any] = {"table": name, "writer": table.writer, "operations": []}
    if chosen.optimize:
        metrics.update(_optimize(table, z_order))
        metrics["operations"].append("z-order" if z_order else "compaction")
    if chosen.vacuum:
        metrics.update(numDeletedFiles=table.vacuum(retention, chosen.force), retentionHours=retention)
        metrics["operations"].append("vacuum")
    if chosen.checkpoint:
        metrics["checkpointVersion"] = table.checkpoint()
        metrics["operations"].append("checkpoint")
    metrics["table_version"] = table.version()
    log.info("maintenance of %s with %s: %s", table.path, table.writer, metrics)
    return metrics


def vacuum_retention(options: MaintenanceOptions, configuration: Mapping[str, str], path: str) -> int:
    """VACUUM's retention in whole hours (rounded up, as delta-rs takes it); below the table's configured
    retention, or below VACUUM_FLOOR_HOURS whatever the table says, only with force=True."""
    configured = retention_hours_of(configuration)
    floor = max(configured, VACUUM_FLOOR_HOURS)
    hours = float(options.retention_hours) if options.retention_hours is not None else floor
    if hours > LONGEST_HOURS:  # delta-rs panics on a time span it cannot represent
        given = (
            "retention_hours" if options.retention_hours is not None else f"{RETENTION_PROPERTY} of {path}"
        )
        raise ConfigError(
            "retention_hours",
            f"{hours:g} hours ({given}) is longer than the {LONGEST_HOURS} hours (a century) VACUUM keeps at "
            "most; nothing was changed. Give a shorter retention (or fix the table property).",
        )
    if hours < floor and not options.force:
        source = (
            f"{RETENTION_PROPERTY} of table {path}"
            if configured >= VACUUM_FLOOR_HOURS
            else f"the floor VACUUM keeps without force=True ({RETENTION_PROPERTY} of table {path} is "
            f"{configured:g} hours)"
        )
        raise ConfigError(
            "retention_hours",
            f"{hours:g} hours is below the {floor:g} hours of {source}: VACUUM could delete files that "
            "readers of older versions, or a load still writing, need. Nothing was changed. Keep at least "
            f"{floor:g} hours, or pass force=True.",
        )
    return math.ceil(hours)


def retention_hours_of(configuration: Mapping[str, str]) -> float:
    """The table's ``delta.deletedFileRetentionDuration`` (e.g. "interval 7 days") in hours."""
    text = configuration.get(RETENTION_PROPERTY)
    if not text:
        return DEFAULT_RETENTION_HOURS
    body = text.strip().lower().removeprefix("interval").strip()
    parts = _DURATION_PART.findall(body)
    if not parts or _DURATION_PART.sub("", body).strip() or any(u not in _HOURS_PER_UNIT for _, u in parts):
        raise ConfigError(
            "retention_hours",
            f"the table's {RETENTION_PROPERTY} {text!r} is not a duration such as 'interval 7 days'; "
            "fix the table property",
        )
    return sum(float(amount) * _HOURS_PER_UNIT[unit] for amount, unit in parts)


def optimize_metrics(raw: Mapping[str, Any]) -> dict[str, int]:
    """OPTIMIZE's metrics (delta-rs: sizes as JSON text; Delta: nested structs) under Delta's commit names."""
    added, removed = _mapping(raw.get("filesAdded")), _mapping(raw.get("filesRemoved"))
    return {
        "numAddedFiles": int(raw.get("numFilesAdded") or 0),
        "numRemovedFiles": int(raw.get("numFilesRemoved") or 0),
        "numAddedBytes": int(added.get("totalSize") or 0),
        "numRemovedBytes": int(removed.get("totalSize") or 0),
    }


def _mapping(value: Any) -> Mapping[str, Any]:
    if isinstance(value, str):
        return json.loads(value)
    return value or {}


def _z_order_columns(columns: list[str], table) -> list[str]:
    """Z-order columns as stored; each must be a table column that is not a partition column."""
    present, partitions = table.columns(), table.partition_columns()
    for column in columns:
        if column not in present:
            raise ConfigError(
                "z_order_by", f"{column!r} is not a column of {table.path}; columns: {', '.join(present)}"
            )
        if column in partitions:
            raise ConfigError(
                "z_order_by", f"{column!r} partitions {table.path}; Z-order by columns within partitions"
            )
    return columns


def _optimize(table, z_order: list[str]) -> dict[str, int]:
    """OPTIMIZE, planned again on the new version when a concurrent commit rewrote files it read."""
    attempt = 1
    while True:
        try:
            return optimize_metrics(table.optimize(z_order))
        except table.conflicts as conflict:
            if attempt == OPTIMIZE_ATTEMPTS:
                raise ConflictError(
                    f"OPTIMIZE of {table.path} lost to concurrent commits or maintenance runs "
                    f"{OPTIMIZE_ATTEMPTS} times; it changed nothing. Run it again when fewer loads write "
                    "to the table and no other maintenance of it runs."
                ) from conflict
            attempt += 1
            log.warning("OPTIMIZE of %s: %s; planning again (attempt %d)", table.path, conflict, attempt)
            time.sleep(random.uniform(0.1, 0.3) * attempt)  # apart from the run it collided with
