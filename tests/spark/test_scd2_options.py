"""scd2 options beyond dlt (boundary_column, active_column_name) through run_load; option and data errors."""

from __future__ import annotations

import os
from datetime import date, datetime, timezone

import pytest
from deltalake import DeltaTable
from pyspark.sql import types as T

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.errors import ConfigError, MissingKeyColumnError, NullKeyError, SourceError
from tests.helpers import table_version

pytestmark = pytest.mark.spark

UTC = timezone.utc
SCD2 = {"disposition": "merge", "strategy": "scd2"}
L1, L2, L3 = "1704067200.000000", "1704153600.000000", "1704240000.000000"  # 2024-01-01, -02, -03 UTC
D1, D2, D3 = (datetime(2024, 1, day, tzinfo=UTC) for day in (1, 2, 3))
HIGH = datetime(9999, 12, 31, tzinfo=UTC)


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def rows_of(path: str, columns: tuple[str, ...]) -> list[tuple]:
    rows = DeltaTable(path).to_pyarrow_table(columns=list(columns)).to_pylist()
    return sorted((tuple(r[c] for c in columns) for r in rows), key=repr)


def load(spark, dataset, rows, load_id=None, table="dim", **options):
    merge_key = options.pop("merge_key", None)
    return run_load(
        rows,
        spark=spark,
        dataset=dataset,
        table_name=table,
        load_id=load_id,
        write_disposition={**SCD2, **options},
        merge_key=merge_key,
    )


# -- boundary_column --------------------------------------------------------------------------------


def test_boundary_column_sets_valid_from_and_the_replaced_versions_valid_to(spark, dataset):
    options = {"merge_key": "id", "boundary_column": "updated_at"}
    load(
        spark,
        dataset,
        [
            {"id": 1, "v": "a", "updated_at": utc(2023, 5, 1)},
            {"id": 2, "v": "b", "updated_at": utc(2023, 6, 1, 12)},
        ],
        L1,
        **options,
    )
    second = load(
        spark,
        dataset,
        [
            {"id": 1, "v": "a2", "updated_at": utc(2023, 7, 1, 8, 30)},
            {"id": 2, "v": "b", "updated_at": utc(2023, 6, 1, 12)},
            {"id": 3, "v": "c", "updated_at": utc(2023, 7, 2)},
        ],
        L2,
        **options,
    )
    columns = ("id", "v", "_dlt_valid_from", "_dlt_valid_to", "_dlt_load_id")
    assert rows_of(second.table_path, columns) == sorted(
        [
            (1, "a", utc(2023, 5, 1), utc(2023, 7, 1, 8, 30), L1),
            (1, "a2", utc(2023, 7, 1, 8, 30), None, L2),
            (2, "b", utc(2023, 6, 1, 12), None, L1),  # unchanged
            (3, "c", utc(2023, 7, 2), None, L2),
        ],
        key=repr,
    )
    assert (second.metrics["numTargetRowsInserted"], second.metrics["numTargetRowsUpdated"]) == (2, 1)


@pytest.mark.parametrize(
    "first, second, valid_from, valid_to",
    [
        (date(2023, 5, 1), date(2023, 7, 1), utc(2023, 5, 1), utc(2023, 7, 1)),  # dates are midnight UTC
        (
            "2023-05-01T10:00:00Z",
            "2023-07-01 02:00:00+02:00",
            utc(2023, 5, 1, 10),
            utc(2023, 7, 1),
        ),  # ISO strings
    ],
)
def test_boundary_column_reads_dates_and_iso_strings(spark, dataset, first, second, valid_from, valid_to):
    options = {"merge_key": "id", "boundary_column": "changed", "active_record_timestamp": "9999-12-31"}
    load(spark, dataset, [{"id": 1, "v": "a", "changed": first}], L1, **options)
    info = load(spark, dataset, [{"id": 1, "v": "b", "changed": second}], L2, **options)
    assert rows_of(info.table_path, ("v", "_dlt_valid_from", "_dlt_valid_to")) == [
        ("a", valid_from, valid_to),
        ("b", valid_to, HIGH),
    ]


def test_boundary_column_with_a_partition_key_retires_at_the_partitions_latest_value(spark, dataset):
    options = {"merge_key": "day", "boundary_column": "seen_at"}
    load(
        spark,
        dataset,
        [
            {"day": "d1", "name": "a", "seen_at": utc(2024, 1, 1, 1)},
            {"day": "d1", "name": "b", "seen_at": utc(2024, 1, 1, 2)},
            {"day": "d2", "name": "c", "seen_at": utc(2024, 1, 2, 1)},
        ],
        L1,
        **options,
    )
    info = load(
        spark,
        dataset,
        [
            {"day": "d1", "name": "a", "seen_at": utc(2024, 1, 1, 1)},
            {"day": "d1", "name": "bb", "seen_at": utc(2024, 1, 5)},
        ],
        L2,
        **options,
    )
    assert rows_of(info.table_path, ("day", "name", "_dlt_valid_from", "_dlt_valid_to")) == sorted(
        [
            ("d1", "a", utc(2024, 1, 1, 1), None),
            ("d1", "b", utc(2024, 1, 1, 2), utc(2024, 1, 5)),
            ("d1", "bb", utc(2024, 1, 5), None),
            ("d2", "c", utc(2024, 1, 2, 1), None),
        ],
        key=repr,
    )


