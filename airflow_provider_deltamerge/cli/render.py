"""How each command's result is shown: tables drawn with `rich`, or JSON for scripts."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

COMPLETED = 0  # `_dlt_loads.status` of a completed load, as dlt writes it
WIDTH_WITHOUT_TERMINAL = 200  # piped output: wide enough that no id or path is cut
SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def print_json(result: Any) -> None:
    json.dump(result, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def render(command: str, result: Any) -> None:
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=WIDTH_WITHOUT_TERMINAL)
    RENDERERS[command](console, result)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _window(start: Any, end: Any) -> str:
    return f"{_text(start)} .. {_text(end)}" if start or end else ""


def _table(title: str, *columns: str, numeric: tuple[str, ...] = ()) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, justify="right" if column in numeric else "left", no_wrap=column != "window")
    return table


def render_loads(console: Console, records: list[dict[str, Any]]) -> None:
    if not records:
        console.print("no loads recorded")
        return
    counts = ("rows", "inserted", "updated", "deleted", "version")
    table = _table(
        "loads, newest first",
        "load id",
        "table",
        "window",
        *counts,
        "set aside",
        "writer",
        "status",
        "when",
        numeric=counts,
    )
    for r in records:
        m = r["metrics"]
        table.add_row(
            r["load_id"],
            r["table"],
            _window(r["window_start"], r["window_end"]),
            *(_text(m.get(k)) for k in ("rows_extracted", "numTargetRowsInserted", "numTargetRowsUpdated")),
            _text(m.get("numTargetRowsDeleted")),
            _text(r["table_version"]),
            _set_aside(m),
            _text(m.get("writer")),
            "completed" if r["status"] == COMPLETED else _text(r["status"]),
            _text(r["inserted_at"]),
        )
    console.print(table)


def _set_aside(metrics: dict[str, Any]) -> str:
    """The rows a load's expectations dropped and quarantined (expectations=): the table's, then each
    child table's by its name (`child_expectations`); blank without any."""
    shown = [_dropped_and_quarantined(metrics)] if "expectations" in metrics else []
    for child, counts in (metrics.get("child_expectations") or {}).items():
        shown.append(f"{child}: {_dropped_and_quarantined(counts)}")
    return "; ".join(shown)


def _dropped_and_quarantined(counts: dict[str, Any]) -> str:
    return f"{counts.get('rows_dropped', 0)} dropped, {counts.get('rows_quarantined', 0)} quarantined"


def render_state(console: Console, entries: list[dict[str, Any]]) -> None:
    if not entries:
        console.print("no pipeline state: no load has completed")
        return
    table = _table(
        "pipeline state",
        "pipeline",
        "table",
        "cursor",
        "last value",
        "boundary rows kept",
        "last load",
        "at",
        numeric=("boundary rows kept",),
    )
    for e in entries:
        cursor = e["cursor"] or "(no cursor)"
        table.add_row(
            e["pipeline"],
            e["table"],
            cursor,
            _text(e["last_value"]),
            _text(e["boundary_rows"]),
            e["last_load_id"],
            _text(e["last_load_at"]),
        )
    console.print(table)


def render_history(console: Console, commits: list[dict[str, Any]]) -> None:
    table = _table("commits, newest first", "version", "when", "operation", "load id", "recorded")
    for c in commits:
        if c["recorded"]:
            recorded = "yes"
        elif c["load_id"] is not None:
            recorded = "NO: not in _dlt_loads (the next load of the table records it)"
        else:
            recorded = "no: not a load"
        table.add_row(str(c["version"]), _text(c["timestamp"]), c["operation"], _text(c["load_id"]), recorded)
    console.print(table)


def render_tables(console: Console, tables: list[dict[str, Any]]) -> None:
    counts = ("version", "rows", "files", "size")
    summary = _table("tables", "table", *counts, "partitioned by", numeric=counts)
    for t in tables:
        size = _size(t["size_bytes"])
        summary.add_row(
            t["table"],
            *map(str, (t["version"], t["rows"], t["files"], size)),
            ", ".join(t["partition_columns"]),
        )
    console.print(summary)
    for t in tables:
        if t["system"]:
            continue
        schema = _table(f"{t['table']}: schema", "column", "type", "nullable", "partition")
        for c in t["columns"]:
            schema.add_row(
                c["name"], c["type"], "yes" if c["nullable"] else "no", "yes" if c["partition"] else ""
            )
        console.print(schema)


def render_load(console: Console, metrics: dict[str, Any]) -> None:
    if metrics.get("load_id") is None:
        console.print(
            f"nothing to load into {metrics['table']} (version {_text(metrics.get('table_version'))})"
        )
        return
    columns = [
        ("rows in", "rows_extracted"),
        ("inserted", "numTargetRowsInserted"),
        ("updated", "numTargetRowsUpdated"),
        ("deleted", "numTargetRowsDeleted"),
        ("version", "table_version"),
    ]
    table = _table(
        f"load into {metrics['table']}",
        "load",
        *(h for h, _ in columns),
        "writer",
        numeric=tuple(h for h, _ in columns),
    )
    table.add_row(
        metrics["load_id"], *(_text(metrics.get(k)) for _, k in columns), _text(metrics.get("writer"))
    )
    console.print(table)


def _size(size_bytes: int) -> str:
    """Bytes in binary units: 812 B, 3.4 KiB, 1.2 GiB."""
    exponent = min(int(math.log(max(size_bytes, 1), 1024)), len(SIZE_UNITS) - 1)
    if exponent == 0:
        return f"{size_bytes} B"
    return f"{size_bytes / 1024**exponent:.1f} {SIZE_UNITS[exponent]}"


def render_jvm_archive(console: Console, made: dict[str, Any]) -> None:
    console.print(
        f"JVM class archive {made['archive']}: {made['bytes']:,} bytes, made in {made['seconds']} s"
    )


RENDERERS = {
    "jvm-archive": render_jvm_archive,
    "loads": render_loads,
    "state": render_state,
    "history": render_history,
    "tables": render_tables,
    "load": render_load,
}
