"""LoadRequest: everything one load needs, validated once, frozen and JSON-serialisable.

The operator builds it from its rendered arguments and Airflow's context; the hook runs it in process,
over Spark Connect, or ships it as a JSON file to ``remote_job`` under spark-submit. No Airflow and no
pyspark imports here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import ConfigError
from .sources import parse_source, source_reader
from .specs import BACKENDS, NAMINGS, RunContext, WriteDisposition, choice, key_tuple, parse_columns

FORMAT_VERSION = 1


def table_uri(dataset: str, table_name: str, naming: str = "snake_case") -> str:
    """The URI of a table as stored: ``<dataset>/<normalized table_name>``, ``file://`` for local paths."""
    from .naming import naming_convention

    base = dataset.rstrip("/")
    if "://" not in base:
        base = f"file://{base}"
    return f"{base}/{naming_convention(naming)(table_name)}"


def check_dataset(dataset: Any) -> str:
    if not isinstance(dataset, str) or not dataset:
        raise ConfigError("dataset", f"{dataset!r} must be a non-empty path or URI")
    if "://" not in dataset and not dataset.startswith("/"):
        raise ConfigError(
            "dataset",
            f"{dataset!r} is a relative path; give an absolute path or a URI (s3://..., file:///...), "
            "because the load may run in another working directory or on another machine",
        )
    return dataset


def check_table_name(table_name: Any) -> str:
    if not isinstance(table_name, str) or not table_name or "/" in table_name:
        raise ConfigError("table_name", f"{table_name!r} must be a non-empty name without '/'")
    return table_name


def _iso(value: Any, argument: str) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str) and value:
        return value
    raise ConfigError(argument, f"{value!r} must be a datetime or an ISO 8601 string")


def check_interval(interval: Any) -> tuple[str, str] | None:
    """Airflow's (data_interval_start, data_interval_end) as ISO strings, or None."""
    if interval is None:
        return None
    if not isinstance(interval, (tuple, list)) or len(interval) != 2:
        raise ConfigError("data_interval", f"{interval!r} must be a (start, end) pair or None")
    if interval[0] is None or interval[1] is None:
        return None
    return _iso(interval[0], "data_interval[0]"), _iso(interval[1], "data_interval[1]")


def check_incremental(incremental: Any) -> dict[str, Any] | None:
    """An Incremental (or its dict form) as its validated dict form."""
    if incremental is None:
        return None
    from .incremental import Incremental

    if isinstance(incremental, dict):
        incremental = Incremental.from_dict(incremental)
    if not isinstance(incremental, Incremental):
        raise ConfigError("incremental", f"{incremental!r} must be an Incremental or its dict form")
    return incremental.to_dict()


def check_pipeline_name(name: Any) -> str | None:
    if name is not None and (not isinstance(name, str) or not name):
        raise ConfigError("pipeline_name", f"{name!r} must be a non-empty string")
    return name


