"""What each command does: read a dataset (or load into it) and return JSON-ready data.

Rendering is in `render`; the read commands never start Spark, only `load` does.
"""

from __future__ import annotations

import argparse
import logging
from datetime import datetime, timezone
from typing import Any

from ..errors import ConfigError
from .dataset import SYSTEM_TABLES, Dataset, absolute, describe_table, table_name


def loads(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The load records, newest first: all of them, or one table's; the `--last` newest."""
    if args.table is not None:
        table_name("--table", args.table)  # before anything is read
    dataset = Dataset(args.dataset, args.storage_option)
    store = dataset.store()
    if args.table is not None and args.table not in dataset.table_names(store.loads):
        raise ConfigError(
            "--table",
            f"dataset {dataset.location} has no table {args.table!r}; "
            f"its tables: {', '.join(dataset.table_names(store.loads)) or 'none'}",
        )
    newest = list(reversed(store.loads_of(table_name=args.table)))
    return [load_record(row) for row in (newest[: args.last] if args.last else newest)]


def load_record(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "load_id": row["load_id"],
        "pipeline": row["schema_name"],
        "table": row["table_name"],
        "status": row["status"],
        "inserted_at": _iso(row["inserted_at"]),
        "window_start": row["window_start"],
        "window_end": row["window_end"],
        "table_version": row["table_version"],
        "metrics": row["metrics"],
        "dag_id": row["dag_id"],
        "task_id": row["task_id"],
        "run_id": row["run_id"],
        "try_number": row["try_number"],
    }


def state(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per pipeline and table: each cursor's last value and boundary rows kept, and the last load."""
    store = Dataset(args.dataset, args.storage_option).store()
    out = []
    for pipeline, table in sorted({(r["schema_name"], r["table_name"]) for r in store.loads}):
        last = store.loads_of(pipeline, table)[-1]
        stored = store.latest_state(pipeline, table)
        common = {
            "pipeline": pipeline,
            "table": table,
            "last_load_id": last["load_id"],
            "last_load_at": _iso(last["inserted_at"]),
            "state": stored,
        }
        cursors = (stored or {}).get("incremental") or {}
        if not cursors:
            out.append({**common, "cursor": None, "last_value": None, "boundary_rows": None})
        for cursor, entry in sorted(cursors.items()):
            boundary = len(entry.get("unique_hashes") or [])
            out.append(
                {**common, "cursor": cursor, "last_value": entry.get("last_value"), "boundary_rows": boundary}
            )
    return out


def history(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The table's commits, newest first, each marked recorded when a `_dlt_loads` row records its load."""
    table_name("TABLE", args.table)  # before anything is read
    dataset = Dataset(args.dataset, args.storage_option)
    recorded = {row["load_id"] for row in dataset.store().loads_of(table_name=args.table)}
    commits = dataset.commits(args.table, args.last)
    for commit in commits:
        commit["timestamp"] = _iso(commit["timestamp"])
        commit["recorded"] = commit["load_id"] in recorded
    return commits


def tables(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The dataset's tables, then its own (`_dlt_loads`, `_dlt_pipeline_state`, the tables' tombstones)."""
    dataset = Dataset(args.dataset, args.storage_option)
    data = dataset.table_names(dataset.store().loads)
    names = [*data, *SYSTEM_TABLES, *dataset.companion_tables(data)]
    found = ((name, dataset.table(name)) for name in names)
    return [describe_table(name, table) for name, table in found if table is not None]


def load(args: argparse.Namespace) -> dict[str, Any]:
    """One load on a local Spark session; its metrics, as XCom and `_dlt_loads` have them (load_id None
    when there was nothing to load)."""
    from ..load import run_request
    from ..model.delta_jars import delta_jars_from_env
    from ..model.request import LoadRequest
    from ..spark.session import default_session

    request = LoadRequest.create(**load_arguments(args))  # refused here, before Spark starts
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    spark = default_session(args.master, dict(args.spark_conf), args.delta_jars or delta_jars_from_env())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        info = run_request(request, spark)
    finally:
        spark.stop()
    return info.metrics


def load_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The LoadRequest arguments of the `load` command line."""
    arguments: dict[str, Any] = {
        "dataset": absolute(args.dataset),
        "table_name": args.table_name,
        "source": _source(args),
        "write_disposition": _disposition(args.write_disposition, args.strategy),
        "primary_key": args.primary_key or None,
        "merge_key": args.merge_key or None,
        "sequence_by": args.sequence_by or None,
        "column_list": args.column_list or None,
        "except_column_list": args.except_column_list or None,
        "apply_as_deletes": args.apply_as_deletes,
        "apply_as_truncates": args.apply_as_truncates,
        "ignore_null_updates": args.ignore_null_updates,
        "ignore_null_updates_column_list": args.ignore_null_updates_column_list or None,
        "ignore_null_updates_except_column_list": args.ignore_null_updates_except_column_list or None,
        "track_history_column_list": args.track_history_column_list or None,
        "track_history_except_column_list": args.track_history_except_column_list or None,
        **({"tombstone_retention": args.tombstone_retention} if args.tombstone_retention is not None else {}),
        "columns": args.columns,
        "schema_contract": args.schema_contract,
        "expectations": args.expectations,
        "incremental": _incremental(args.incremental, args.initial_value),
        "pipeline_name": args.pipeline_name,
        "naming": args.naming,
        "backend": args.backend,
        "table_properties": dict(args.table_property) or None,
        "max_table_nesting": args.max_table_nesting,
        "storage_options": dict(args.storage_option) or None,
    }
    if args.window:
        if arguments["incremental"] is None:
            raise ConfigError(
                "--window", "a window selects rows by the cursor column: give --incremental too"
            )
        arguments["run_context"] = {"window": {"start": args.window[0], "end": args.window[1]}}
    return arguments


def _source(args: argparse.Namespace) -> Any:
    if args.source is not None:
        if args.format or args.path or args.option:
            raise ConfigError("--source", "give --source, or --format with --path and --option, not both")
        return args.source
    if args.format is None:
        if args.path or args.option:
            raise ConfigError("--format", "is required with --path and --option (e.g. --format parquet)")
        raise ConfigError("--source", "is required: give --source, or --format with --path")
    reader: dict[str, Any] = {"format": args.format, "options": dict(args.option)}
    if args.path is not None:
        reader["path"] = args.path
    return reader


def _disposition(disposition: Any, strategy: str | None) -> Any:
    if strategy is None:
        return disposition or "append"
    if disposition not in (None, "merge"):
        raise ConfigError("--strategy", "is a merge strategy: use it with --write-disposition merge")
    return {"disposition": "merge", "strategy": strategy}


def _incremental(incremental: Any, initial_value: str | None) -> Any:
    if isinstance(incremental, str):
        return {"cursor_path": incremental, **({"initial_value": initial_value} if initial_value else {})}
    if initial_value is not None:
        raise ConfigError("--initial-value", "goes with --incremental CURSOR (or inside its JSON)")
    return incremental


def _iso(value: Any) -> str | None:
    """A time as ISO 8601 in UTC: a datetime, or epoch milliseconds as Delta's history gives them."""
    if isinstance(value, (int, float)):
        value = datetime.fromtimestamp(value / 1000, timezone.utc)
    return value.isoformat() if isinstance(value, datetime) else value


def jvm_archive(args: argparse.Namespace) -> dict[str, Any]:
    from .jvm_archive import make_archive

    return make_archive(dict(args.spark_conf))


COMMANDS = {
    "loads": loads,
    "state": state,
    "history": history,
    "tables": tables,
    "load": load,
    "jvm-archive": jvm_archive,
}
