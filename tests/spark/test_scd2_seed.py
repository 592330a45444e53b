"""scd2 through run_load: the three-run tables of dlt's merge-loading docs (scd2 section), reproduced exactly.

The docs' boundary timestamps are the load times; giving each run the matching load id makes the
default boundary (the load's time) the docs' value to the microsecond.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.delta.store import read_loads

pytestmark = pytest.mark.spark

UTC = timezone.utc
SCD2 = {"disposition": "merge", "strategy": "scd2"}


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def load_id(moment: datetime) -> str:
    return f"{int(moment.timestamp())}.{moment.microsecond:06d}"


T1, T2, T3 = (
    ts("2024-04-09 18:27:53.734235"),
    ts("2024-04-09 22:13:07.943703"),
    ts("2024-04-10 06:45:22.847403"),
)
RUN_1 = [{"customer_key": 1, "c1": "foo", "c2": 1}, {"customer_key": 2, "c1": "bar", "c2": 2}]
RUN_2 = [{"customer_key": 1, "c1": "foo_updated", "c2": 1}, {"customer_key": 2, "c1": "bar", "c2": 2}]
RUN_3 = [{"customer_key": 1, "c1": "foo_updated", "c2": 1}]
# (valid_from, valid_to, customer_key, c1, c2) after each run, as the docs print them
AFTER_1 = [(T1, None, 1, "foo", 1), (T1, None, 2, "bar", 2)]
AFTER_2 = [(T1, T2, 1, "foo", 1), (T1, None, 2, "bar", 2), (T2, None, 1, "foo_updated", 1)]
AFTER_3 = [(T1, T2, 1, "foo", 1), (T1, T3, 2, "bar", 2), (T2, None, 1, "foo_updated", 1)]


def rows_of(path: str, columns: tuple[str, ...]) -> list[tuple]:
    rows = DeltaTable(path).to_pyarrow_table(columns=list(columns)).to_pylist()
    return sorted((tuple(r[c] for c in columns) for r in rows), key=repr)


def scd2_load(spark, dataset, rows, moment, table="dim_customer", **arguments):
    return run_load(
        rows, spark=spark, dataset=dataset, table_name=table, load_id=load_id(moment), **arguments
    )


def test_full_extract(spark, dataset):
    columns = ("_dlt_valid_from", "_dlt_valid_to", "customer_key", "c1", "c2")
    infos = []
    for rows, moment, expected in ((RUN_1, T1, AFTER_1), (RUN_2, T2, AFTER_2), (RUN_3, T3, AFTER_3)):
        info = scd2_load(spark, dataset, rows, moment, write_disposition=SCD2)
        assert rows_of(info.table_path, columns) == sorted(expected, key=repr)
        infos.append(info)
    assert [(i.metrics["numTargetRowsInserted"], i.metrics["numTargetRowsUpdated"]) for i in infos] == [
        (2, 0),
        (1, 1),
        (0, 1),
    ]
    # unchanged rows keep their load id: customer 2 was loaded once, in run 1, and retired in run 3
    loads = rows_of(infos[0].table_path, ("customer_key", "c1", "_dlt_load_id"))
    assert loads == sorted(
        [(1, "foo", load_id(T1)), (1, "foo_updated", load_id(T2)), (2, "bar", load_id(T1))], key=repr
    )
    assert [r["load_id"] for r in read_loads(dataset)] == [load_id(T1), load_id(T2), load_id(T3)]
    assert [i.table_version for i in infos] == [0, 1, 2]  # one commit per load


def test_natural_key_merge_key_keeps_absent_keys_and_unsetting_it_retires_them(spark, dataset):
    columns = ("_dlt_valid_from", "_dlt_valid_to", "customer_key", "c1", "c2")
    scd2_load(spark, dataset, RUN_1, T1, write_disposition=SCD2, merge_key="customer_key")
    info = scd2_load(spark, dataset, RUN_3, T2, write_disposition=SCD2, merge_key="customer_key")
    assert rows_of(info.table_path, columns) == sorted(AFTER_2, key=repr)  # customer 2 absent, not retired
    assert (info.metrics["numTargetRowsInserted"], info.metrics["numTargetRowsUpdated"]) == (1, 1)
    # the docs' tip: unset the merge key explicitly to retire absent records again
    info = scd2_load(
        spark,
        dataset,
        RUN_3,
        T3,
        write_disposition=SCD2,
        merge_key="customer_key",
        columns={"customer_key": {"merge_key": False}},
    )
    assert rows_of(info.table_path, columns) == sorted(AFTER_3, key=repr)
    assert (info.metrics["numTargetRowsInserted"], info.metrics["numTargetRowsUpdated"]) == (0, 1)


def test_partition_merge_key_retires_absent_rows_only_in_partitions_of_the_batch(spark, dataset):
    p1, p2, p3 = (
        ts("2024-01-02 03:03:35.854305"),
        ts("2024-01-03 03:01:11.943703"),
        ts("2024-01-03 10:30:05.750356"),
    )
    columns = ("_dlt_valid_from", "_dlt_valid_to", "date", "name")
    runs = [
        (p1, [{"date": "2024-01-01", "name": "a"}, {"date": "2024-01-01", "name": "b"}]),
        (p2, [{"date": "2024-01-02", "name": "c"}, {"date": "2024-01-02", "name": "d"}]),
        (p3, [{"date": "2024-01-01", "name": "a"}, {"date": "2024-01-01", "name": "bb"}]),
    ]
    infos = [
        scd2_load(spark, dataset, rows, moment, table="some_data", write_disposition=SCD2, merge_key="date")
        for moment, rows in runs
    ]
    assert rows_of(infos[-1].table_path, columns) == sorted(
        [
            (p1, None, "2024-01-01", "a"),
            (p1, p3, "2024-01-01", "b"),
            (p2, None, "2024-01-02", "c"),
            (p2, None, "2024-01-02", "d"),
            (p3, None, "2024-01-01", "bb"),
        ],
        key=repr,
    )
    assert [(i.metrics["numTargetRowsInserted"], i.metrics["numTargetRowsUpdated"]) for i in infos] == [
        (2, 0),
        (2, 0),
        (1, 1),
    ]


def test_custom_validity_column_names(spark, dataset):
    disposition = {**SCD2, "validity_column_names": ["from", "to"]}
    for rows, moment, expected in ((RUN_1, T1, AFTER_1), (RUN_2, T2, AFTER_2), (RUN_3, T3, AFTER_3)):
        info = scd2_load(spark, dataset, rows, moment, write_disposition=disposition)
        assert rows_of(info.table_path, ("from", "to", "customer_key", "c1", "c2")) == sorted(
            expected, key=repr
        )
    names = DeltaTable(info.table_path).schema().to_arrow().names
    assert "from" in names and "to" in names and not any(n.startswith("_dlt_valid") for n in names)


def test_active_record_timestamp_replaces_null_as_the_active_marker(spark, dataset):
    high = ts("9999-12-31 00:00:00")
    disposition = {**SCD2, "active_record_timestamp": "9999-12-31"}
    columns = ("_dlt_valid_from", "_dlt_valid_to", "customer_key", "c1", "c2")
    for rows, moment, expected in ((RUN_1, T1, AFTER_1), (RUN_2, T2, AFTER_2), (RUN_3, T3, AFTER_3)):
        info = scd2_load(spark, dataset, rows, moment, write_disposition=disposition)
        with_marker = [(f, high if t is None else t, *rest) for f, t, *rest in expected]
        assert rows_of(info.table_path, columns) == sorted(with_marker, key=repr)


def test_boundary_timestamp_overrides_the_load_time(spark, dataset):
    columns = ("_dlt_valid_from", "_dlt_valid_to", "customer_key", "c1", "c2")
    for rows, moment, expected in ((RUN_1, T1, AFTER_1), (RUN_2, T2, AFTER_2), (RUN_3, T3, AFTER_3)):
        disposition = {**SCD2, "boundary_timestamp": moment.isoformat()}
        info = run_load(
            rows, spark=spark, dataset=dataset, table_name="dim_customer", write_disposition=disposition
        )
        assert rows_of(info.table_path, columns) == sorted(expected, key=repr)
        assert float(info.load_id) > T3.timestamp()  # the load ran now; the boundary is the configured one


def test_own_row_hash_is_the_version_and_dlt_id_is_random(spark, dataset):
    disposition = {**SCD2, "row_version_column_name": "row_hash"}
    runs = [
        (
            T1,
            [
                {"customer_key": 1, "c1": "foo", "c2": 1, "row_hash": "h1"},
                {"customer_key": 2, "c1": "bar", "c2": 2, "row_hash": "h2"},
            ],
        ),
        # c2 of customer 2 changes but its row_hash does not: no new version (only the version column counts)
        (
            T2,
            [
                {"customer_key": 1, "c1": "foo_updated", "c2": 1, "row_hash": "h1b"},
                {"customer_key": 2, "c1": "bar", "c2": 20, "row_hash": "h2"},
            ],
        ),
        (T3, [{"customer_key": 1, "c1": "foo_updated", "c2": 1, "row_hash": "h1b"}]),
    ]
    infos = [scd2_load(spark, dataset, rows, moment, write_disposition=disposition) for moment, rows in runs]
    columns = ("_dlt_valid_from", "_dlt_valid_to", "customer_key", "c1", "c2", "row_hash")
    assert rows_of(infos[-1].table_path, columns) == sorted(
        [(T1, T2, 1, "foo", 1, "h1"), (T1, T3, 2, "bar", 2, "h2"), (T2, None, 1, "foo_updated", 1, "h1b")],
        key=repr,
    )
    assert [(i.metrics["numTargetRowsInserted"], i.metrics["numTargetRowsUpdated"]) for i in infos] == [
        (2, 0),
        (1, 1),
        (0, 1),
    ]
    ids = [r[0] for r in rows_of(infos[-1].table_path, ("_dlt_id",))]
    assert len(set(ids)) == 3 and not {"h1", "h2", "h1b"} & set(ids)