def check_window_overwrite(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError("window_overwrite", f"must be true or false, got {value!r}")
    return value


def _keys(argument: str, value: Any) -> list[str] | None:
    names = key_tuple(argument, value)
    return list(names) if names else None


def _columns(columns: Any) -> dict[str, dict[str, Any]] | None:
    parse_columns(columns)
    return {k: dict(v) for k, v in columns.items()} if columns else None


# The normal form of each load argument; each raises ConfigError naming the argument it rejects.
ARGUMENT_CHECKS: dict[str, Callable[[Any], Any]] = {
    "source": parse_source,
    "dataset": check_dataset,
    "table_name": check_table_name,
    "write_disposition": lambda value: WriteDisposition.parse(value).to_dict(),
    "primary_key": lambda value: _keys("primary_key", value),
    "merge_key": lambda value: _keys("merge_key", value),
    "columns": _columns,
    "pipeline_name": check_pipeline_name,
    "backend": lambda value: choice("backend", value, BACKENDS),
    "naming": lambda value: choice("naming", value, NAMINGS),
    "incremental": check_incremental,
    "window_overwrite": check_window_overwrite,
}


@dataclass(frozen=True)
class LoadRequest:
    """One load: source, target, write semantics and the Airflow run it belongs to.

    Build it with :meth:`create`, which validates and normalises every argument.
    """

    source: dict[str, Any]
    dataset: str
    table_name: str
    write_disposition: dict[str, Any]
    primary_key: list[str] | None = None
    merge_key: list[str] | None = None
    columns: dict[str, dict[str, Any]] | None = None
    pipeline_name: str | None = None
    backend: str = "auto"
    naming: str = "snake_case"
    incremental: dict[str, Any] | None = None
    data_interval: tuple[str, str] | None = None
    run_context: dict[str, Any] = field(default_factory=dict)
    window_overwrite: bool = True
    load_id: str | None = None

    @classmethod
    def create(
        cls,
        *,
        data_interval: Any = None,
        run_context: RunContext | dict[str, Any] | None = None,
        load_id: str | None = None,
        **arguments: Any,
    ) -> LoadRequest:
        """Validate and normalise every argument (ConfigError names a bad one); the frozen request.

        ``arguments`` are run_load's: source, dataset, table_name (required), write_disposition,
        primary_key, merge_key, columns, pipeline_name, backend, naming, incremental, window_overwrite.
        """
        unknown = sorted(set(arguments) - set(ARGUMENT_CHECKS))
        if unknown:
            valid = ", ".join(ARGUMENT_CHECKS)
            raise ConfigError("request", f"unknown argument(s) {unknown}; valid: {valid}")
        missing = [name for name in ("source", "dataset", "table_name") if name not in arguments]
        if missing:
            raise ConfigError(missing[0], "is required")
        arguments.setdefault("write_disposition", "append")
        values = {name: ARGUMENT_CHECKS[name](value) for name, value in arguments.items()}
        return cls(
            **values,
            data_interval=check_interval(data_interval),
            run_context=RunContext.from_value(run_context).to_dict(),
            load_id=load_id,
        )

    @property
    def stored_table_name(self) -> str:
        """The table's name after the naming convention: what run_load writes and reports."""
        from .naming import naming_convention

        return naming_convention(self.naming)(self.table_name)

    @property
    def table_uri(self) -> str:
        return table_uri(self.dataset, self.table_name, self.naming)

    def with_load_id(self, load_id: str) -> LoadRequest:
        return dataclasses.replace(self, load_id=load_id)

    def describe(self) -> str:
        """One line for logs: target, disposition and interval (never the source options)."""
        label = WriteDisposition.parse(self.write_disposition).label
        interval = (
            f" interval {self.data_interval[0]} .. {self.data_interval[1]}" if self.data_interval else ""
        )
        return f"{label} load into {self.table_uri}{interval} (load id {self.load_id or 'new'})"

    def to_json(self) -> str:
        body = dataclasses.asdict(self)
        body["format_version"] = FORMAT_VERSION
        return json.dumps(body, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LoadRequest:
        body = json.loads(text)
        version = body.pop("format_version", None)
        if version != FORMAT_VERSION:
            raise ConfigError(
                "request",
                f"format version {version!r} is not {FORMAT_VERSION}; install the same "
                "airflow-provider-deltamerge version on Airflow and on the Spark cluster",
            )
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(body) - known)
        if unknown:
            raise ConfigError("request", f"unknown field(s) {unknown}")
        if body.get("data_interval") is not None:
            body["data_interval"] = tuple(body["data_interval"])
        return cls(**body)

    def run_load_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of run_load (everything except the data and the Spark session)."""
        from .incremental import Incremental

        interval = self.data_interval
        return {
            "dataset": self.dataset,
            "table_name": self.table_name,
            "write_disposition": self.write_disposition,
            "primary_key": self.primary_key,
            "merge_key": self.merge_key,
            "columns": self.columns,
            "pipeline_name": self.pipeline_name,
            "backend": self.backend,
            "naming": self.naming,
            "incremental": Incremental.from_dict(self.incremental) if self.incremental else None,
            "data_interval": tuple(datetime.fromisoformat(v) for v in interval) if interval else None,
            "run_context": self.run_context,
            "window_overwrite": self.window_overwrite,
            "load_id": self.load_id,
        }

    def run(self, spark: Any = None) -> Any:
        """Run this load with run_load in the current process; returns its LoadInfo."""
        from . import run_load

        return run_load(source_reader(self.source), spark=spark, **self.run_load_kwargs())
