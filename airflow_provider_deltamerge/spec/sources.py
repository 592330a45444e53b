"""Source specs: where a load reads its batch from, and how it becomes a Spark DataFrame.

A source spec is a small JSON-only dict, so it can travel inside a LoadRequest to a spark-submit job:

- reader:   ``{"format": "parquet", "path": "/landing/flights", "options": {"mergeSchema": "true"}}``
- table:    ``{"table": "landing.flights"}``
- SQL:      ``{"sql": "SELECT * FROM landing.flights WHERE time_hour >= :window_start"}``
- callable: ``{"callable": "my_package.sources:flights"}``, called as ``fn(spark, window)``

A plain string is read as a callable when it looks like ``module.path:function``, as a table name
when it is a dotted identifier, and as SQL otherwise.

Parsing is pure; `spark.extract` reads a parsed spec with Spark.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import ConfigError
from .secrets import redacted

SOURCE_KINDS = ("reader", "table", "sql", "callable")
READER_KEYS = ("format", "path", "options")
WINDOW_PARAMETERS = ("window_start", "window_end")

_CALLABLE_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_TABLE_RE = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*")


def parse_source(value: str | dict[str, Any]) -> dict[str, Any]:
    """Validate a source spec and return its canonical dict form (one of the four kinds)."""
    if isinstance(value, str):
        return _parse_string(value)
    if not isinstance(value, dict):
        raise ConfigError("source", f"{redacted(value)!r} must be a dict or a string")
    if "format" in value:
        return _parse_reader(value)
    kinds = [k for k in ("table", "sql", "callable") if k in value]
    if len(kinds) != 1 or len(value) != 1:
        raise ConfigError(
            "source",
            f"{redacted(value)!r} must be a reader spec {{'format', 'path', 'options'}} or have exactly one "
            "of the keys 'table', 'sql', 'callable'",
        )
    kind = kinds[0]
    text = value[kind]
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"source.{kind}", f"{redacted(text)!r} must be a non-empty string")
    if kind == "callable" and not _CALLABLE_RE.fullmatch(text):
        raise ConfigError("source.callable", f"{redacted(text)!r} must look like 'package.module:function'")
    if kind == "table" and not _TABLE_RE.fullmatch(text):
        raise ConfigError("source.table", f"{redacted(text)!r} is not a table name like 'db.table'")
    return {kind: text}


def source_kind(source: dict[str, Any]) -> str:
    """Which of SOURCE_KINDS a canonical spec is."""
    return "reader" if "format" in source else next(iter(source))


def _parse_string(text: str) -> dict[str, Any]:
    text = text.strip()
    if not text:
        raise ConfigError("source", "must not be empty")
    if _CALLABLE_RE.fullmatch(text):
        return {"callable": text}
    if _TABLE_RE.fullmatch(text):
        return {"table": text}
    return {"sql": text}


def _parse_reader(spec: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(spec) - set(READER_KEYS))
    if unknown:
        raise ConfigError("source", f"unknown reader key(s) {unknown}; valid: {', '.join(READER_KEYS)}")
    fmt, path, options = spec.get("format"), spec.get("path"), spec.get("options") or {}
    if not isinstance(fmt, str) or not fmt:
        raise ConfigError("source.format", f"{fmt!r} must be a Spark data source name such as 'parquet'")
    if path is not None and (not isinstance(path, str) or not path):
        raise ConfigError("source.path", f"{path!r} must be a non-empty string")
    if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
        raise ConfigError("source.options", f"{redacted(options)!r} must be a dict of reader options")
    out: dict[str, Any] = {"format": fmt, "options": {k: _option_text(k, v) for k, v in options.items()}}
    if path is not None:
        out["path"] = path
    return out


def _option_text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ConfigError(
        f"source.options[{key!r}]", f"{redacted({key: value})[key]!r} must be a string, number or boolean"
    )
