"""Writer selection on a real local session, the delta-spark writer's Spark SQL checked by Spark itself, and
(only when the session has Delta's jars: DELTA_SPARK_JARS) the delta-spark writer's commits.

Nothing here downloads anything: without local jars the delta-spark tests skip and say how to run them.
"""

from __future__ import annotations

import logging
import os
from datetime import date, datetime, timedelta, timezone

import pytest
from pyspark.sql import functions as F

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.delta import delta_spark_status as spark_status
from airflow_provider_deltamerge.delta.delta_rs import DeltaRsWriter
from airflow_provider_deltamerge.delta.delta_spark import DeltaSparkWriter, session_conf
from airflow_provider_deltamerge.delta.delta_spark_status import delta_spark_status
from airflow_provider_deltamerge.delta.selection import AUTO_DELTA_RS_MAX_ENV, select_writer
from airflow_provider_deltamerge.delta.spark_file_systems import spark_reaches
from airflow_provider_deltamerge.delta.spark_sql import (
    PARQUET_TIMESTAMP_CONF,
    TIMESTAMP_MICROS,
    TXN_APP_ID_CONF,
    TXN_VERSION_CONF,
    USER_METADATA_CONF,
    merge_builder,
    render_spark,
)
from airflow_provider_deltamerge.delta.store import read_commits, read_loads
from airflow_provider_deltamerge.delta.writer import CommitRequest
from airflow_provider_deltamerge.errors import ConfigError, ConflictError
from airflow_provider_deltamerge.model.delta_jars import ENV_VAR
from airflow_provider_deltamerge.model.options import TableHints, WriteDisposition
from airflow_provider_deltamerge.plan.expressions import And, Cmp, Col, Lit
from airflow_provider_deltamerge.plan.merge import MergePlan, Operation, plan_load
from airflow_provider_deltamerge.plan.scd2 import Scd2Settings, plan_scd2
from tests.helpers import read_rows

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]
UTC = timezone.utc
B = datetime(2024, 4, 9, 18, 27, 53, 734235, tzinfo=UTC)
DAY = datetime(2024, 4, 9, tzinfo=UTC)
NO_JARS = (
    f"needs Delta Lake's JVM jars in the test session: set {ENV_VAR} to local delta-spark and delta-storage "
    "jar files (nothing is ever downloaded)"
)


@pytest.fixture
def without_delta(spark):
    available, why = delta_spark_status(spark)
    if available:
        pytest.skip(f"this session has Delta's classes ({why}); the test is about a session without them")


@pytest.fixture
def writer(spark):
    """The delta-spark writer, when the session has Delta's classes."""
    available, why = delta_spark_status(spark)
    if not available:
        pytest.skip(f"{NO_JARS}; now {why}")
    return DeltaSparkWriter(spark)


# -- choosing the writer ----------------------------------------------------------------------------


def test_auto_without_delta_classes_uses_delta_rs_and_logs_why(spark, without_delta, caplog):
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge.delta")
    chosen = select_writer("auto", spark)
    assert isinstance(chosen, DeltaRsWriter) and chosen.name == "delta-rs"
    assert any(
        "writer delta-rs" in r.getMessage() and "io.delta.tables.DeltaTable does not load" in r.getMessage()
        for r in caplog.records
    )


def test_delta_spark_without_delta_classes_is_a_config_error_saying_how_to_provide_jars(spark, without_delta):
    with pytest.raises(ConfigError) as error:
        select_writer("delta-spark", spark)
    message = str(error.value)
    assert error.value.argument == "backend"
    assert "io.delta.tables.DeltaTable does not load" in message
    assert "default_session(delta_jars=" in message and "spark-submit --jars" in message
    assert "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension" in message