@pytest.mark.parametrize(
    "values, message",
    [
        ([utc(2024, 1, 1), None], r"null in 1 row\(s\) and not a readable timestamp in 0 row"),
        (["2024-01-01", "last tuesday"], r"null in 0 row\(s\) and not a readable timestamp in 1 row"),
    ],
)
def test_boundary_column_values_must_all_be_timestamps(spark, dataset, values, message):
    options = {"merge_key": "id", "boundary_column": "updated_at"}
    first = load(spark, dataset, [{"id": 9, "updated_at": values[0]}], L1, **options)
    batch = [{"id": i, "updated_at": value} for i, value in enumerate(values)]
    with pytest.raises(SourceError, match=message):
        load(spark, dataset, batch, L2, **options)
    assert table_version(first.table_path) == 0


def test_boundary_column_must_be_in_the_data(spark, dataset):
    with pytest.raises(
        SourceError, match="boundary_column 'updated_at' is not in the data; columns present: id"
    ):
        load(spark, dataset, [{"id": 1}], L1, merge_key="id", boundary_column="UpdatedAt")
    assert not os.path.exists(f"{dataset}/dim")


# -- active_column_name -----------------------------------------------------------------------------


@pytest.mark.parametrize("merge_key, marker", [(None, None), ("id", "9999-12-31")])
def test_active_flag_follows_valid_to(spark, dataset, merge_key, marker):
    options = {"active_column_name": "IsCurrent", "merge_key": merge_key, "active_record_timestamp": marker}
    load(spark, dataset, [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], L1, **options)
    load(spark, dataset, [{"id": 1, "v": "a2"}, {"id": 2, "v": "b"}], L2, **options)
    info = load(spark, dataset, [{"id": 1, "v": "a"}, {"id": 2, "v": "b2"}], L3, **options)
    active = None if marker is None else HIGH
    assert rows_of(info.table_path, ("id", "v", "_dlt_valid_from", "_dlt_valid_to", "is_current")) == sorted(
        [
            (1, "a", D1, D2, False),
            (1, "a2", D2, D3, False),
            (1, "a", D3, active, True),
            (2, "b", D1, D3, False),
            (2, "b2", D3, active, True),
        ],
        key=repr,
    )


def test_scd2_column_options_must_match_an_existing_table(spark, dataset):
    first = load(spark, dataset, [{"id": 1, "v": "a"}], L1)
    with pytest.raises(ConfigError, match="table 'dim' has no column 'is_current'") as caught:
        load(spark, dataset, [{"id": 1, "v": "b"}], L2, active_column_name="is_current")
    assert caught.value.argument == "active_column_name"
    with pytest.raises(ConfigError, match="has no column 'valid_from'") as caught:
        load(spark, dataset, [{"id": 1, "v": "b"}], L2, validity_column_names=["valid_from", "valid_to"])
    assert caught.value.argument == "validity_column_names"
    run_load(
        [{"id": 1, "v": "a"}], spark=spark, dataset=dataset, table_name="plain", write_disposition="append"
    )
    with pytest.raises(ConfigError, match="table 'plain' has no column '_dlt_valid_from'"):
        load(spark, dataset, [{"id": 1, "v": "b"}], L2, table="plain", merge_key="id")
    assert table_version(first.table_path) == 0


# -- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, argument, message",
    [
        (
            {"active_record_timestamp": "someday"},
            "active_record_timestamp",
            "not a date or an ISO 8601 timestamp",
        ),
        ({"boundary_timestamp": "2024-02-30"}, "boundary_timestamp", "not a date or an ISO 8601 timestamp"),
        ({"validity_column_names": ["valid_from"]}, "validity_column_names", "list of two column names"),
        ({"boundary_column": "updated_at"}, "boundary_column", "needs a merge_key"),
        (
            {"boundary_column": "u", "boundary_timestamp": "2024-01-01", "merge_key": "id"},
            "boundary_column",
            "cannot be combined with boundary_timestamp",
        ),
        ({"active_column_name": "_dlt_valid_from"}, "active_column_name", "also a validity column"),
    ],
)
def test_bad_options_fail_before_anything_is_read_or_written(spark, dataset, options, argument, message):
    def source(spark, window):
        raise AssertionError("the source must not be read when the options are invalid")

    with pytest.raises(ConfigError, match=message) as caught:
        load(spark, dataset, source, **options)
    assert caught.value.argument == argument
    assert not os.path.exists(dataset)


def test_own_version_column_must_be_present_and_not_null(spark, dataset):
    with pytest.raises(
        MissingKeyColumnError, match="row_version_column_name column 'row_hash' is not in the data"
    ):
        load(spark, dataset, [{"id": 1}], L1, row_version_column_name="row_hash")
    with pytest.raises(NullKeyError, match="row_version_column_name column 'row_hash' is null in 1 row"):
        load(
            spark,
            dataset,
            [{"id": 1, "row_hash": "x"}, {"id": 2, "row_hash": None}],
            L1,
            row_version_column_name="row_hash",
        )
    assert not os.path.exists(f"{dataset}/dim")


def test_a_data_column_named_like_a_validity_column_is_refused(spark, dataset):
    schema = T.StructType(
        [T.StructField("id", T.LongType()), T.StructField("_dlt_valid_to", T.TimestampType())]
    )
    batch = spark.createDataFrame([(1, None)], schema)
    with pytest.raises(SourceError, match="has a column '_dlt_valid_to', which scd2 writes itself"):
        load(spark, dataset, batch, L1)
    assert not os.path.exists(f"{dataset}/dim")
