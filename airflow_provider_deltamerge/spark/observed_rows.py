"""Rows carried out of a pass: the rows of a small batch that a condition picks, collected by the pass that
computes the batch (an observed metric of that pass, beside the pass's other observed aggregates, held in
the driver's JVM as Spark's own rows) and handed back as a DataFrame over them, so reading them is neither
a second read of the source nor a cache of the whole batch filled on the way.

Spark converts them back with the session's own types (as `createDataFrame` of rows): a timestamp, a
decimal or a nested value comes back as the pass computed it.

Only where the batch is small (Spark estimates it at CARRIED_ESTIMATE_BYTES or less: every row picked would
be held, each as a JVM object, until the load reads them) on a classic session with PySpark 4; elsewhere
`carries` says no and the caller keeps the batch in Spark's cache instead (spark/held.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyspark
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from ..model.naming import backticked
from .profile import Profile, estimated_bytes, is_connect, profile_of

CARRIED_ESTIMATE_BYTES = 8 * 2**20
_ROWS = "carried:rows"  # the observation's last field
_SEPARATOR = ","  # between counts


def carries(df: DataFrame) -> bool:
    """Whether the rows `df`'s pass picks can be carried out of it (see the module)."""
    if is_connect(df) or int(pyspark.__version__.split(".")[0]) < 4:
        return False
    estimate = estimated_bytes(df)
    return estimate is not None and estimate <= CARRIED_ESTIMATE_BYTES


@dataclass(frozen=True)
class Carried:
    """The aggregates observed on the first pass over a DataFrame and the rows it picked, once that pass
    has run. Call either only once a pass is known to have run: Spark waits for one until it does."""

    observation: Observation
    df: DataFrame  # the DataFrame observed, for its session

    def ran(self) -> bool:
        """Whether a pass has run and observed (Spark 4 completes the observation with the action)."""
        try:
            return bool(self.observation._jo.future().isCompleted())
        except Exception:  # a Spark that does not say
            return False

    def profile(self) -> Profile | None:
        """The pass's counts (the rows stay in the JVM), read in one call; None where the pass observed
        nothing (a plan Spark optimised to no rows)."""
        observed = self.observation._jo.getRow()
        if observed.length() == 0:
            return None
        names = [field["name"] for field in json.loads(observed.schema().json())["fields"]][:-1]
        counts = observed.toSeq().take(len(names)).mkString(_SEPARATOR).split(_SEPARATOR)
        return profile_of({n: None if c == "null" else int(c) for n, c in zip(names, counts, strict=True)})

    def rows(self, expected: int) -> DataFrame | None:
        """The rows the pass picked, as a DataFrame over them; None where it picked other than `expected`
        rows (a pass that saw part of the batch)."""
        observed = self.observation._jo.getRow()
        picked = observed.getList(observed.fieldIndex(_ROWS))
        if picked.size() != expected:
            return None
        from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

        schema = observed.schema().apply(_ROWS).dataType().elementType()  # the rows' own, as Spark typed them
        spark = self.df.sparkSession
        return ClassicDataFrame(spark._jsparkSession.createDataFrame(picked, schema), spark)


def carried(
    df: DataFrame, counts: list[Column], condition_sql: str, row_sql: str
) -> tuple[DataFrame, Carried]:
    """(`df` observing the rows it has and `counts` (aggregates of whole numbers) on its first pass and
    carrying out of it the rows meeting the condition, as the struct `row_sql` makes of each; what it
    observed and carried). One observation: each one more is more work a fresh process compiles."""
    observation = Observation()
    picked = F.expr(f"collect_list(CASE WHEN {condition_sql} THEN {row_sql} END) AS {backticked(_ROWS)}")
    observed = df.observe(observation, F.count(F.lit(1)).alias("rows"), *counts, picked)
    return observed, Carried(observation, df)
