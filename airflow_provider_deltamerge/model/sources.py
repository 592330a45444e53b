"""Source specs: where a load reads its batch from, and how it becomes a Spark DataFrame.

A source spec is a small JSON-only dict, so it can travel inside a LoadRequest to a spark-submit job:

- reader:   ``{"format": "parquet", "path": "/landing/flights", "options": {"mergeSchema": "true"}}``
- table:    ``{"table": "landing.flights"}``
- SQL:      ``{"sql": "SELECT * FROM landing.flights WHERE time_hour >= :window_start"}``
- callable: ``{"callable": "my_package.sources:flights"}``, called as ``fn(spark, window)``
- change feed: ``{"delta_changes": "s3://lake/bronze/orders"}``, the changes of an upstream Delta table
  between two of its versions (`model.change_feed`; read with delta-rs, the load's storage options);
  ``"start_after_version": N`` beside it reads only the versions after N

A plain string is read as a callable when it looks like ``module.path:function``, as a table name
when it is a dotted identifier, and as SQL otherwise.

Parsing is pure; `spark.extract` reads a parsed spec with Spark.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import ConfigError
from .secrets import credential_values, redact_text, redacted

SOURCE_KINDS = ("reader", "table", "sql", "callable", "delta_changes")
CHANGE_FEED = "delta_changes"
START_AFTER = "start_after_version"  # with CHANGE_FEED: no load reads this upstream version or older
READER_KEYS = ("format", "path", "options")
WINDOW_PARAMETERS = ("window_start", "window_end")

_CALLABLE_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_TABLE_RE = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*")


def parse_source(value: str | dict[str, Any]) -> dict[str, Any]:
    """Validate a source spec and return its canonical dict form (one of SOURCE_KINDS)."""
    if isinstance(value, str):
        return _parse_string(value)
    if not isinstance(value, dict):
        raise ConfigError("source", f"{redacted(value)!r} must be a dict or a string")
    if "format" in value:
        return _parse_reader(value)
    kinds = [k for k in SOURCE_KINDS[1:] if k in value]
    if CHANGE_FEED in value and START_AFTER in value:
        return _change_feed(value)
    if len(kinds) != 1 or len(value) != 1:
        raise ConfigError(
            "source",
            f"{redacted(value)!r} must be a reader spec {{'format', 'path', 'options'}} or have exactly one "
            "of the keys 'table', 'sql', 'callable', 'delta_changes'",
        )
    kind = kinds[0]
    text = value[kind]
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"source.{kind}", f"{redacted(text)!r} must be a non-empty string")
    if kind == "callable" and not _CALLABLE_RE.fullmatch(text):
        raise ConfigError("source.callable", f"{redacted(text)!r} must look like 'package.module:function'")
    if kind == "table" and not _TABLE_RE.fullmatch(text):
        raise ConfigError("source.table", f"{redacted(text)!r} is not a table name like 'db.table'")
    if kind == CHANGE_FEED:
        return {kind: _table_location(text)}
    return {kind: text}


def is_change_feed(source: dict[str, Any] | None) -> bool:
    """Whether a canonical spec reads an upstream Delta table's change data feed."""
    return source is not None and CHANGE_FEED in source


def names_change_feed(value: Any) -> bool:
    """Whether an operator's source argument (a spec, maybe not rendered yet) is a change feed, whose
    cursor is implied: the upstream's commit version."""
    return isinstance(value, dict) and CHANGE_FEED in value


def _change_feed(value: dict[str, Any]) -> dict[str, Any]:
    """``{"delta_changes": <upstream>, "start_after_version": N}``: the feed read after version N only,
    whatever the stored cursor or the window says (the way past versions that cannot be read)."""
    unknown = sorted(set(value) - {CHANGE_FEED, START_AFTER})
    if unknown:
        raise ConfigError(
            "source", f"unknown change feed key(s) {unknown}; valid: {CHANGE_FEED}, {START_AFTER}"
        )
    after = value[START_AFTER]
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise ConfigError(
            f"source.{START_AFTER}",
            f"{after!r} must be an upstream version number (a whole number, 0 or more): the last version "
            "not to read",
        )
    spec = parse_source({CHANGE_FEED: value[CHANGE_FEED]})
    return {**spec, START_AFTER: after}


def _table_location(text: str) -> str:
    """An upstream Delta table's location: an absolute path or a URI, without credentials in it."""
    argument = f"source.{CHANGE_FEED}"
    if credential_values(text):
        raise ConfigError(
            argument,
            f"{redact_text(text, credential_values(text))!r} holds a credential, which would show in logs "
            "and errors; give the location without it (the table is read with the load's storage_options)",
        )
    if "://" not in text and not text.startswith("/"):
        raise ConfigError(
            argument,
            f"{text!r} is a relative path; give the upstream Delta table as an absolute path or a URI "
            "(s3://..., abfss://..., file:///...)",
        )
    return text.rstrip("/") or text


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
