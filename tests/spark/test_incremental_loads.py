"""dlt's incremental rules (INC-1..INC-18) through run_load, over several runs, read back from Delta.

Each test runs real loads on the shared local SparkSession and checks the exact table contents, the
stored cursor state (`_dlt_pipeline_state`) and the `_dlt_loads` rows after every run.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from airflow_provider_deltamerge import Incremental, LoadRequest, run_load
from airflow_provider_deltamerge.delta import store
from airflow_provider_deltamerge.errors import CursorColumnMissingError, CursorValueMissingError
from airflow_provider_deltamerge.model.incremental import json_safe
from tests.helpers import read_rows, table_version

pytestmark = pytest.mark.spark

UTC = timezone.utc
PIPELINE = "deltamerge"  # run_load's default pipeline name


def day(d: int) -> datetime:
    return datetime(2024, 1, d, tzinfo=UTC)


def load(spark, dataset, rows, incremental, *, table="events", **arguments):
    return run_load(
        rows, spark=spark, dataset=dataset, table_name=table, incremental=incremental, **arguments
    )


def ids(dataset, table="events") -> list:
    return sorted(r["id"] for r in read_rows(f"{dataset}/{table}"))


def cursor_entry(dataset, cursor="ts", table="events") -> dict:
    return store.latest_state(dataset, PIPELINE, table)["incremental"][cursor]


def loads_of(dataset, table="events") -> list[dict]:
    return store.read_loads(dataset, PIPELINE, table)


# -- cursor types, the stored last value and boundary dedup (INC-2..INC-8, INC-13) ------------------

CURSOR_TYPES = {
    # cursor value of row n, initial_value, stored last_value after rows 1..6, Arrow type in the table
    "timestamp": (day, "2024-01-02T00:00:00Z", "2024-01-06T00:00:00+00:00", pa.timestamp("us", tz="UTC")),
    "date": (lambda n: date(2024, 1, n), "2024-01-02", "2024-01-06", pa.date32()),
    "int": (lambda n: n * 10, 20, 60, pa.int64()),
    "string": (lambda n: f"2024-01-0{n}", "2024-01-02", "2024-01-06", pa.string()),
}


@pytest.mark.parametrize("cursor_type", list(CURSOR_TYPES))
def test_stateful_runs_continue_from_the_stored_value_and_drop_the_boundary_row(spark, dataset, cursor_type):
    value_of, initial, last, arrow_type = CURSOR_TYPES[cursor_type]
    incremental = Incremental("ts", initial_value=initial)

    first = load(
        spark, dataset, [{"id": n, "ts": value_of(n)} for n in range(1, 5)], incremental, primary_key="id"
    )
    assert ids(dataset) == [2, 3, 4]  # closed start at initial_value: row 1 is before it
    assert DeltaTable(f"{dataset}/events").schema().to_arrow().field("ts").type == arrow_type
    assert first.window["rule"] == "stateful-incremental" and first.window["end"] is None

    # Row 4 sits at the stored last value and its key was loaded: dropped (INC-6). 5 and 6 are new.
    second = load(
        spark, dataset, [{"id": n, "ts": value_of(n)} for n in range(1, 7)], incremental, primary_key="id"
    )
    assert ids(dataset) == [2, 3, 4, 5, 6]
    assert second.metrics["rows_staged"] == 2
    entry = cursor_entry(dataset)
    assert entry["last_value"] == last
    assert entry["start_value"] == second.window["start"] == json_safe(value_of(4))  # INC-18
    assert len(entry["unique_hashes"]) == 1  # only row 6 sits at the new last value (INC-8)


def test_a_run_without_new_rows_loads_nothing_and_records_nothing(spark, dataset):
    incremental = Incremental("ts", initial_value="2024-01-01T00:00:00Z")
    batch = [{"id": n, "ts": day(n)} for n in (1, 2, 3)]
    load(spark, dataset, batch, incremental, primary_key="id")
    state_before = store.latest_state(dataset, PIPELINE, "events")

    again = load(spark, dataset, batch, incremental, primary_key="id")  # INC-15

    assert not again.loaded and again.load_id is None
    assert again.metrics["rows_staged"] == 0
    assert table_version(f"{dataset}/events") == 0
    assert len(loads_of(dataset)) == 1
    assert store.latest_state(dataset, PIPELINE, "events") == state_before


@pytest.mark.parametrize(
    "disposition, primary_key, incremental_key, loaded_in_second_run",
    [
        # dlt: the dedup key is the table's primary key; a changed boundary row is dropped (INC-7, INC-17)
        ("append", "id", None, [(4, "new"), (5, "new")]),
        # no key at all: whole rows are compared, so the changed row is loaded and the unchanged one is not
        ("append", None, None, [(3, "changed"), (4, "new"), (5, "new")]),
        # primary_key=() on the incremental turns boundary dedup off: every row at the boundary is loaded
        ("append", "id", (), [(2, "old"), (3, "changed"), (4, "new"), (5, "new")]),
        # merge compares whole rows (our INC-17 difference): an update that keeps the cursor value is loaded
        ("merge", "id", None, [(3, "changed"), (4, "new"), (5, "new")]),
    ],
    ids=["append-table-key", "append-whole-row", "append-dedup-off", "merge-whole-row"],
)
def test_boundary_dedup_key(spark, dataset, disposition, primary_key, incremental_key, loaded_in_second_run):
    incremental = Incremental("ts", initial_value="2024-01-01T00:00:00Z", primary_key=incremental_key)
    keys = {"primary_key": primary_key} if primary_key else {}
    first = [
        {"id": 1, "ts": day(1), "v": "old"},
        {"id": 2, "ts": day(2), "v": "old"},
        {"id": 3, "ts": day(2), "v": "old"},
    ]
    second = [
        {"id": 2, "ts": day(2), "v": "old"},  # at the boundary, unchanged
        {"id": 3, "ts": day(2), "v": "changed"},  # at the boundary, changed
        {"id": 4, "ts": day(2), "v": "new"},  # at the boundary, never loaded
        {"id": 5, "ts": day(3), "v": "new"},  # after the boundary
    ]
    load(spark, dataset, first, incremental, write_disposition=disposition, **keys)
    info = load(spark, dataset, second, incremental, write_disposition=disposition, **keys)

    assert info.metrics["rows_staged"] == len(loaded_in_second_run)
    written = sorted((r["id"], r["v"]) for r in read_rows(f"{dataset}/events"))
    expected = [(1, "old"), (2, "old"), (3, "old")] + loaded_in_second_run
    if disposition == "merge":  # one row per key, the newest version
        expected = sorted(dict(expected).items())
    assert written == sorted(expected)
    assert cursor_entry(dataset)["last_value"] == "2024-01-03T00:00:00+00:00"


def test_open_range_start_excludes_the_stored_value_and_keeps_no_hashes(spark, dataset):
    incremental = Incremental("id", initial_value=2, range_start="open")
    load(spark, dataset, [{"id": n} for n in range(1, 6)], incremental)
    assert ids(dataset) == [3, 4, 5]
    load(spark, dataset, [{"id": n} for n in range(1, 8)], incremental)
    assert ids(dataset) == [3, 4, 5, 6, 7]
    assert cursor_entry(dataset, "id") == {
        "initial_value": 2,
        "last_value": 7,
        "unique_hashes": [],
        "start_value": 5,
    }


@pytest.mark.parametrize(
    "range_start, range_end, expected",
    [("closed", "open", [3, 4, 5, 6]), ("open", "closed", [4, 5, 6, 7])],
)
def test_end_value_range_inclusivity(spark, dataset, range_start, range_end, expected):
    incremental = Incremental(
        "id", initial_value=3, end_value=7, range_start=range_start, range_end=range_end
    )
    info = load(spark, dataset, [{"id": n} for n in range(1, 11)], incremental)
    assert ids(dataset) == expected
    assert (info.window["start"], info.window["end"], info.window["stateful"]) == (3, 7, False)


def test_min_last_value_func_walks_downwards(spark, dataset):
    incremental = Incremental("rank", initial_value=10, last_value_func="min")
    load(spark, dataset, [{"id": n, "rank": n} for n in (12, 10, 8, 6)], incremental, primary_key="id")
    assert ids(dataset) == [6, 8, 10]
    assert cursor_entry(dataset, "rank")["last_value"] == 6
    # 6 is at the stored value and already loaded; 5 and 3 are below it; 8 was passed already
    load(spark, dataset, [{"id": n, "rank": n} for n in (8, 6, 5, 3)], incremental, primary_key="id")
    assert ids(dataset) == [3, 5, 6, 8, 10]
    assert cursor_entry(dataset, "rank")["last_value"] == 3


def test_lag_reloads_the_lag_before_the_last_value_and_never_moves_it_back(spark, dataset):
    incremental = Incremental("id", initial_value=0, lag=2)
    load(spark, dataset, [{"id": n} for n in range(1, 6)], incremental)
    second = load(spark, dataset, [{"id": n} for n in range(1, 8)], incremental)
    assert second.window["start"] == 3 and not second.window["boundary_dedup"]  # last value 5 minus lag 2
    assert ids(dataset) == [1, 2, 3, 3, 4, 4, 5, 5, 6, 7]  # append: the lag re-loads 3..5 (INC-11)

    third = load(spark, dataset, [{"id": n} for n in range(1, 5)], incremental)  # nothing at or after 5
    assert not third.loaded
    entry = cursor_entry(dataset, "id")
    assert (entry["last_value"], entry["unique_hashes"]) == (7, [])  # lag keeps no boundary hashes


@pytest.mark.parametrize("mode", ["raise", "include", "exclude"])
def test_on_cursor_value_missing(spark, dataset, mode):
    incremental = Incremental("ts", initial_value="2024-01-01T00:00:00Z", on_cursor_value_missing=mode)
    batch = [{"id": 1, "ts": day(2)}, {"id": 2, "ts": None}, {"id": 3}]  # row 3 lacks the key: null

    if mode == "raise":
        with pytest.raises(CursorValueMissingError) as raised:
            load(spark, dataset, batch, incremental)
        assert str(raised.value).startswith("incremental cursor 'ts' is null or missing in 2 of 3 row(s).")
        assert "on_cursor_value_missing='include'" in str(raised.value)
        assert (raised.value.missing_rows, raised.value.total_rows) == (2, 3)
        assert store.read_loads(dataset) == []
        return

    load(spark, dataset, batch, incremental)
    assert ids(dataset) == ([1, 2, 3] if mode == "include" else [1])
    assert cursor_entry(dataset)["last_value"] == "2024-01-02T00:00:00+00:00"  # null cursors never move it
    load(spark, dataset, [{"id": 4, "ts": None}, {"id": 5, "ts": day(3)}], incremental)
    assert ids(dataset) == ([1, 2, 3, 4, 5] if mode == "include" else [1, 5])
    assert cursor_entry(dataset)["last_value"] == "2024-01-03T00:00:00+00:00"


def test_a_cursor_column_absent_from_the_data_is_named(spark, dataset):
    with pytest.raises(CursorColumnMissingError) as raised:
        load(spark, dataset, [{"id": 1, "ts": day(1)}], Incremental("updated_at"))
    assert str(raised.value).startswith(
        "incremental cursor 'updated_at' is not in the data; columns present: id, ts."
    )
    assert store.read_loads(dataset) == []


def test_end_value_backfill_leaves_the_cursor_alone_or_moves_it_only_forward(spark, dataset):
    stateful = Incremental("id", initial_value=1)
    load(spark, dataset, [{"id": n} for n in range(1, 6)], stateful)
    assert cursor_entry(dataset, "id")["last_value"] == 5

    # A backfill behind the stored value leaves it alone (INC-5). An append of a range replaces the rows
    # the table holds in it (so a re-run is safe): row 1 is replaced, not duplicated; 2 is past the end.
    behind = load(
        spark, dataset, [{"id": n} for n in (0, 1, 2, 3)], Incremental("id", initial_value=0, end_value=2)
    )
    assert ids(dataset) == [0, 1, 2, 3, 4, 5]
    assert behind.window["rule"] == "end-value-range" and not behind.window["stateful"]
    after_behind = cursor_entry(dataset, "id")
    assert (after_behind["last_value"], after_behind["start_value"]) == (5, 1)

    ahead = load(
        spark, dataset, [{"id": n} for n in range(5, 12)], Incremental("id", initial_value=8, end_value=10)
    )
    assert ahead.metrics["rows_staged"] == 2
    assert cursor_entry(dataset, "id")["last_value"] == 9  # moved forward, never back

    load(
        spark, dataset, [{"id": n} for n in range(1, 13)], stateful
    )  # continues after 9: 9 is a known boundary row
    assert ids(dataset) == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12]
    windows = store.latest_state(dataset, PIPELINE, "events")["windows"]
    assert [(w["rule"], w["start"], w["end"], w["rows"]) for w in windows] == [
        ("stateful-incremental", 1, None, 5),
        ("end-value-range", 0, 2, 2),
        ("end-value-range", 8, 10, 2),
        ("stateful-incremental", 9, None, 3),
    ]


def test_replace_resets_the_cursor_every_run(spark, dataset):
    incremental = Incremental("id", initial_value=2)
    load(spark, dataset, [{"id": n} for n in range(1, 6)], incremental, write_disposition="replace")
    assert ids(dataset) == [2, 3, 4, 5]
    # A stateful append would load nothing from [5, ...); replace starts again at initial_value (INC-16)
    load(spark, dataset, [{"id": n} for n in range(1, 4)], incremental, write_disposition="replace")
    assert ids(dataset) == [2, 3]
    entry = cursor_entry(dataset, "id")
    assert (entry["last_value"], entry["start_value"]) == (3, 2)
    assert len(store.latest_state(dataset, PIPELINE, "events")["windows"]) == 1  # the old windows went too


@pytest.mark.parametrize("layout", ["flatten", "struct"])
def test_dotted_cursor_path_reads_a_nested_field(spark, dataset, layout):
    """`Meta.updated` reads the flattened column `meta__updated` (dlt's layout) or the struct's field."""
    incremental = Incremental(
        "Meta.updated", initial_value="2024-01-02T00:00:00Z"
    )  # first segment is normalised

    def rows(n):
        return [{"id": i, "Meta": {"updated": day(i), "by": "etl"}} for i in range(1, n + 1)]

    load(spark, dataset, rows(3), incremental, primary_key="id", nested_layout=layout)
    load(spark, dataset, rows(5), incremental, primary_key="id", nested_layout=layout)
    assert ids(dataset) == [2, 3, 4, 5]
    first = read_rows(f"{dataset}/events", order_by=["id"])[0]
    if layout == "struct":
        assert first["meta"] == {"updated": day(2), "by": "etl"}
    else:
        assert (first["meta__updated"], first["meta__by"]) == (day(2), "etl")
    assert cursor_entry(dataset, "meta.updated")["last_value"] == "2024-01-05T00:00:00+00:00"


def test_a_live_source_is_read_once_so_the_cursor_matches_the_loaded_rows(spark, dataset):
    """A source that gains rows while the load runs (a JDBC table taking inserts): the stored last value
    and the recorded row count are those of the rows committed, so the next run loads nothing twice."""
    opened = datetime.now(UTC) - timedelta(seconds=2)

    def live_table(spark_session, window):
        # one row arrives every 10 ms; each read of the DataFrame sees the rows that exist by then
        arrived = F.lit(opened) + F.make_interval(secs=F.col("id") / 100)
        rows = spark_session.range(0, 100_000).select("id", arrived.alias("ts"))
        return rows.filter(F.col("ts") <= F.current_timestamp())

    incremental = Incremental("ts", initial_value="2024-01-01T00:00:00Z")
    for _ in range(2):
        info = load(spark, dataset, live_table, incremental)
        loaded = read_rows(f"{dataset}/events")
        assert len({r["id"] for r in loaded}) == len(loaded)  # nothing loaded twice
        assert cursor_entry(dataset)["last_value"] == max(r["ts"] for r in loaded).isoformat()
        assert (
            store.latest_state(dataset, PIPELINE, "events")["windows"][-1]["rows"]
            == info.metrics["rows_staged"]
        )


# -- empty batches and columns only the dropped rows have ----------------------------------------


@pytest.mark.parametrize("disposition", ["append", "merge"])
def test_an_empty_batch_loads_nothing_and_keeps_the_cursor(spark, dataset, disposition):
    incremental = Incremental("ts", initial_value="2024-01-02T00:00:00Z")
    keys = {"primary_key": "id"} if disposition == "merge" else {}
    load(spark, dataset, [], incremental, write_disposition=disposition, **keys)  # the first run
    load(
        spark,
        dataset,
        [{"id": n, "ts": day(n)} for n in (2, 3)],
        incremental,
        write_disposition=disposition,
        **keys,
    )
    version = table_version(f"{dataset}/events")
    load(spark, dataset, [], incremental, write_disposition=disposition, **keys)  # after earlier loads
    assert ids(dataset) == [2, 3]
    assert cursor_entry(dataset)["last_value"] == "2024-01-03T00:00:00+00:00"
    assert table_version(f"{dataset}/events") >= version


def test_columns_only_in_rows_the_cursor_drops_are_not_created(spark, dataset):
    incremental = Incremental("ts", initial_value="2024-01-02T00:00:00Z")
    rows = [{"id": 1, "ts": day(1), "old_only": "x"}, {"id": 2, "ts": day(2), "kept": 1}]
    load(spark, dataset, rows, incremental)
    names = DeltaTable(f"{dataset}/events").schema().to_arrow().names
    assert "kept" in names and "old_only" not in names
    assert ids(dataset) == [2]


def test_an_empty_batch_in_an_airflow_window_records_the_window(spark, dataset):
    incremental = Incremental("ts")
    first = load(spark, dataset, [], incremental, data_interval=(day(1), day(2)))
    assert first.metrics["rows_staged"] == 0
    assert [(w["start"], w["rows"]) for w in store.latest_state(dataset, PIPELINE, "events")["windows"]] == [
        ("2024-01-01T00:00:00+00:00", 0)
    ]
    load(spark, dataset, [{"id": 1, "ts": day(2)}], incremental, data_interval=(day(2), day(3)))
    assert ids(dataset) == [1]


# -- a typed source read only in the window's range; a load's checkpoints released -----------------


def _events_that_fail_outside(spark, first_day: int, last_day: int):
    """Events of days 1..9 whose `guard` column fails to compute for any row outside first..last day:
    a load that reads those rows fails."""
    rows = spark.createDataFrame([(n, day(n)) for n in range(1, 10)], "id long, ts timestamp")
    outside = (F.col("ts") < F.lit(day(first_day))) | (F.col("ts") >= F.lit(day(last_day + 1)))
    return rows.withColumn("guard", F.when(outside, F.raise_error(F.lit("read outside the window"))))


@pytest.mark.parametrize("disposition", ["append", "merge"])
def test_a_typed_source_is_read_only_in_the_windows_range(spark, dataset, disposition):
    keys = {"primary_key": "id"} if disposition == "merge" else {}
    source = _events_that_fail_outside(spark, 3, 5)
    info = load(
        spark,
        dataset,
        source,
        Incremental("ts", initial_value="2024-01-03T00:00:00Z", end_value="2024-01-06T00:00:00Z"),
        write_disposition=disposition,
        **keys,
    )
    assert ids(dataset) == [3, 4, 5]
    assert info.metrics["rows_staged"] == 3
    assert info.window["end"] == "2024-01-06T00:00:00+00:00"


def test_a_source_with_null_cursors_is_narrowed_keeping_them(spark, dataset):
    source = _events_that_fail_outside(spark, 3, 5).unionByName(
        spark.createDataFrame([(99, None)], "id long, ts timestamp").withColumn("guard", F.lit(None))
    )
    window = {"initial_value": "2024-01-03T00:00:00Z", "end_value": "2024-01-06T00:00:00Z"}
    load(spark, dataset, source, Incremental("ts", on_cursor_value_missing="include", **window))
    assert ids(dataset) == [3, 4, 5, 99]
    with pytest.raises(CursorValueMissingError):  # the row without a cursor is still read, and refused
        load(spark, f"{dataset}-raise", source, Incremental("ts", **window))


def test_loads_leave_no_checkpoint_of_their_batch_behind(spark, dataset):
    persistent = spark.sparkContext._jsc.sc().getPersistentRDDs()
    before = persistent.size()
    source = spark.createDataFrame([(n, day(n)) for n in range(1, 10)], "id long, ts timestamp")
    for first in (1, 4, 7):  # three windows in one session, as a backfill runs them
        window = Incremental("ts", initial_value=day(first).isoformat(), end_value=day(first + 3).isoformat())
        load(spark, dataset, source, window, write_disposition="merge", primary_key="id")
        assert spark.sparkContext._jsc.sc().getPersistentRDDs().size() == before
    assert ids(dataset) == list(range(1, 10))


def test_a_windows_size_is_estimated_from_the_rows_it_read(spark, dataset, tmp_path):
    """Spark sizes the cursor step's checkpoint by the whole source it was cut from; the batch's estimate
    (which decides how it is staged and which writer `auto` takes) is bounded by the rows read."""
    from airflow_provider_deltamerge.load import staging
    from airflow_provider_deltamerge.spark import held
    from airflow_provider_deltamerge.spark.profile import estimated_bytes
    from airflow_provider_deltamerge.spark.window_steps import filter_to_window, open_load_window

    days = spark.range(90_000).select(  # text that does not compress: the files are as large as the rows
        "id",
        (F.lit(day(1)) + F.make_interval(days=F.col("id") % 9)).alias("ts"),
        F.sha2(F.col("id").cast("string"), 256).alias("note"),
    )
    days.repartition(9, "ts").write.parquet(str(tmp_path / "landing"))
    source = spark.read.parquet(str(tmp_path / "landing"))
    request = LoadRequest.create(
        dataset=dataset,
        table_name="events",
        incremental=Incremental("ts", initial_value=day(3).isoformat(), end_value=day(4).isoformat()),
    )
    opened = open_load_window(request, None, None)
    with held.held_for_load():
        read = staging.extract(spark, source, request, opened.window, None, [])
        batch, _, state = filter_to_window(read, request, opened)
        assert state["windows"][-1]["rows"] == 10_000
        whole, window = estimated_bytes(source), estimated_bytes(batch)
        assert window <= whole / 5, (window, whole)
        assert window >= 10_000 * 8  # no less than its rows' fixed-width columns
    assert estimated_bytes(batch) > window  # outside the load: Spark's own
