"""The extract step: the batch as a Spark DataFrame, from a source spec, a DataFrame or a list of dicts.

A list of dicts goes through Arrow, typed the way a data engineer expects; a source spec (see
`model.sources`) is read with the session's readers, its SQL bound to the load's window.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa

from ..errors import ConfigError, SourceError
from ..model.sources import WINDOW_PARAMETERS, source_kind
from .arrow_values import column_array, in_micros

_PARAMETER_RE = {name: re.compile(rf":{name}\b") for name in WINDOW_PARAMETERS}
_SPARK_TAKES_ARROW = int(importlib.metadata.version("pyspark").split(".")[0]) >= 4


ACCEPTED_DATA = "a Spark DataFrame, a pandas DataFrame, a list of dicts, or a callable (spark, window)"


def check_data(data: Any) -> None:
    """Refuse data no load can read, before anything is read or written."""
    if (
        data is None
        or isinstance(data, (str, bytes, dict))
        or not (callable(data) or _is_spark(data) or _is_pandas(data) or isinstance(data, (list, tuple)))
    ):
        raise SourceError(f"data is a {type(data).__name__}; pass {ACCEPTED_DATA}")


def is_rows(data: Any) -> bool:
    """Whether the data is Python rows (a list of dicts), which dlt's normaliser shapes."""
    return isinstance(data, (list, tuple))


def to_dataframe(spark, data, normalizer=None, values: ValueRules | None = None):
    """The batch as a DataFrame: a DataFrame as is, a pandas DataFrame or a list of dicts through Arrow
    (a list's keys unioned in order; naive timestamps read as UTC in both). `normalizer`
    (`spark.normalize.RowNormalizer`) shapes a list's rows first, as dlt's normaliser does; `values`
    says which columns hold declared decimals and which must keep every digit (`spark.arrow_values`)."""
    check_data(data)
    values = values or ValueRules()
    if _is_spark(data):
        return data
    if _is_pandas(data):
        return arrow_to_spark(
            spark, in_micros(pandas_to_arrow(data, values), values.exact)
        )  # Delta keeps microseconds
    rows = list(data)
    rows = normalizer.rows(rows) if normalizer is not None else rows
    return arrow_to_spark(spark, in_micros(rows_to_arrow(rows, values), values.exact))


@dataclass(frozen=True)
class ValueRules:
    """What turning values into Arrow needs of the load, by stored column name: each declared decimal
    column's Arrow type, the key columns that name a row in a message, and the columns that must keep
    every digit (`spark.identifying`). `normalize` gives a source's names (pandas) as stored."""

    decimals: dict[str, pa.DataType] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    identifying: frozenset[str] = frozenset()
    normalize: Callable[[str], str] = str

    def exact(self, name: str) -> bool:
        return name in self.identifying or self.normalize(name) in self.identifying

    def decimal(self, name: str) -> pa.DataType | None:
        return self.decimals.get(name) or self.decimals.get(self.normalize(name))


def pandas_to_arrow(frame, values: ValueRules) -> pa.Table:
    """A pandas DataFrame as Arrow; its columns of Python decimals (or declared decimal) built exactly
    (`spark.arrow_values`), the rest as pandas converts them."""
    decimals = [
        name
        for name in frame.columns
        if frame[name].dtype == object
        and (values.decimal(str(name)) is not None or any(isinstance(v, Decimal) for v in frame[name]))
    ]
    table = pa.Table.from_pandas(frame.drop(columns=decimals), preserve_index=False)
    for name in decimals:
        column = [None if _missing(v) else v for v in frame[name].tolist()]
        array = column_array(str(name), column, values.decimal(str(name)), lambda i: {"row": i})
        table = table.add_column(list(frame.columns).index(name), str(name), array)
    return table


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def arrow_to_spark(spark, table: pa.Table):
    """An Arrow table as a DataFrame: directly on Spark 4; Spark 3.5 takes its rows with the schema."""
    if _SPARK_TAKES_ARROW:
        return spark.createDataFrame(table)
    from pyspark.sql.pandas.types import from_arrow_schema

    micros = pa.schema([_in_micros(f) for f in table.schema])  # nanoseconds come back as pandas objects
    rows = table.cast(micros, safe=False).to_pylist()
    return spark.createDataFrame(rows, schema=from_arrow_schema(micros))


def _is_spark(data: Any) -> bool:
    return hasattr(data, "sparkSession")


def _is_pandas(data: Any) -> bool:
    return type(data).__module__.startswith("pandas") and hasattr(data, "to_numpy")


def _in_micros(field: pa.Field) -> pa.Field:
    if pa.types.is_timestamp(field.type):
        return field.with_type(pa.timestamp("us", tz=field.type.tz))
    return field


def rows_to_arrow(rows: list[dict], values: ValueRules | None = None) -> pa.Table:
    """Columns are the union of the rows' keys in order of first appearance; a missing key is null.

    Naive datetimes are read as UTC (as dlt does); a column whose values Arrow cannot type as one kind
    (say ints and strings) fails with the column's name, as does a value no Arrow type holds exactly
    (`spark.arrow_values`).
    """
    values = values or ValueRules()
    columns: dict[str, None] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise SourceError(
                f"row {i} is a {type(row).__name__}, not a dict; pass a list of dicts or a DataFrame"
            )
        columns.update(dict.fromkeys(row))

    def row_key(position: int) -> dict:
        named = {key: rows[position].get(key) for key in values.keys if key in rows[position]}
        return named or {"row": position}

    arrays = {}
    for name in columns:
        column = [row.get(name) for row in rows]
        declared = values.decimals.get(name)
        try:
            array = column_array(name, column, declared, row_key, values.exact(name))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SourceError(
                f"column {name!r} mixes value types that cannot share one column: {exc}"
            ) from exc
        arrays[name] = array  # naive timestamps read as UTC by `in_micros`
    return pa.table(arrays) if arrays else pa.table({})


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
        return _read_files(spark, source)
    if kind == "table":
        return spark.table(source["table"])
    if kind == "sql":
        return _read_sql(spark, source["sql"], window)
    return load_callable(source["callable"])(spark, window)


def _read_files(spark: Any, source: dict[str, Any]) -> Any:
    """A reader spec's DataFrame; a path Spark cannot open is named in one readable line."""
    reader = spark.read.format(source["format"]).options(**source.get("options", {}))
    if "path" not in source:
        return reader.load()
    path = source["path"]
    try:
        return reader.load(path)
    except Exception as exc:  # pyspark's AnalysisException, or py4j's error for a file system it lacks
        text = str(exc)
        if "PATH_NOT_FOUND" in text or "Path does not exist" in text:
            raise SourceError(f"source path {path!r} does not exist; nothing was loaded") from None
        if "No FileSystem for scheme" in text or "UnsupportedFileSystemException" in text:
            raise SourceError(
                f"source path {path!r} uses a scheme this Spark session has no file system for; "
                "nothing was loaded. Use a local path or a scheme whose connector is on the cluster "
                "(s3a://, abfss://, gs://, hdfs://)"
            ) from None
        raise


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