def test_auto_with_delta_classes_uses_delta_spark(spark, writer, caplog):
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge.delta")
    chosen = select_writer("auto", spark)
    assert isinstance(chosen, DeltaSparkWriter) and chosen.name == "delta-spark"
    assert any("writer delta-spark" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("path", ["/data/lake/orders", "file:///data/lake/orders", "C:\\lake\\orders"])
def test_spark_reaches_a_local_path(spark, path):
    assert spark_reaches(spark, path)[0]


@pytest.mark.parametrize("scheme", ["s3", "s3a", "gs", "nosuchfs"])
def test_spark_does_not_reach_a_scheme_its_hadoop_has_no_file_system_for(spark, scheme):
    """pyspark alone has no hadoop-aws or GCS connector: Hadoop itself says so, naming the scheme."""
    reaches, why = spark_reaches(spark, f"{scheme}://bucket/lake/orders")
    assert not reaches
    assert f"no file system for {scheme!r}" in why


def test_spark_reaches_a_scheme_once_its_hadoop_is_given_a_file_system_for_it(spark):
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set("fs.mylake.impl", "org.apache.hadoop.fs.RawLocalFileSystem")
    try:
        reaches, why = spark_reaches(spark, "mylake://bucket/orders")
    finally:
        hadoop.unset("fs.mylake.impl")
    assert reaches and "org.apache.hadoop.fs.RawLocalFileSystem" in why


def test_auto_takes_delta_rs_for_a_table_spark_cannot_reach_and_says_what_spark_needs(spark, writer, caplog):
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge.delta")
    chosen = select_writer("auto", spark, {}, lambda: 10**12, table_path="s3://bucket/lake/orders")
    assert chosen.name == "delta-rs"
    said = " ".join(r.getMessage() for r in caplog.records if "writer delta-rs" in r.getMessage())
    assert "no file system for 's3'" in said and "hadoop-aws" in said and "fs.s3.impl" in said


def test_delta_spark_for_a_table_spark_cannot_reach_is_a_config_error_saying_what_it_needs(spark, writer):
    with pytest.raises(ConfigError) as error:
        select_writer("delta-spark", spark, table_path="s3a://bucket/lake/orders")
    message = str(error.value)
    assert error.value.argument == "backend"
    assert "no file system for 's3a'" in message and "hadoop-aws" in message
    assert "backend='delta-rs'" in message and "Nothing was read or committed" in message


def test_auto_takes_delta_spark_for_a_local_table_whatever_the_batch(spark, writer, monkeypatch):
    monkeypatch.setenv(AUTO_DELTA_RS_MAX_ENV, "0")
    assert select_writer("auto", spark, {}, lambda: 1, table_path="/data/lake/orders").name == "delta-spark"


def test_the_class_check_runs_once_per_session(spark, monkeypatch):
    probes = []
    real_probe = spark_status._probe_delta_classes
    monkeypatch.setattr(spark_status, "_probe_delta_classes", lambda s: probes.append(s) or real_probe(s))
    monkeypatch.setattr(spark_status, "_availability", type(spark_status._availability)())
    names = {select_writer("auto", spark).name for _ in range(3)}
    assert probes == [spark] and len(names) == 1


def test_the_metrics_and_the_load_record_name_the_writer_used(spark, dataset, monkeypatch):
    monkeypatch.setenv(AUTO_DELTA_RS_MAX_ENV, "0")  # no batch is small enough for delta-rs where both exist
    expected = "delta-spark" if delta_spark_status(spark)[0] else "delta-rs"
    rows = [{"id": 1, "name": "a"}]
    info = run_load(rows, spark=spark, dataset=dataset, table_name="items", backend="auto")
    assert info.metrics["writer"] == expected
    assert [r["metrics"]["writer"] for r in read_loads(dataset)] == [expected]
    assert read_rows(f"{dataset}/items") == [{"id": 1, "name": "a"}]


ORDERS = [{"id": n, "name": f"order {n}"} for n in range(1, 4)]


def auto_load(spark, dataset, rows, caplog) -> tuple[str, list[str]]:
    caplog.clear()
    upsert = {"disposition": "merge", "strategy": "upsert"}
    info = run_load(
        rows, spark=spark, dataset=dataset, table_name="items", write_disposition=upsert, primary_key="id"
    )
    said = [r.getMessage() for r in caplog.records if "for this batch" in r.getMessage()]
    return info.metrics["writer"], said


@pytest.fixture
def default_threshold(monkeypatch):
    """The built-in size threshold, whatever the environment running the suite sets."""
    monkeypatch.delenv(AUTO_DELTA_RS_MAX_ENV, raising=False)


@pytest.mark.usefixtures("default_threshold")
def test_auto_with_both_writers_takes_delta_rs_for_a_small_batch_and_says_why(spark, dataset, writer, caplog):
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge.delta")
    chosen, said = auto_load(spark, dataset, ORDERS, caplog)
    assert chosen == "delta-rs"
    [line] = said
    assert "writer delta-rs for this batch (backend 'auto'): Spark estimates it at " in line
    assert f"at most 64 MiB ({AUTO_DELTA_RS_MAX_ENV} sets it): delta-rs merging it from the driver" in line


@pytest.mark.usefixtures("default_threshold")
def test_auto_takes_delta_spark_for_a_batch_over_the_threshold_and_one_commit_format_either_way(
    spark, dataset, writer, caplog, monkeypatch
):
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge.delta")
    assert auto_load(spark, dataset, ORDERS, caplog)[0] == "delta-rs"
    monkeypatch.setenv(AUTO_DELTA_RS_MAX_ENV, "0.000001")  # one byte: every batch is over it
    changed = [{"id": 3, "name": "changed"}, {"id": 4, "name": "order 4"}]
    chosen, [line] = auto_load(spark, dataset, changed, caplog)
    assert chosen == "delta-spark"
    assert "writer delta-spark for this batch (backend 'auto'): Spark estimates it at " in line
    assert f"({AUTO_DELTA_RS_MAX_ENV} sets it): Delta's MERGE runs it there" in line
    assert read_rows(f"{dataset}/items") == [*ORDERS[:2], *changed]
    loads = sorted(read_loads(dataset), key=lambda load: load["load_id"])
    assert [load["metrics"]["writer"] for load in loads] == ["delta-rs", "delta-spark"]
    commits = read_commits(f"{dataset}/items")
    assert [c.load_id for c in commits] == [loads[1]["load_id"], loads[0]["load_id"]]
    assert (
        commits
        == DeltaRsWriter().history(f"{dataset}/items")
        == DeltaSparkWriter(spark).history(f"{dataset}/items")
    )


def test_auto_with_the_threshold_at_zero_never_sizes_the_batch(spark, dataset, writer, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="airflow_provider_deltamerge.delta")
    monkeypatch.setenv(AUTO_DELTA_RS_MAX_ENV, "0")
    chosen, [line] = auto_load(spark, dataset, ORDERS, caplog)
    assert chosen == "delta-spark" and f"{AUTO_DELTA_RS_MAX_ENV} is 0: Delta's MERGE wherever" in line


@pytest.mark.parametrize("value", ["lots", "-1", "inf", "nan"])
def test_a_threshold_that_is_no_number_of_mib_is_refused_before_any_commit(
    spark, dataset, writer, monkeypatch, value
):
    monkeypatch.setenv(AUTO_DELTA_RS_MAX_ENV, value)
    with pytest.raises(ConfigError) as refused:
        run_load(ORDERS, spark=spark, dataset=dataset, table_name="items", primary_key="id")
    assert refused.value.argument == AUTO_DELTA_RS_MAX_ENV and "is not a number of MiB" in str(refused.value)
    assert read_loads(dataset) == [] and not os.path.exists(f"{dataset}/items")


# -- the delta-spark writer's SQL, parsed and resolved by Spark -------------------------------------


class Capture:
    """Takes the DeltaTable / DeltaMergeBuilder calls so their SQL can be handed to Spark."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            return self

        return call


TABLE = "id long, day string, value string, _dlt_load_id string, _dlt_id string"
SCD2_TABLE = TABLE + ", _dlt_valid_from timestamp, _dlt_valid_to timestamp, is_active boolean"
HELPERS = {
    "__action": "string",
    "__k_id": "long",
    "__k_day": "string",
    "__hd": "boolean",
    "__retire_at": "timestamp",
}


def merge_plan(strategy, hints, hard_delete=False):
    disposition = WriteDisposition.parse({"disposition": "merge", "strategy": strategy})
    return plan_load(disposition, hints, table_exists=True, batch_empty=False, hard_delete=hard_delete)


def scd2_plan(settings, merge_key):
    return plan_scd2(settings, merge_key, table_exists=True, batch_empty=False, boundary=B)


PK, MK = ("id",), ("day",)
PLANS = {
    "delete-insert pk": (merge_plan("delete-insert", TableHints(primary_key=PK)), TABLE),
    "delete-insert mk": (merge_plan("delete-insert", TableHints(merge_key=MK)), TABLE),
    "delete-insert pk+mk": (merge_plan("delete-insert", TableHints(primary_key=PK, merge_key=MK)), TABLE),
    "upsert": (merge_plan("upsert", TableHints(primary_key=PK)), TABLE),
    "upsert hard delete": (merge_plan("upsert", TableHints(PK, hard_delete="d"), hard_delete=True), TABLE),
    "insert-only": (merge_plan("insert-only", TableHints(primary_key=PK)), TABLE),
    "scd2": (scd2_plan(Scd2Settings(), ()), SCD2_TABLE),
    "scd2 merge key": (scd2_plan(Scd2Settings(active_column="is_active"), PK), SCD2_TABLE),
}


@pytest.mark.parametrize("name", list(PLANS))
def test_every_condition_and_assignment_resolves_in_spark_against_source_and_target(spark, name):
    plan, table_schema = PLANS[name]
    helpers = [h for h in plan.helper_columns if h in HELPERS]
    source_schema = table_schema + "".join(f", {h} {HELPERS[h]}" for h in helpers)
    target = spark.createDataFrame([], table_schema)
    source = spark.createDataFrame([], source_schema)
    capture = Capture()
    merge_builder(capture, source, plan)
    on = capture.calls[1][1][1]
    joined = source.alias("s").join(target.alias("t"), F.expr(on), "full_outer")
    clauses = capture.calls[3:]
    conditions = [kw["condition"] for _, _, kw in clauses if kw.get("condition")]
    maps = [kw.get("set") or kw.get("values") or {} for _, _, kw in clauses]
    values = [v for m in maps for v in m.values()]
    assert joined.select(*(F.expr(e) for e in conditions + values)).collect() == []  # resolves, or raises
    target.select(*(F.expr(k) for m in maps for k in m)).collect()  # every key is a target column
    assert not any(h in k for m in maps for k in m for h in HELPERS)  # no helper column is ever assigned


def test_primary_and_merge_key_delete_rows_match_null_safely_and_insert_rows_never_match(spark):
    plan, _ = PLANS["delete-insert pk+mk"]
    capture = Capture()
    source = spark.createDataFrame(
        [(None, "x", "delete", 1, None), (1, "x", "insert", None, None)],
        "id long, value string, __action string, __k_id long, __k_day string",
    )
    merge_builder(capture, source, plan)
    target = spark.createDataFrame([(1, None, "old")], "id long, day string, value string")
    matched = source.alias("s").join(target.alias("t"), F.expr(capture.calls[1][1][1]))
    assert [r["__action"] for r in matched.select("s.__action").collect()] == ["delete"]


@pytest.mark.parametrize(
    "session",
    [{}, {"spark.sql.session.timeZone": "America/New_York", "spark.sql.timestampType": "TIMESTAMP_NTZ"}],
)
def test_literals_render_to_the_same_values_in_spark_whatever_the_session_settings(spark, session):
    plus_two = timezone(timedelta(hours=2))
    instants = [datetime(9999, 12, 31, tzinfo=UTC), B, datetime(2024, 1, 1, 12, 0, tzinfo=plus_two)]
    text = "it's C:\\temp\\new"
    wall_clock = render_spark(Lit(datetime(2024, 4, 9, 18, 27, 53, 734235)))
    query = (
        "SELECT "
        + ", ".join(f"unix_micros({render_spark(Lit(v))}) AS t{i}" for i, v in enumerate(instants))
        + f", {render_spark(Lit(date(2024, 2, 29)))} AS d, {render_spark(Lit(text))} AS s"
        + f", typeof({wall_clock}) AS ntz_type, CAST({wall_clock} AS STRING) AS ntz"
    )
    with session_conf(spark, session):
        row = spark.sql(query).first()
    assert [row[f"t{i}"] for i in range(3)] == [round(v.timestamp() * 1_000_000) for v in instants]
    assert (row["d"], row["s"]) == (date(2024, 2, 29), text)
    assert (row["ntz_type"], row["ntz"]) == ("timestamp_ntz", "2024-04-09 18:27:53.734235")


def test_a_replace_where_window_selects_exactly_the_window_rows(spark):
    rows = spark.createDataFrame(
        [(1, datetime(2024, 4, 8, 23, 59, 59, 999999, tzinfo=UTC)), (2, DAY), (3, B)],
        "id long, created_at timestamp",
    )
    window = And((Cmp(">=", Col("created_at"), Lit(DAY)), Cmp("<", Col("created_at"), Lit(B))))
    assert [r.id for r in rows.filter(render_spark(window)).collect()] == [2]


def test_merge_session_confs_are_restored_after_the_block_even_when_it_fails(spark):
    spark.conf.set(USER_METADATA_CONF, "someone else's")
    try:
        with pytest.raises(RuntimeError):
            with session_conf(spark, {USER_METADATA_CONF: "ours", TXN_APP_ID_CONF: "app"}):
                assert spark.conf.get(USER_METADATA_CONF) == "ours"
                assert spark.conf.get(TXN_APP_ID_CONF) == "app"
                raise RuntimeError("merge failed")
        assert spark.conf.get(USER_METADATA_CONF) == "someone else's"
        assert spark.conf.get(TXN_APP_ID_CONF, None) is None
    finally:
        spark.conf.unset(USER_METADATA_CONF)


FAR = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def test_the_local_session_writes_timestamps_that_pyarrow_reads_back_past_2262(spark, tmp_path):
    """INT96, Spark's default, reads back as nanoseconds in pyarrow and delta-rs: year 9999 overflows."""
    import pyarrow.parquet as pq

    assert spark.conf.get(PARQUET_TIMESTAMP_CONF) == TIMESTAMP_MICROS
    spark.createDataFrame([(1, FAR)], "id long, at timestamp").write.parquet(str(tmp_path / "far"))
    assert pq.read_table(str(tmp_path / "far")).to_pylist() == [{"id": 1, "at": FAR}]


# -- the delta-spark writer itself (needs the jars) -------------------------------------------------


FIRST, SECOND = "1700000000.000001", "1700000000.000002"


def commit_request(load_id: str) -> CommitRequest:
    txn = round(float(load_id) * 1_000_000)
    metadata = {"load_id": load_id, "pipeline": "shop", "rows_staged": 2}
    return CommitRequest(load_id, "deltamerge:shop:items", txn, metadata)


def rows_of(spark, *rows):
    return spark.createDataFrame(list(rows), "id long, value string")


def write(writer, spark, path, rows, load_id):
    return writer.commit(spark, path, None, MergePlan(Operation.WRITE), rows, commit_request(load_id))


def test_delta_spark_creates_then_upserts_with_metadata_metrics_and_history(spark, dataset, writer):
    path = f"{dataset}/items"
    created = write(writer, spark, path, rows_of(spark, (1, "a"), (2, "b")), FIRST)
    assert created.version == 0
    assert (created.metrics["numOutputRows"], created.metrics["numTargetFilesRemoved"]) == (2, 0)
    second = commit_request(SECOND)
    upsert = merge_plan("upsert", TableHints(primary_key=("id",)))
    snapshot = writer.snapshot(spark, path)
    merged = writer.commit(spark, path, snapshot, upsert, rows_of(spark, (2, "B"), (3, "c")), second)
    assert merged.version == 1 and not merged.already_applied
    counted = ("numSourceRows", "numTargetRowsInserted", "numTargetRowsUpdated")
    assert [merged.metrics[k] for k in counted] == [2, 1, 1]
    assert read_rows(path) == [{"id": 1, "value": "a"}, {"id": 2, "value": "B"}, {"id": 3, "value": "c"}]
    history = writer.history(path)
    first = commit_request(FIRST)
    assert [(c.version, c.metadata) for c in history] == [(1, second.metadata), (0, first.metadata)]
    assert history[0].metrics == merged.metrics
    assert spark.conf.get(TXN_APP_ID_CONF, None) is None and spark.conf.get(TXN_VERSION_CONF, None) is None


def test_delta_spark_reads_a_local_tables_commits_from_its_log_as_deltas_history_shows_them(
    spark, dataset, writer, monkeypatch
):
    """A table at a local path: the writer's history and its commit's version and metrics read from the
    log on the driver (driver_log) are those Delta's own history command shows, and no history job runs."""
    from delta.tables import DeltaTable

    from airflow_provider_deltamerge.delta import delta_spark
    from airflow_provider_deltamerge.delta.writer import logged_commit

    path = f"{dataset}/items"
    write(writer, spark, path, rows_of(spark, (1, "a"), (2, "b")), FIRST)
    asked = []
    history_job = delta_spark._history
    monkeypatch.setattr(delta_spark, "_history", lambda *a: asked.append(a) or history_job(*a))
    upsert = merge_plan("upsert", TableHints(primary_key=("id",)))
    snapshot = writer.snapshot(spark, path, writer.history(path, 10)[0].version)
    merged = writer.commit(
        spark, path, snapshot, upsert, rows_of(spark, (2, "B"), (3, "c")), commit_request(SECOND)
    )
    in_log = writer.history(path)
    assert asked == []
    shown = [
        logged_commit(r.asDict(recursive=True)) for r in DeltaTable.forPath(spark, path).history().collect()
    ]
    assert in_log == shown and [c.version for c in in_log] == [1, 0]
    assert (merged.version, merged.metrics) == (1, in_log[0].metrics)
    assert merged.metrics["numTargetRowsUpdated"] == merged.metrics["numTargetRowsInserted"] == 1


def test_the_driver_reads_no_log_of_a_remote_or_missing_table(spark, dataset):
    from airflow_provider_deltamerge.delta.driver_log import log_table

    assert log_table(spark, "s3://bucket/lake/items") is None
    assert log_table(spark, f"{dataset}/nothing_here") is None


def test_delta_spark_skips_a_load_whose_txn_version_is_recorded(spark, dataset, writer):
    path = f"{dataset}/items"
    write(writer, spark, path, rows_of(spark, (1, "a")), FIRST)
    upsert = merge_plan("upsert", TableHints(primary_key=("id",)))
    snapshot = writer.snapshot(spark, path)
    again = writer.commit(spark, path, snapshot, upsert, rows_of(spark, (1, "z")), commit_request(FIRST))
    assert (again.already_applied, again.version) == (True, 0)
    assert read_rows(path) == [{"id": 1, "value": "a"}]


def test_delta_spark_keeps_helper_columns_out_of_the_table(spark, dataset, writer):
    path = f"{dataset}/items"
    write(writer, spark, path, rows_of(spark, (1, "a"), (2, "b")), FIRST)
    plan = merge_plan("upsert", TableHints(primary_key=("id",), hard_delete="deleted"), hard_delete=True)
    source = spark.createDataFrame(
        [(1, "x", True), (3, "c", False), (4, "d", True)], "id long, value string, __hd boolean"
    )
    result = writer.commit(spark, path, writer.snapshot(spark, path), plan, source, commit_request(SECOND))
    assert read_rows(path) == [{"id": 2, "value": "b"}, {"id": 3, "value": "c"}]
    assert writer.snapshot(spark, path).schema.fieldNames() == ["id", "value"]
    assert (result.metrics["numTargetRowsDeleted"], result.metrics["numTargetRowsInserted"]) == (1, 1)


def test_delta_spark_refuses_an_overwrite_planned_on_an_older_version_and_merges_on_the_newest(
    spark, dataset, writer
):
    """An overwrite counts what it replaces on the version it was planned on, so a table that moved on
    refuses it; a plain upsert reads nothing of the table's and runs on the table as Delta finds it, whose
    own conflict check decides (delta_spark._planned_on_the_snapshot)."""
    path = f"{dataset}/items"
    write(writer, spark, path, rows_of(spark, (1, "a")), FIRST)
    stale = writer.snapshot(spark, path)
    writer.commit(
        spark, path, stale, MergePlan(Operation.WRITE), rows_of(spark, (2, "b")), commit_request(SECOND)
    )
    replace = MergePlan(Operation.OVERWRITE)
    with pytest.raises(ConflictError, match="changed from version 0 to 1"):
        writer.commit(
            spark, path, stale, replace, rows_of(spark, (9, "z")), commit_request("1700000000.000003")
        )
    assert writer.snapshot(spark, path).version == 1
    upsert = merge_plan("upsert", TableHints(primary_key=("id",)))
    merged = writer.commit(
        spark, path, stale, upsert, rows_of(spark, (1, "z")), commit_request("1700000000.000004")
    )
    assert merged.version == 2 and merged.metrics["numTargetRowsUpdated"] == 1
    assert read_rows(path) == [{"id": 1, "value": "z"}, {"id": 2, "value": "b"}]


def test_delta_spark_replace_reports_the_rows_and_files_it_removed(spark, dataset, writer):
    path = f"{dataset}/items"
    write(writer, spark, path, rows_of(spark, (1, "a"), (2, "b"), (3, "c")).coalesce(1), FIRST)
    replace = MergePlan(Operation.OVERWRITE)
    snapshot = writer.snapshot(spark, path)
    result = writer.commit(spark, path, snapshot, replace, rows_of(spark, (9, "z")), commit_request(SECOND))
    assert (result.metrics["numTargetRowsDeleted"], result.metrics["numTargetFilesRemoved"]) == (3, 1)
    assert read_rows(path) == [{"id": 9, "value": "z"}]


def test_delta_spark_writes_microsecond_timestamps_whatever_the_session_says(spark, dataset, writer):
    path = f"{dataset}/items"
    schema = "id long, value string, at timestamp"
    spark.conf.set(PARQUET_TIMESTAMP_CONF, "INT96")
    try:
        rows = spark.createDataFrame([(1, "a", FAR)], schema)
        writer.commit(spark, path, None, MergePlan(Operation.WRITE), rows, commit_request(FIRST))
        upsert = merge_plan("upsert", TableHints(primary_key=("id",)))
        changed = spark.createDataFrame([(1, "b", FAR), (2, "c", DAY)], schema)
        writer.commit(spark, path, writer.snapshot(spark, path), upsert, changed, commit_request(SECOND))
        assert spark.conf.get(PARQUET_TIMESTAMP_CONF) == "INT96"  # the session's own setting, restored
    finally:
        spark.conf.set(PARQUET_TIMESTAMP_CONF, TIMESTAMP_MICROS)
    # by id: rows sort by their text, and Delta stores the zone as "UTC", which reads back as ZoneInfo
    assert read_rows(path, order_by=("id",)) == [
        {"id": 1, "value": "b", "at": FAR},
        {"id": 2, "value": "c", "at": DAY},
    ]


def test_delta_spark_commits_read_the_same_through_either_writers_history(spark, dataset, writer):
    path = f"{dataset}/items"
    write(writer, spark, path, rows_of(spark, (1, "a"), (2, "b")), FIRST)
    upsert = merge_plan("upsert", TableHints(primary_key=("id",)))
    snapshot = writer.snapshot(spark, path)
    writer.commit(spark, path, snapshot, upsert, rows_of(spark, (2, "B")), commit_request(SECOND))
    by_delta = writer.history(path)
    assert [(c.version, c.load_id) for c in by_delta] == [(1, SECOND), (0, FIRST)]
    assert read_commits(path) == DeltaRsWriter().history(path) == by_delta
