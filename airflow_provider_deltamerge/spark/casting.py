"""The batch cast to its declared column schema (`columns=` data types), and checked before anything commits.

Spark's casts (without ANSI mode) turn a value they cannot convert into NULL, and integer casts wrap
around; so every cast is checked: a non-null value that comes out NULL or changed is refused, naming
the column, the value and the row's key. Declared columns the batch lacks are added as typed NULLs, and
a NULL in a column declared `nullable: False` is refused.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import CastError, NullValueError, SchemaError, TruncationWarning
from ..model.columns import ColumnSchema, storage_type
from ..model.naming import HELPER_PREFIX, backticked
from .names import col

TIME_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?$"  # 'HH:MM:SS[.ffffff]'
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
_SIMPLE_TYPES = {
    "string": T.StringType,
    "tinyint": T.ByteType,
    "smallint": T.ShortType,
    "int": T.IntegerType,
    "bigint": T.LongType,
    "double": T.DoubleType,
    "boolean": T.BooleanType,
    "timestamp": T.TimestampType,
    "timestamp_ntz": T.TimestampNTZType,
    "date": T.DateType,
    "binary": T.BinaryType,
}
_NANOS = r"[.,][0-9]{6}[0-9]*[1-9]"  # text whose fraction of a second has a digit past microseconds
_TIMESTAMPS = (T.TimestampType, T.TimestampNTZType)
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_NESTED = (T.StructType, T.ArrayType, T.MapType)
_BAD = HELPER_PREFIX + "bad_"
KEY_SHOWN_COLUMNS = 5  # columns shown as a row's key where the load has no key


def spark_type(column: ColumnSchema) -> T.DataType:
    """The Spark type a declared column is stored as (see `model.columns.storage_type`)."""
    name = storage_type(column)
    decimal = _DECIMAL.fullmatch(name)
    if decimal:
        return T.DecimalType(int(decimal.group(1)), int(decimal.group(2)))
    return _SIMPLE_TYPES[name]()


def cast_to_declared(
    df: DataFrame,
    declared: dict[str, ColumnSchema],
    key: tuple[str, ...],
    table: str,
    exact: frozenset[str] = frozenset(),
) -> DataFrame:
    """The batch with each declared column in its declared type (absent ones as typed NULLs); raises
    CastError for a value that cannot be stored so, NullValueError for a NULL in a required column.
    Text with nanoseconds cast to a timestamp loses them with a TruncationWarning, or is refused in the
    `exact` columns (`spark.identifying`)."""
    present = {f.name: f.dataType for f in df.schema.fields}
    casts: dict[str, Column] = {}
    losses: dict[str, Column] = {}
    dropped: dict[str, Column] = {}
    for name, column in declared.items():
        if column.data_type is None:
            continue
        target = spark_type(column)
        if name not in present:
            casts[name] = F.lit(None).cast(target)
            continue
        cast, lost = _cast(name, present[name], column, target)
        _check_castable(df, name, cast, column, present[name], table)
        casts[name], losses[name] = cast, lost
        if isinstance(target, _TIMESTAMPS) and isinstance(present[name], T.StringType):
            if name in exact:
                losses[name] = lost | col(name).rlike(_NANOS)
            else:
                dropped[name] = col(name).rlike(_NANOS)
    _refuse_losses(df, losses, declared, key)
    _warn_of_nanoseconds(df, dropped)
    typed = df.withColumns(casts) if casts else df
    required = [name for name, column in declared.items() if column.required]
    _refuse_nulls(typed, required, key)
    return typed


def _cast(name: str, source_type: T.DataType, column: ColumnSchema, target: T.DataType):
    """(the cast value, a condition true where the cast lost the value) of one declared column."""
    data_type, source = column.data_type, col(name)
    if isinstance(source_type, _NESTED) and data_type in ("json", "text"):
        return F.to_json(source, {"ignoreNullFields": "false"}), F.lit(False)  # nulls kept, as dlt does
    if data_type == "time":
        if isinstance(source_type, (T.TimestampType, T.TimestampNTZType)):
            return F.date_format(source, "HH:mm:ss.SSSSSS"), F.lit(False)
        text = source.cast("string") if isinstance(source_type, T.StringType) else F.lit(None).cast("string")
        kept = F.when(text.rlike(TIME_PATTERN), text)
        return kept, source.isNotNull() & kept.isNull()
    cast = _try_cast(name, target)
    if isinstance(target, T.TimestampNTZType) and isinstance(source_type, T.StringType):
        # text with an offset is an instant: its wall time in the session's zone (UTC in our sessions)
        cast = _try_cast(name, T.TimestampType()).cast(target)
    if data_type == "timestamp" and column.precision is not None and column.precision < 6:
        cast = _truncated(cast, column.precision, target)
    changed = _changed(name, source_type, cast, target)
    if isinstance(target, T.DecimalType):
        changed = _decimal_lost(name, source_type, cast, target)
    return cast, source.isNotNull() & (cast.isNull() | changed)


def _warn_of_nanoseconds(df: DataFrame, dropped: dict[str, Column]) -> None:
    if not dropped:
        return
    examples = (F.max(F.when(lost, col(name))).alias(name) for name, lost in dropped.items())
    found = df.select(*examples).first()
    for name in dropped:
        if found[name] is not None:
            warnings.warn(
                f"column {name!r} holds nanoseconds (e.g. {found[name]!r}); Delta stores microseconds, so "
                "they are dropped",
                TruncationWarning,
                stacklevel=3,
            )


def _decimal_lost(name: str, source_type: T.DataType, cast: Column, target: T.DecimalType) -> Column:
    """Whether a cast to a decimal rounded the number (Spark rounds to the scale without a word)."""
    source = col(name)
    if isinstance(source_type, T.StringType):
        text = F.trim(source)
        beyond_scale = text.rlike(rf"^[+-]?[0-9]*\.[0-9]{{{target.scale}}}[0-9]*[1-9]")
        exponent = text.rlike("[eE]") & (cast.cast("double") != _try_cast(name, T.DoubleType()))
        return beyond_scale | exponent
    if isinstance(source_type, T.DecimalType):  # digits past the target's scale (too many before: NULL)
        return F.round(source, target.scale) != source if source_type.scale > target.scale else F.lit(False)
    if isinstance(source_type, (T.FloatType, T.DoubleType)):
        return cast.cast(source_type) != source  # a decimal is always a double (NaN, inf: NULL)
    return F.lit(False)


def _try_cast(name: str, target: T.DataType) -> Column:
    """The column cast to `target`, NULL where it cannot be (whether or not Spark runs in ANSI mode)."""
    return F.expr(f"try_cast({backticked(name)} AS {target.simpleString()})")


def _changed(name: str, source_type: T.DataType, cast: Column, target: T.DataType) -> Column:
    """Whether an integer cast changed the number (a fraction dropped)."""
    if not isinstance(target, _INTEGRAL):
        return F.lit(False)
    if isinstance(source_type, T.StringType):
        return cast != _try_cast(name, T.DoubleType())
    if isinstance(source_type, T.NumericType):
        return cast != col(name)  # compared as the wider of the two types
    return F.lit(False)


def _truncated(timestamp: Column, precision: int, target: T.DataType) -> Column:
    """The timestamp cut to `precision` digits of a second."""
    unit = 10 ** (6 - precision)
    zoned = timestamp if isinstance(target, T.TimestampType) else timestamp.cast(T.TimestampType())
    micros = F.unix_micros(zoned)
    cut = F.timestamp_micros(micros - F.pmod(micros, F.lit(unit)))
    return cut if isinstance(target, T.TimestampType) else cut.cast(target)


def _check_castable(df: DataFrame, name: str, cast: Column, column: ColumnSchema, source_type, table) -> None:
    """Spark refuses some casts outright (a date to a bigint, say): say so for the column."""
    try:
        df.select(cast.alias(name)).schema  # noqa: B018 - analysing the cast is the check
    except Exception as exc:  # pyspark's AnalysisException, whose module moved between versions
        declared = storage_type(column)
        raise SchemaError(
            table,
            name,
            declared,
            source_type.simpleString(),
            reason=f"column {name!r} is declared {column.data_type} ({declared}), but the batch has "
            f"{source_type.simpleString()}, which Spark cannot cast to it. Nothing was loaded. "
            f"Change the column's data_type or cast it in the source. ({type(exc).__name__})",
        ) from None


def _refuse_losses(
    df: DataFrame, losses: dict[str, Column], declared: dict[str, ColumnSchema], key: tuple[str, ...]
) -> None:
    if not losses:
        return
    flags = {f"{_BAD}{i}": lost for i, lost in enumerate(losses.values())}
    any_lost = F.lit(False)
    for flag in flags:
        any_lost = any_lost | F.col(flag)
    checked = df.select("*", *(lost.alias(flag) for flag, lost in flags.items()))
    row = checked.where(any_lost).limit(1).collect()
    if not row:
        return
    found = row[0].asDict()
    for flag, name in zip(flags, losses, strict=True):
        if found[flag]:
            raise CastError(name, found[name], storage_type(declared[name]), _row_key(found, key))


def _refuse_nulls(df: DataFrame, required: list[str], key: tuple[str, ...]) -> None:
    if not required:
        return
    absent = [name for name in required if name not in df.columns]
    if absent:  # declared without a type and missing: NULL in every row
        example = df.limit(1).collect()
        if example:
            raise NullValueError(absent[0], _row_key(example[0].asDict(), key), df.count())
        return
    counts = df.select(*(F.count(F.when(col(n).isNull(), 1)).alias(n) for n in required)).first()
    for name in required:
        if counts[name]:
            example = df.where(col(name).isNull()).limit(1).collect()[0].asDict()
            raise NullValueError(name, _row_key(example, key), counts[name])


def _row_key(row: dict[str, Any], key: tuple[str, ...]) -> dict[str, Any]:
    """The row's key values, or its first columns where the load has no key."""
    shown = [k for k in key if k in row] or [c for c in row if not c.startswith(HELPER_PREFIX)]
    return {name: row[name] for name in shown[:KEY_SHOWN_COLUMNS]}
