"""What staging learns about a batch while computing it: counts, null keys, dates Delta readers cannot
read back, the range of each key column and the bytes of its text, all from the one pass that
materialises the batch.

On a classic SparkSession (PySpark 3.5 or 4), and on Spark Connect from PySpark 4 (whose client
receives a pass's observed metrics with its result), the aggregates ride on that pass as observed
metrics (`DataFrame.observe`), so the source is computed once and no second job reads it. On Spark
Connect with PySpark 3.5 the aggregates after staging are one job over the materialised batch, and
those of the raw batch one job over the source.

Every aggregate is a number or text: PySpark 3.5 hands observed dates to Python as Java objects, so the
bounds of date and timestamp_ntz keys are observed as their ISO text and parsed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

import pyspark
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..model.naming import backticked
from ..plan.pruning import KeyRange
from . import held

DATE_TYPES = (T.DateType, T.TimestampType, T.TimestampNTZType)
_RANGED_TYPES = (T.IntegralType, T.StringType, T.DateType, T.TimestampType, T.TimestampNTZType)
_TEXT_TYPES = (T.StringType, T.BinaryType)
STORABLE_DATES = ("0001-01-01", "9999-12-31")  # what every Delta reader (Python, Arrow) can read back


@dataclass(frozen=True)
class Profile:
    rows: int
    values: dict[str, Any]  # aggregate name -> value

    def get(self, name: str, default: Any = 0) -> Any:
        value = self.values.get(name)
        return default if value is None else value


def is_connect(df: DataFrame) -> bool:
    return type(df).__module__.startswith("pyspark.sql.connect")


def observes_in_pass(df: DataFrame) -> bool:
    """Whether aggregates can ride on the materialising pass: a classic session, or Spark Connect with
    PySpark 4 (PySpark 3.5's Connect client observes nothing)."""
    return not is_connect(df) or int(pyspark.__version__.split(".")[0]) >= 4


# The estimate up to which a batch (or the quarantined rows) is collected to the driver whole: Spark's
# estimates undercount text several-fold, so well below the 256 MiB a driver is given by default.
COLLECT_ESTIMATE_BYTES = 64 * 2**20


def estimated_bytes(df: DataFrame) -> int | None:
    """Spark's own estimate of the DataFrame's size (its optimizer's statistics), at most its rows times
    Spark's width of a row where the load counted them (spark/held.py); None where Spark has none
    (sources of unknown size, such as RDDs) or cannot say (Spark Connect with PySpark 3.5)."""
    try:
        if is_connect(df):  # the statistics the server's optimizer shows in a cost explain
            estimate = _explained_size(df._explain_string(mode="cost"))
        else:
            plan = df._jdf.queryExecution().optimizedPlan()
            estimate = int(str(plan.stats().sizeInBytes()))
            rows = held.rows_under(plan)
            if rows is not None:  # Spark's row: 8 bytes and each column's default size
                estimate = min(estimate, rows * (8 + int(plan.schema().defaultSize())))
    except Exception:  # a plan Spark cannot size, or a client that cannot ask
        return None
    unknown = int(df.sparkSession.conf.get("spark.sql.defaultSizeInBytes", str(2**63 - 1)))
    return None if estimate is None or estimate >= unknown else estimate


_SIZE_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50, "EiB": 2**60}
_EXPLAINED_SIZE = re.compile(r"Statistics\(sizeInBytes=([\d.]+) ?([KMGTPE]?i?B)")


def _explained_size(explained: str) -> int | None:
    """The size of the optimized plan's root in a cost explain ("Statistics(sizeInBytes=4.6 MiB, ...)")."""
    optimized = explained.split("== Optimized Logical Plan ==", 1)[-1]
    found = _EXPLAINED_SIZE.search(optimized)
    if found is None:
        return None
    return int(float(found.group(1)) * _SIZE_UNITS[found.group(2)])


def with_observed(df: DataFrame, aggregates: list[Column]):
    """(df carrying the aggregates as observed metrics, a function returning them after an action)."""
    from pyspark.sql import Observation

    observation = Observation()
    observed = df.observe(observation, F.count(F.lit(1)).alias("rows"), *aggregates)

    def observed_profile() -> Profile:
        try:
            return profile_of(observation.get)
        except Exception:  # Spark observes nothing on a plan it optimised to no rows (PySpark 3.5: {})
            return aggregated(df, aggregates)

    return observed, observed_profile


def aggregated(df: DataFrame, aggregates: list[Column]) -> Profile:
    """The aggregates as one job over `df`."""
    return profile_of(df.agg(F.count(F.lit(1)).alias("rows"), *aggregates).first().asDict())


def profile_of(values: dict[str, Any]) -> Profile:
    """The Profile of observed or aggregated values: the "rows" count and the other aggregates by name."""
    values = dict(values)
    return Profile(int(values.pop("rows") or 0), values)


# ---- the aggregates ----


# Each aggregate is one SQL expression, parsed by Spark in one call, not built call by call from Python.


def counted_where(condition_sql: str) -> Column:
    """How many rows meet the condition. Not `count_if`: Spark rewrites it to name its condition twice,
    which the observed pass computes as an extra column, dropped by a projection of its own after it."""
    return F.expr(f"sum(IF({condition_sql}, 1, 0))")


def null_counts(df: DataFrame, columns: list[str]) -> list[Column]:
    return [counted_where(f"{backticked(c)} IS NULL").alias(f"null:{c}") for c in columns]


