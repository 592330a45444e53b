"""The profile staging reads from a collected batch's Arrow rows equals the one Spark aggregates over the
same rows (spark/arrow_profile.py beside spark/profile.py): row and null counts, dates Delta readers
cannot read back, key bounds and partition folder names, in any session time zone, dates at and beyond
the storable limits included."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge.delta.arrow_stream import collected
from airflow_provider_deltamerge.spark import arrow_profile, profile

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

DAY_MICROS = 86_400_000_000
LIMIT_DAYS = (-719_162, 2_932_896)  # 0001-01-01 and 9999-12-31, in days since the epoch
DAYS = st.one_of(
    st.integers(-800_000, 3_000_000),
    st.sampled_from(LIMIT_DAYS).flatmap(lambda day: st.integers(day - 2, day + 2)),
)
MICROS = st.tuples(DAYS, st.integers(0, DAY_MICROS - 1)).map(lambda t: t[0] * DAY_MICROS + t[1])
TEXT = st.text(st.sampled_from("aZ09._~- /%=éß€😀\x00"), max_size=6)
ROWS = st.lists(
    st.tuples(
        st.none() | st.integers(-(2**63), 2**63 - 1),
        st.none() | TEXT,
        st.none() | DAYS,
        st.none() | MICROS,
        st.none() | MICROS,
    ),
    max_size=12,
)
COLUMNS = ["id", "name", "day", "ts", "ntz"]
FOLDERS = ["name"]


def batch(spark, rows):
    raw = spark.createDataFrame(rows, "id long, name string, d int, t long, n long")
    return raw.selectExpr(
        "id",
        "name",
        "date_from_unix_date(d) AS day",
        "timestamp_micros(t) AS ts",
        "CAST(from_utc_timestamp(timestamp_micros(n), current_timezone()) AS TIMESTAMP_NTZ) AS ntz",
    )


@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati", "America/Los_Angeles"])
def test_arrow_counts_and_bounds_equal_sparks(spark, zone):
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        same_profile(spark)
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def same_profile(spark):
    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(rows=ROWS)
    def check(rows):
        df = batch(spark, rows)
        dates = profile.date_columns(df)
        aggregates = profile.null_counts(df, COLUMNS) + profile.unstorable_date_counts(df)
        aggregates += profile.key_bounds(df, COLUMNS) + profile.partition_folder_bytes(df, tuple(FOLDERS))
        by_spark = profile.aggregated(df, aggregates)
        by_arrow = arrow_profile.profiled(collected(spark, "probe", df), COLUMNS, dates, COLUMNS, FOLDERS)
        if by_arrow is None:  # a zoned timestamp a day from a limit: the caller asks Spark
            assert any(abs(t // DAY_MICROS - day) <= 1 for *_, t, _ in rows if t for day in LIMIT_DAYS)
            return
        assert by_arrow.rows == by_spark.rows == len(rows)
        for name in [f"null:{c}" for c in COLUMNS] + [f"dates:{c}" for c in dates] + ["folder:name"]:
            assert by_arrow.get(name) == by_spark.get(name), name
        if not any(by_spark.get(f"dates:{c}") for c in dates):  # bounds are read only of storable dates
            assert profile.key_ranges(df, by_arrow, COLUMNS) == profile.key_ranges(df, by_spark, COLUMNS)

    check()
