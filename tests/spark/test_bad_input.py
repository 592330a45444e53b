"""The catalogue of refused inputs: each is refused with an error of the package's hierarchy that names
the input and says what to do, BEFORE anything is committed: the table, `_dlt_loads` and the cursor
state are exactly as they were, and the next good load works.

The refusals happen before a writer is chosen, so this module runs once, not per writer.
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import (
    ConfigError,
    DeltaMergeError,
    Incremental,
    LoadNotRecordedError,
    MissingKeyColumnError,
    PartitionValueError,
    SourceError,
    StoreError,
    run_load,
)
from airflow_provider_deltamerge import load as load_module
from airflow_provider_deltamerge.load import run_request
from airflow_provider_deltamerge.model.request import LoadRequest
from tests.helpers import read_rows

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

UTC = timezone.utc
SEED = [{"id": n, "ts": datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=n)} for n in range(60)]


def seeded(spark, dataset, **arguments) -> dict:
    """A table of 60 days of rows, loaded with a scheduled window each week; what it holds now."""
    run_load(SEED, spark=spark, dataset=dataset, table_name="events", **arguments)
    return everything(dataset)


def everything(dataset: str) -> dict:
    tables = sorted(name for name in os.listdir(dataset) if not name.startswith("."))
    return {
        name: (DeltaTable(f"{dataset}/{name}").version(), read_rows(f"{dataset}/{name}", drop=()))
        for name in tables
    }


def refused(error_type, spark, data, **arguments) -> DeltaMergeError:
    with pytest.raises(error_type) as error:
        run_load(data, spark=spark, **arguments)
    return error.value


# -- data loss and broken datasets -------------------------------------------------------------------------


def test_conf_that_widens_a_scheduled_runs_window_is_refused_and_the_table_keeps_its_history(spark, dataset):
    before = seeded(spark, dataset, write_disposition="append")
    error = refused(
        ConfigError,
        spark,
        SEED,
        dataset=dataset,
        table_name="events",
        incremental=Incremental("ts", initial_value="2024-01-01T00:00:00Z"),
        data_interval=(datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 2, 8, tzinfo=UTC)),
        run_context={
            "run_id": "scheduled__2024-02-08",
            "run_type": "scheduled",
            "conf": {"start": "2024-01-01", "end": "2024-03-01"},
        },
    )
    assert error.argument == "run_context.conf" and "conf may only narrow" in str(error)
    assert everything(dataset) == before and len(before["events"][1]) == 60


@pytest.mark.parametrize("name", ["_dlt_loads", "_dlt_pipeline_state", "_DLT_Loads", "_dlt_anything"])
def test_the_datasets_own_table_names_are_reserved(spark, dataset, name):
    before = seeded(spark, dataset)
    error = refused(ConfigError, spark, [{"id": 1}], dataset=dataset, table_name=name)
    assert error.argument == "table_name" and "reserved for the dataset's own tables" in str(error)
    assert everything(dataset) == before
    run_load([{"id": 61}], spark=spark, dataset=dataset, table_name="events")  # the dataset still works


@pytest.mark.parametrize("name", ["..", ".", "../x", "a/b", "a\\b"])
def test_a_table_name_is_one_folder_inside_the_dataset(spark, tmp_path, name):
    dataset = str(tmp_path / "lake")
    before = seeded(spark, dataset)
    error = refused(ConfigError, spark, [{"id": 1}], dataset=dataset, table_name=name, naming="direct")
    assert error.argument == "table_name"
    assert everything(dataset) == before and sorted(os.listdir(tmp_path)) == ["lake"]


def test_a_relative_dataset_is_refused_by_run_load_as_by_the_operators(spark):
    error = refused(ConfigError, spark, [{"id": 1}], dataset="lake/here", table_name="events")
    assert error.argument == "dataset" and "relative path" in str(error)


@pytest.mark.parametrize(
    ("run_context", "argument"),
    [
        ({"run_id": 123}, "run_context.run_id"),
        ({"run_id": "r", "try_number": "2"}, "run_context.try_number"),
        ({"dag_id": {"a": 1}, "run_id": "r"}, "run_context.dag_id"),
        ({"run_id": "r", "map_index": True}, "run_context.map_index"),
        ({"run_id": "r", "conf": "start=2024-01-01"}, "run_context.conf"),
    ],
)
def test_run_identity_of_the_wrong_type_is_refused_before_the_commit(spark, dataset, run_context, argument):
    before = seeded(spark, dataset)
    error = refused(
        ConfigError, spark, [{"id": 61}], dataset=dataset, table_name="events", run_context=run_context
    )
    assert error.argument == argument
    assert everything(dataset) == before
    assert run_load([{"id": 61}], spark=spark, dataset=dataset, table_name="events").loaded


@pytest.mark.parametrize("value", ["date_add(date'9999-12-31', 1)", "make_date(-5, 1, 1)"])
def test_dates_no_delta_reader_can_read_back_are_refused_naming_column_and_key(spark, dataset, value):
    before = seeded(spark, dataset, write_disposition="merge", primary_key="id")
    batch = spark.sql(f"SELECT 7 AS id, {value} AS due, timestamp'2024-01-01 00:00:00' AS ts")
    error = refused(
        SourceError,
        spark,
        batch,
        dataset=dataset,
        table_name="events",
        write_disposition="merge",
        primary_key="id",
    )
    assert "column 'due' holds 1 value(s) outside 0001-01-01..9999-12-31" in str(error)
    assert "{'id': '7'}" in str(error)
    assert everything(dataset) == before


# -- silent wrong results ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bound", ["initial_value", "end_value"])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_bound_no_value_compares_with_is_refused(bound, value):
    arguments = {"initial_value": 0, bound: value}
    with pytest.raises(ConfigError) as error:
        Incremental("id", **arguments)
    assert error.value.argument == bound and "not a finite number" in str(error.value)


@pytest.mark.parametrize("column", ["__hd", "__ord", "__action", "__k_id", "__rank", "__inc_keep"])
@pytest.mark.parametrize("strategy", ["upsert", "delete-insert", "insert-only"])
def test_user_columns_that_collide_with_helper_columns_are_refused(spark, dataset, column, strategy):
    disposition = {"disposition": "merge", "strategy": strategy}
    keys = {
        "write_disposition": disposition,
        "primary_key": "id",
        "columns": {"deleted": {"hard_delete": True}},
    }
    before = seeded(spark, dataset, **keys)
    batch = [{"id": 1, column: True, "deleted": False}, {"id": 2, column: False, "deleted": False}]
    error = refused(SourceError, spark, batch, dataset=dataset, table_name="events", naming="direct", **keys)
    assert f"['{column}'] start with '__'" in str(error) and "naming='snake_case'" in str(error)
    assert everything(dataset) == before


# -- raw errors become the package's errors ------------------------------------------------------------------


def test_a_key_that_is_not_a_column_name_is_refused(spark, dataset):
    error = refused(ConfigError, spark, [{"id": 1}], dataset=dataset, table_name="t", primary_key=123)
    assert error.argument == "primary_key" and "not a column name" in str(error)


@pytest.mark.parametrize("data", [None, 42, "SELECT 1", {"id": 1}])
def test_data_that_is_no_batch_is_refused_saying_what_is_accepted(spark, dataset, data):
    error = refused(SourceError, spark, data, dataset=dataset, table_name="t")
    assert "a Spark DataFrame, a pandas DataFrame, a list of dicts, or a callable" in str(error)
    assert not os.path.exists(dataset)


def test_a_pandas_dataframe_is_loaded(spark, dataset):
    frame = pd.DataFrame({"id": [1, 2], "at": pd.to_datetime(["2024-01-01 10:00", "2024-01-02 11:00"])})
    info = run_load(frame, spark=spark, dataset=dataset, table_name="t")
    rows = read_rows(f"{dataset}/t")
    assert info.metrics["numTargetRowsInserted"] == 2
    assert rows == [
        {"id": 1, "at": datetime(2024, 1, 1, 10, tzinfo=UTC)},
        {"id": 2, "at": datetime(2024, 1, 2, 11, tzinfo=UTC)},
    ]


def test_dedup_sort_on_a_column_the_batch_lacks_is_refused(spark, dataset):
    keys = {"write_disposition": "merge", "primary_key": "id"}
    before = seeded(spark, dataset, **keys)
    error = refused(
        MissingKeyColumnError,
        spark,
        [{"id": 1}, {"id": 1}],
        dataset=dataset,
        table_name="events",
        columns={"version": {"dedup_sort": "desc"}},
        **keys,
    )
    assert (error.column, error.hint) == ("version", "dedup_sort")
    assert everything(dataset) == before


def test_a_dataset_with_an_unknown_scheme_is_refused(spark):
    error = refused(ConfigError, spark, [{"id": 1}], dataset="foo://bucket/lake", table_name="t")
    assert error.argument == "dataset" and "'foo'" in str(error)


@pytest.mark.parametrize(
    ("path", "says"),
    [("{tmp}/no-such-folder", "does not exist"), ("foo://bucket/landing", "no file system for")],
)
def test_a_source_path_spark_cannot_open_is_named_in_one_line(spark, tmp_path, path, says):
    path = path.format(tmp=tmp_path)
    request = LoadRequest.create(
        source={"format": "parquet", "path": path}, dataset=str(tmp_path / "lake"), table_name="t"
    )
    with pytest.raises(SourceError) as error:
        run_request(request, spark)
    assert str(error.value).startswith(f"source path {path!r}") and says in str(error.value)
    assert "\n" not in str(error.value) and "Py4J" not in str(error.value)
    assert not os.path.exists(tmp_path / "lake" / "t")


def test_a_text_cursor_with_timestamps_written_two_ways_is_refused(spark, dataset):
    """As text, '2024-01-01 12:00:00' sorts before '2024-01-01T00:00:00Z': 2 of these 4 rows were
    skipped silently."""
    before = seeded(spark, dataset)
    batch = [
        {"id": 1, "at": "2024-01-01 12:00:00"},
        {"id": 2, "at": "2024-01-01T12:00:00Z"},
        {"id": 3, "at": "2024-01-02 08:00:00"},
        {"id": 4, "at": "2024-01-02T08:00:00Z"},
    ]
    error = refused(
        SourceError,
        spark,
        batch,
        dataset=dataset,
        table_name="events",
        incremental=Incremental("at", initial_value="2024-01-01T00:00:00Z"),
    )
    assert "'2024-01-01 12:00:00' and '2024-01-01T12:00:00Z'" in str(error)
    assert everything(dataset) == before


def test_a_text_cursor_of_one_format_with_bare_dates_still_loads(spark, dataset):
    batch = [
        {"id": 1, "at": "2024-01-01"},
        {"id": 2, "at": "2024-01-01T12:00:00Z"},
        {"id": 3, "at": "2024-01-02"},
    ]
    info = run_load(
        batch,
        spark=spark,
        dataset=dataset,
        table_name="events",
        incremental=Incremental("at", initial_value="2024-01-01T06:00:00Z"),
    )
    assert sorted(r["id"] for r in read_rows(f"{dataset}/events")) == [2, 3]
    assert info.metrics["rows_staged"] == 2


# -- errors that tell where a load stands --------------------------------------------------------------


@pytest.mark.parametrize("table", ["_dlt_pipeline_state", "_dlt_loads"])
def test_a_file_where_a_state_table_belongs_is_named_before_anything_is_committed(spark, dataset, table):
    before = seeded(spark, dataset)
    state = f"{dataset}/{table}"
    if os.path.exists(state):
        shutil.move(state, f"{dataset}/.kept")
    with open(state, "w") as handle:
        handle.write("not a table")
    error = refused(StoreError, spark, [{"id": 61}], dataset=dataset, table_name="events")
    assert error.path == state and "is a file" in str(error)
    assert DeltaTable(f"{dataset}/events").version() == before["events"][0]


def test_a_record_that_cannot_be_written_after_the_commit_says_so_and_the_retry_finishes_it(
    spark, dataset, monkeypatch
):
    seeded(spark, dataset, write_disposition="append")
    loads_table = f"{dataset}/_dlt_loads"

    def loads_table_becomes_a_file(step):
        if step == "after_commit":
            shutil.move(loads_table, f"{dataset}/.loads-kept")
            with open(loads_table, "w") as handle:
                handle.write("in the way")

    run = {"dag_id": "d", "task_id": "t", "run_id": "manual__1", "run_type": "manual"}
    monkeypatch.setattr(load_module, "checkpoint", loads_table_becomes_a_file)
    with pytest.raises(LoadNotRecordedError) as error:
        run_load(
            [{"id": 100}],
            spark=spark,
            dataset=dataset,
            table_name="events",
            run_context={**run, "try_number": 1},
        )
    assert (error.value.table, error.value.table_version) == (f"{dataset}/events", 1)
    assert f"committed to {dataset}/events as load {error.value.load_id} at version 1" in str(error.value)
    assert "retry the same run" in str(error.value)

    monkeypatch.undo()
    os.remove(loads_table)
    shutil.move(f"{dataset}/.loads-kept", loads_table)
    retry = run_load(
        [{"id": 100}], spark=spark, dataset=dataset, table_name="events", run_context={**run, "try_number": 2}
    )
    assert (retry.load_id, retry.table_version) == (error.value.load_id, 1)
    assert [r["id"] for r in read_rows(f"{dataset}/events")].count(100) == 1  # not loaded twice


# -- child tables and row ids ------------------------------------------------------------------------------


def test_a_child_table_never_adopts_a_table_of_its_own(spark, dataset):
    run_load([{"id": 9, "tag": "mine"}], spark=spark, dataset=dataset, table_name="u__tags", naming="direct")
    before = everything(dataset)
    error = refused(ConfigError, spark, [{"id": 1, "tags": ["a", "b"]}], dataset=dataset, table_name="u")
    assert "list column 'tags' of table 'u' makes child table 'u__tags'" in str(error)
    assert "the dataset's table 'u__tags' is a table of its own" in str(error)
    assert everything(dataset) == before
    run_load([{"id": 1, "tags": "a,b"}], spark=spark, dataset=dataset, table_name="u")  # no list: no child
    assert read_rows(f"{dataset}/u__tags") == [{"id": 9, "tag": "mine"}]


@pytest.mark.parametrize("pipeline_name", [None, "another"])
def test_a_child_table_is_not_loaded_on_its_own(spark, dataset, pipeline_name):
    run_load([{"id": 1, "tags": ["a", "b"]}], spark=spark, dataset=dataset, table_name="u")
    before = everything(dataset)
    error = refused(
        ConfigError,
        spark,
        [{"value": "c"}],
        dataset=dataset,
        table_name="u__tags",
        naming="direct",
        pipeline_name=pipeline_name,
    )
    assert "'u__tags' is a child table of 'u'" in str(error) and error.argument == "table_name"
    assert everything(dataset) == before


def test_a_child_table_is_never_another_roots_child_table(spark, dataset):
    run_load([{"id": 1, "c": [1, 2]}], spark=spark, dataset=dataset, table_name="a__b", naming="direct")
    before = everything(dataset)
    error = refused(
        ConfigError, spark, [{"id": 2, "b__c": [3]}], dataset=dataset, table_name="a", naming="direct"
    )
    assert "makes child table 'a__b__c'" in str(error) and "a child table of 'a__b'" in str(error)
    assert everything(dataset) == before


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"id": 2, "c": [3]}], "list column 'c' of table 'a__b' makes child table 'a__b__c'"),
        ([{"id": 2}], "'a__b' would write 'a__b__c', found beside it as one of its child tables"),
    ],
)
def test_a_table_never_takes_a_child_table_of_another_for_its_own(spark, dataset, rows, message):
    run_load([{"id": 1, "b__c": [1, 2]}], spark=spark, dataset=dataset, table_name="a", naming="direct")
    before = everything(dataset)
    arguments = {"dataset": dataset, "table_name": "a__b", "naming": "direct", "write_disposition": "replace"}
    error = refused(ConfigError, spark, rows, **arguments)
    assert message in str(error) and "is a child table of 'a'" in str(error)
    assert everything(dataset) == before


def test_two_lists_that_make_one_child_table_are_refused(spark, dataset):
    before = seeded(spark, dataset)
    rows = [{"id": 1, "x": [{"y": [1]}], "x__y": [2]}]
    error = refused(ConfigError, spark, rows, dataset=dataset, table_name="t", naming="direct")
    assert "makes child table 't__x__y', and so does" in str(error)
    assert everything(dataset) == before


@pytest.mark.parametrize(
    ("rows", "argument"),
    [
        ([{"id": 1, "t" * 250: [1]}], "list column '" + "t" * 250 + "' of table 'u'"),
        ([{"id": 1, "tags": [{"n" * 240: [1]}]}], "list column '" + "n" * 240 + "' of table 'u__tags'"),
        ([{"id": 1, "Tag" * 80: [1]}], "list column '" + "_".join(["tag"] * 80) + "' of table 'u'"),
    ],
)
def test_a_child_table_name_the_store_cannot_hold_is_refused(spark, dataset, rows, argument):
    before = seeded(spark, dataset)
    error = refused(ConfigError, spark, rows, dataset=dataset, table_name="u")
    assert error.argument == argument and "a table's name may have at most 242 bytes" in str(error)
    assert everything(dataset) == before


def test_a_table_name_the_store_cannot_hold_is_refused_before_anything_is_read(spark, dataset):
    before = seeded(spark, dataset)
    error = refused(ConfigError, spark, lambda spark, window: 1 / 0, dataset=dataset, table_name="t" * 300)
    assert error.argument == "table_name" and "is 300 bytes long" in str(error)
    assert everything(dataset) == before


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (["same", "same", "other"], "1 value(s) occurring more than once, for example 'same'"),
        (["one", None, "two"], "is null in 1 row(s)"),
    ],
)
@pytest.mark.parametrize("disposition", ["append", "replace", {"disposition": "merge", "strategy": "upsert"}])
def test_a_row_id_given_in_the_data_is_unique_and_not_null(spark, dataset, ids, message, disposition):
    from airflow_provider_deltamerge import RowIdError

    before = seeded(spark, dataset)
    rows = [{"id": n, "_dlt_id": row_id, "tags": [f"t{n}"]} for n, row_id in enumerate(ids)]
    error = refused(
        RowIdError,
        spark,
        rows,
        dataset=dataset,
        table_name="u",
        write_disposition=disposition,
        primary_key="id",
    )
    assert error.column == "_dlt_id" and message in str(error)
    assert everything(dataset) == before
    rows = [{**row, "_dlt_id": f"id{row['id']}"} for row in rows]  # unique ids are kept, as dlt keeps them
    run_load(
        rows, spark=spark, dataset=dataset, table_name="u", write_disposition=disposition, primary_key="id"
    )
    parents = {r["_dlt_parent_id"]: r["value"] for r in read_rows(f"{dataset}/u__tags")}
    assert parents == {"id0": "t0", "id1": "t1", "id2": "t2"}


def test_fields_of_list_elements_named_as_child_system_columns_are_refused(spark, dataset):
    before = seeded(spark, dataset)
    rows = [{"id": 1, "tags": [{"_dlt_id": "x", "name": "a"}]}]
    error = refused(SourceError, spark, rows, dataset=dataset, table_name="u")
    assert "['_dlt_id']" in str(error) and "list column 'tags' of table 'u'" in str(error)
    assert everything(dataset) == before


@pytest.mark.parametrize("column", ["_dlt_parent_id", "_dlt_list_idx", "_dlt_root_id"])
def test_the_columns_of_child_tables_are_refused_in_a_batch(spark, dataset, column):
    before = seeded(spark, dataset)
    error = refused(SourceError, spark, [{"id": 1, column: "p"}], dataset=dataset, table_name="u")
    assert f"['{column}'] are the columns that link a child table's rows" in str(error)
    assert everything(dataset) == before


def test_a_load_id_given_in_the_data_is_replaced_by_the_loads(spark, dataset):
    info = run_load([{"id": 1, "_dlt_load_id": "mine"}], spark=spark, dataset=dataset, table_name="u")
    assert [r["_dlt_load_id"] for r in read_rows(f"{dataset}/u", drop=())] == [info.load_id]


PARTITIONED = {"day": {"partition": True}}


@pytest.mark.parametrize(
    ("value", "folder_bytes"),
    [("x" * 300, 304), ("a/b:" * 40, 4 + 40 * 8)],  # escaped as Delta writes it: '/' and ':' take 3 bytes
)
@pytest.mark.parametrize("disposition", ["append", "replace", "merge"])
def test_a_partition_value_making_a_folder_the_store_cannot_hold_is_refused(
    spark, dataset, value, folder_bytes, disposition
):
    partitioned = {"columns": PARTITIONED, "primary_key": "id", "write_disposition": disposition}
    run_load([{"id": 1, "day": "mon"}], spark=spark, dataset=dataset, table_name="p", **partitioned)
    before = everything(dataset)
    for table in ("p", "new"):  # the table's partitioning, or the one the load creates it with
        error = refused(
            PartitionValueError,
            spark,
            [{"id": 2, "day": "tue"}, {"id": 3, "day": value}],
            dataset=dataset,
            table_name=table,
            **partitioned,
        )
        assert error.column == "day" and error.folder_bytes == folder_bytes
        assert "at most 255 bytes" in str(error)
    assert everything(dataset) == before
    run_load([{"id": 4, "day": "y" * 250}], spark=spark, dataset=dataset, table_name="p", **partitioned)