def date_columns(df: DataFrame) -> list[str]:
    return [f.name for f in df.schema.fields if isinstance(f.dataType, DATE_TYPES)]


def _outside_storable_dates_sql(column: str) -> str:
    low, high = STORABLE_DATES
    as_date = f"to_date({backticked(column)})"
    return f"({as_date} < DATE'{low}' OR {as_date} > DATE'{high}')"


def outside_storable_dates(column: str) -> Column:
    return F.expr(_outside_storable_dates_sql(column))


def unstorable_date_counts(df: DataFrame) -> list[Column]:
    return [counted_where(_outside_storable_dates_sql(c)).alias(f"dates:{c}") for c in date_columns(df)]


def ranged_columns(df: DataFrame, columns: tuple[str, ...]) -> list[str]:
    """Key columns whose min and max bound a merge: integers, text, dates and timestamps."""
    types = {f.name: f.dataType for f in df.schema.fields}
    return [c for c in columns if c in types and isinstance(types[c], _RANGED_TYPES)]


def key_bounds(df: DataFrame, columns: list[str]) -> list[Column]:
    """min and max of each column; timestamps as microseconds since the epoch, free of any time zone,
    dates and timestamp_ntz as their ISO text (see the module's note)."""
    aggregates = []
    for column in columns:
        kind = type(df.schema[column].dataType)
        for bound in ("min", "max"):
            value = f"{bound}({backticked(column)})"
            if kind is T.TimestampType:
                value = f"unix_micros({value})"
            elif kind in (T.DateType, T.TimestampNTZType):
                value = f"CAST({value} AS STRING)"
            aggregates.append(F.expr(value).alias(f"{bound}:{column}"))
    return aggregates


def text_bytes(df: DataFrame) -> list[Column]:
    """Bytes of the text and binary columns, for the batch's Arrow size."""
    text = [f.name for f in df.schema.fields if isinstance(f.dataType, _TEXT_TYPES)]
    if not text:
        return []
    lengths = " + ".join(f"coalesce(octet_length({backticked(c)}), 0)" for c in text)
    return [F.expr(f"sum(CAST({lengths} AS BIGINT))").alias("text")]


def text_columns(df: DataFrame, columns: tuple[str, ...]) -> list[str]:
    """Those of `columns` that hold text: the partition columns whose folder names can outgrow a name."""
    text = {f.name for f in df.schema.fields if isinstance(f.dataType, T.StringType)}
    return [c for c in columns if c in text]


def partition_folder_bytes(df: DataFrame, columns: tuple[str, ...]) -> list[Column]:
    """The longest folder name `<column>=<value>` among the batch's values of each text partition column,
    as delta-rs writes it: every byte but the unreserved ASCII characters percent-encoded (3 bytes)."""
    aggregates = []
    for column in text_columns(df, columns):
        value = backticked(column)
        kept = f"length(regexp_replace({value}, '[^A-Za-z0-9._~-]', ''))"
        escaped = f"{kept} + 3 * (octet_length({value}) - {kept})"
        name = len(column.encode("utf-8")) + 1
        aggregates.append(F.expr(f"max({name} + {escaped})").alias(f"folder:{column}"))
    return aggregates


def key_ranges(df: DataFrame, profile: Profile, columns: list[str]) -> tuple[KeyRange, ...]:
    """The profiled min and max of each column as plain values; none for an empty batch."""
    ranges = []
    for column in columns:
        low, high = profile.values.get(f"min:{column}"), profile.values.get(f"max:{column}")
        if low is None or high is None:
            return ()
        parse = _BOUND_PARSERS.get(type(df.schema[column].dataType))
        if parse is not None and not isinstance(low, date):  # read from Arrow: a date or datetime already
            low, high = parse(low), parse(high)
        ranges.append(KeyRange(column, low, high))
    return tuple(ranges)


def _utc_instant(micros: int) -> datetime:
    seconds, fraction = divmod(micros, 1_000_000)
    return datetime.fromtimestamp(seconds, tz=timezone.utc).replace(microsecond=fraction)


def _naive_instant(text: str) -> datetime:
    """Spark's text of a timestamp_ntz ("2024-03-04 10:30:00.5": the fraction without trailing zeros)."""
    whole, _, fraction = text.partition(".")
    instant = datetime.strptime(whole, "%Y-%m-%d %H:%M:%S")
    return instant.replace(microsecond=int(fraction.ljust(6, "0"))) if fraction else instant


_BOUND_PARSERS = {
    T.TimestampType: _utc_instant,
    T.DateType: date.fromisoformat,
    T.TimestampNTZType: _naive_instant,
}


_FIXED_WIDTH = {
    T.BooleanType: 1,
    T.ByteType: 1,
    T.ShortType: 2,
    T.IntegerType: 4,
    T.DateType: 4,
    T.FloatType: 4,
}


def arrow_bytes(df: DataFrame, profile: Profile) -> int:
    """The batch's Arrow size: fixed-width columns by type (8 bytes unless smaller), text by its bytes
    plus offsets. An estimate good to a few percent, known before the transfer."""
    per_row = 0
    for f in df.schema.fields:
        kind = type(f.dataType)
        per_row += 4 if issubclass(kind, _TEXT_TYPES) else _FIXED_WIDTH.get(kind, 8)
    return profile.rows * per_row + int(profile.get("text"))
