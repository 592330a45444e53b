"""Source specs: where a load reads its batch from, and how it becomes a Spark DataFrame.

A source spec is a small JSON-only dict, so it can travel inside a LoadRequest to a spark-submit job:

- reader:   ``{"format": "parquet", "path": "/landing/flights", "options": {"mergeSchema": "true"}}``
- table:    ``{"table": "landing.flights"}``
- SQL:      ``{"sql": "SELECT * FROM landing.flights WHERE time_hour >= :window_start"}``
- callable: ``{"callable": "my_package.sources:flights"}``, called as ``fn(spark, window)``

A plain string is read as a callable when it looks like ``module.path:function``, as a table name
when it is a dotted identifier, and as SQL otherwise.

Parsing is pure; pyspark is only touched through the ``spark`` object handed to ``read_source``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

from .errors import ConfigError

SOURCE_KINDS = ("reader", "table", "sql", "callable")
READER_KEYS = ("format", "path", "options")
WINDOW_PARAMETERS = ("window_start", "window_end")

_CALLABLE_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_TABLE_RE = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*")
_PARAMETER_RE = {name: re.compile(rf":{name}\b") for name in WINDOW_PARAMETERS}


def parse_source(value: str | dict[str, Any]) -> dict[str, Any]:
    """Validate a source spec and return its canonical dict form (one of the four kinds)."""
    if isinstance(value, str):
        return _parse_string(value)
    if not isinstance(value, dict):
        raise ConfigError("source", f"{value!r} must be a dict or a string")
    if "format" in value:
        return _parse_reader(value)
    kinds = [k for k in ("table", "sql", "callable") if k in value]
    if len(kinds) != 1 or len(value) != 1:
        raise ConfigError(
            "source",
            f"{value!r} must be a reader spec {{'format', 'path', 'options'}} or have exactly one of "
            "the keys 'table', 'sql', 'callable'",
        )
    kind = kinds[0]
    text = value[kind]
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"source.{kind}", f"{text!r} must be a non-empty string")
    if kind == "callable" and not _CALLABLE_RE.fullmatch(text):
        raise ConfigError("source.callable", f"{text!r} must look like 'package.module:function'")
    if kind == "table" and not _TABLE_RE.fullmatch(text):
        raise ConfigError("source.table", f"{text!r} is not a table name like 'db.table'")
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
        raise ConfigError("source.options", f"{options!r} must be a dict of reader options")
    out: dict[str, Any] = {"format": fmt, "options": {k: _option_text(k, v) for k, v in options.items()}}
    if path is not None:
        out["path"] = path
    return out


def _option_text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ConfigError(f"source.options[{key!r}]", f"{value!r} must be a string, number or boolean")


def load_callable(path: str) -> Callable[..., Any]:
    """Import ``module:function`` and return the function."""
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError("source.callable", f"cannot import module {module_name!r}: {exc}") from exc
    function = getattr(module, attribute, None)
    if not callable(function):
        raise ConfigError("source.callable", f"{module_name!r} has no callable named {attribute!r}")
    return function


def read_source(spark: Any, source: dict[str, Any], window: Any = None) -> Any:
    """The DataFrame a canonical source spec describes, for the given load window."""
    kind = source_kind(source)
    if kind == "reader":
        reader = spark.read.format(source["format"]).options(**source.get("options", {}))
        return reader.load(source["path"]) if "path" in source else reader.load()
    if kind == "table":
        return spark.table(source["table"])
    if kind == "sql":
        return _read_sql(spark, source["sql"], window)
    return load_callable(source["callable"])(spark, window)


def _read_sql(spark: Any, query: str, window: Any) -> Any:
    """Run a query; ``:window_start`` / ``:window_end`` markers are bound to the window's bounds."""
    used = [name for name in WINDOW_PARAMETERS if _PARAMETER_RE[name].search(query)]
    if not used:
        return spark.sql(query)
    bounds = {"window_start": getattr(window, "start", None), "window_end": getattr(window, "end", None)}
    missing = [name for name in used if bounds[name] is None]
    if missing:
        raise ConfigError("source.sql", f"the query uses {missing} but this load has no such window bound")
    return spark.sql(query, args={name: bounds[name] for name in used})


def source_reader(source: dict[str, Any]) -> Callable[[Any, Any], Any]:
    """A ``(spark, window) -> DataFrame`` function for a canonical spec (what run_load accepts)."""

    def read(spark: Any, window: Any = None) -> Any:
        return read_source(spark, source, window)

    read.__qualname__ = read.__name__ = f"read_{source_kind(source)}"
    return read
