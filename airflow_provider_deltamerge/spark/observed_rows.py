"""Rows of a batch observed on the pass that computes it: the few rows a load sets aside (a quarantine),
collected as an observed metric of staging's one pass (`DataFrame.observe`), so no second job reads the
source for them.

The rows are taken from the metric in the JVM and made a DataFrame there, of the exact types Spark
computed (no value passes through Python). Only where Spark's own estimate of the batch is known and
small (at most ROWS_ESTIMATE_BYTES: even every row set aside then fits the driver, as staging's own
collection of a batch does), on a classic session of PySpark 4 (Spark Connect and PySpark 3.5 hand
observed values to Python only); elsewhere the caller computes them by a job of their own.
"""

from __future__ import annotations

from collections.abc import Callable

import pyspark
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from . import profile

ROWS_ESTIMATE_BYTES = 64 * 2**20  # as load/staged_arrow.py's COLLECT_ESTIMATE_BYTES
_ROW = "row"


def with_observed_rows(
    df: DataFrame, condition: Column, columns: list[Column]
) -> tuple[DataFrame, Callable[[], DataFrame] | None]:
    """(`df` carrying the rows meeting `condition`, as `columns`, as an observed metric; a function
    returning them as a DataFrame once an action over `df` ran and its pass saw every row), or (df, None)
    where they cannot be observed (see the module)."""
    if profile.is_connect(df) or int(pyspark.__version__.split(".")[0]) < 4:
        return df, None
    estimate = profile.estimated_bytes(df)
    if estimate is None or estimate > ROWS_ESTIMATE_BYTES:
        return df, None
    from pyspark.sql import Observation

    row = F.struct(*columns)
    schema = df.select(row.alias(_ROW)).schema[_ROW].dataType  # analysis only: no job
    observation = Observation()
    observed = df.observe(observation, F.collect_list(F.when(condition, row)).alias(_ROW))

    def rows() -> DataFrame:
        session = df.sparkSession
        jsession = session._jsparkSession
        found = observation._jo.getRow().getList(0)  # java.util.List of Rows, as Spark computed them
        return DataFrame(jsession.createDataFrame(found, jsession.parseDataType(schema.json())), session)

    return observed, rows
