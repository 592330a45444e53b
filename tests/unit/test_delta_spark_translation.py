"""The delta-spark writer without Delta's jars: MergePlans as DeltaMergeBuilder calls, write options, the
commit metadata both writers share, metrics, and what one commit reads and sets.

`Recording` stands in for delta.tables.DeltaTable / DeltaMergeBuilder: it accepts only methods the real
classes have, with arguments their signatures accept, and records the calls. `DeltaStandIn` goes one
step further for the writer's commit path: the same checks over a history kept in memory, where a MERGE
or a write commits as Delta does.
"""

from __future__ import annotations

import inspect
import json
import re
from datetime import datetime, timezone

import pytest
from delta.exceptions import ConcurrentAppendException
from delta.tables import DeltaMergeBuilder, DeltaTable

from airflow_provider_deltamerge.delta.delta_spark import (
    DeltaSparkSnapshot,
    DeltaSparkWriter,
    TableRef,
    load_table,
)
from airflow_provider_deltamerge.delta.spark_sql import (
    MATERIALIZE_SOURCE_CONF,
    OPTIMIZE_WRITE_CONF,
    PARQUET_TIMESTAMP_CONF,
    TIMESTAMP_MICROS,
    TXN_APP_ID_CONF,
    TXN_VERSION_CONF,
    USER_METADATA_CONF,
    commit_session_conf,
    merge_builder,
    render_spark,
    write_mode,
    write_options,
)
from airflow_provider_deltamerge.delta.writer import (
    MERGE_METRICS_FROM_DELTA_RS,
    CommitRequest,
    commit_metadata,
    logged_commit,
    merge_metrics,
    write_commit_metrics,
    write_metrics,
)
from airflow_provider_deltamerge.errors import ConflictError
from airflow_provider_deltamerge.model.options import TableHints, WriteDisposition
from airflow_provider_deltamerge.plan.expressions import And, Cmp, Col, Lit
from airflow_provider_deltamerge.plan.merge import MergePlan, Operation, plan_load
from airflow_provider_deltamerge.plan.pruning import KeyRange, bounded
from airflow_provider_deltamerge.plan.scd2 import Scd2Settings, plan_scd2
from airflow_provider_deltamerge.plan.scd2_feed import plan_scd2_events

UTC = timezone.utc
B = datetime(2024, 4, 9, 18, 27, 53, 734235, tzinfo=UTC)
DATA = ["id", "day", "value", "_dlt_load_id", "_dlt_id"]
REQUEST = CommitRequest(
    load_id="1712687273.734235",
    app_id="deltamerge:shop:items",
    txn_version=1712687273734235,
    metadata={
        "load_id": "1712687273.734235",
        "pipeline": "shop",
        "table": "items",
        "rows_staged": 3,
        "window": {"start": "2024-04-09T00:00:00+00:00", "end": "2024-04-10T00:00:00+00:00"},
        "run": {"dag_id": "d", "try_number": 1, "conf": {}},
    },
)


class Recording:
    """A delta.tables object that records calls after checking them against the real class."""

    RETURNS = {"alias": DeltaTable, "merge": DeltaMergeBuilder, "forPath": DeltaTable, "forName": DeltaTable}

    def __init__(self, real, calls):
        self._real, self._calls = real, calls

    def __getattr__(self, name):
        method = getattr(self._real, name)  # AttributeError: Delta's class has no such method
        signature = inspect.signature(method)

        bound_to_class = isinstance(inspect.getattr_static(self._real, name), classmethod)

        def call(*args, **kwargs):
            # TypeError: Delta would not accept these arguments (instance methods get a stand-in self)
            signature.bind(*(args if bound_to_class else (None, *args)), **kwargs)
            for mapping in (kwargs.get("set"), kwargs.get("values")):
                assert mapping is None or (mapping and all(isinstance(v, str) for v in mapping.values()))
            self._calls.append((name, *args, *(f"{k}={v!r}" for k, v in kwargs.items())))
            return Recording(self.RETURNS.get(name, self._real), self._calls)

        return call


class Source:
    """The shaped source DataFrame as the builder sees it: its columns and an alias."""

    def __init__(self, columns, alias=None):
        self.columns, self.alias_name = list(columns), alias

    def alias(self, name):
        return Source(self.columns, name)

    def __repr__(self):
        return f"<source {self.alias_name}>"


def builder_calls(plan, columns):
    calls = []
    merge_builder(Recording(DeltaTable, calls), Source(columns), plan)
    return calls


def merge(strategy, hints, hard_delete=False):
    disposition = WriteDisposition.parse({"disposition": "merge", "strategy": strategy})
    return plan_load(disposition, hints, table_exists=True, batch_empty=False, hard_delete=hard_delete)


IS_INSERT_ROW = "condition=\"s.`__action` = 'insert'\""


def copies(columns):
    return {f"`{c}`": f"s.`{c}`" for c in columns}


def test_delete_insert_on_primary_key_deletes_matches_and_inserts_rows_without_helpers():
    plan = merge("delete-insert", TableHints(primary_key=("id",)))
    calls = builder_calls(plan, DATA + ["__action", "__k_id"])
    names = ["alias", "merge", "withSchemaEvolution", "whenMatchedDelete", "whenNotMatchedInsert"]
    assert [c[0] for c in calls] == names
    assert calls[0] == ("alias", "t")
    assert calls[1][2] == "t.`id` = s.`__k_id`" and repr(calls[1][1]) == "<source s>"
    assert calls[3] == ("whenMatchedDelete", "condition=None")
    assert calls[4] == ("whenNotMatchedInsert", IS_INSERT_ROW, f"values={copies(DATA)!r}")


def test_delete_insert_on_merge_key_joins_on_the_merge_key_helper():
    plan = merge("delete-insert", TableHints(merge_key=("day",)))
    calls = builder_calls(plan, DATA + ["__action", "__k_day"])
    assert calls[1][2] == "t.`day` = s.`__k_day`"
    assert calls[4][2] == f"values={copies(DATA)!r}"


def test_delete_insert_on_primary_and_merge_key_joins_on_both_target_key_helpers():
    plan = merge("delete-insert", TableHints(primary_key=("id",), merge_key=("day",)))
    calls = builder_calls(plan, DATA + ["__action", "__k_id", "__k_day"])
    assert calls[1][2] == (
        "(t.`id` IS NOT DISTINCT FROM s.`__k_id`) AND (t.`day` IS NOT DISTINCT FROM s.`__k_day`) "
        "AND (s.`__action` = 'delete')"
    )
    assert [c[0] for c in calls[3:]] == ["whenMatchedDelete", "whenNotMatchedInsert"]
    assert calls[4][2] == f"values={copies(DATA)!r}"


def test_delete_insert_with_hard_delete_drops_the_flag_from_the_inserted_columns():
    plan = merge("delete-insert", TableHints(primary_key=("id",), hard_delete="deleted"), hard_delete=True)
    assert "__hd" in plan.helper_columns
    calls = builder_calls(plan, DATA + ["__action", "__k_id"])  # shaping drops flagged rows and the flag
    assert calls[4][2] == f"values={copies(DATA)!r}"


def test_upsert_without_helpers_uses_deltas_update_all_and_insert_all():
    plan = merge("upsert", TableHints(primary_key=("id",)))
    calls = builder_calls(plan, DATA)
    assert calls[1][2] == "t.`id` = s.`id`"
    assert calls[2:] == [
        ("withSchemaEvolution",),
        ("whenMatchedUpdateAll", "condition=None"),
        ("whenNotMatchedInsertAll", "condition=None"),
    ]


def test_upsert_of_events_updates_only_where_the_event_is_newer_than_the_rows_sequence():
    plan = merge("upsert", TableHints(primary_key=("id",), sequence_by=("day", "pos")))
    newer = (
        "(t.`_dlt_sequence` IS NULL) OR (s.`_dlt_sequence` > t.`_dlt_sequence`) OR "
        "((s.`_dlt_sequence` = t.`_dlt_sequence`) AND (s.`_dlt_sequence_2` > t.`_dlt_sequence_2`))"
    )
    assert builder_calls(plan, DATA)[3:] == [
        ("whenMatchedUpdateAll", f"condition={newer!r}"),
        ("whenNotMatchedInsertAll", "condition=None"),
    ]


def test_upsert_of_events_with_deletes_deletes_a_row_only_for_a_newer_delete_event():
    hints = TableHints(primary_key=("id",), sequence_by=("seq",), apply_as_deletes="op = 'D'")
    plan = merge("upsert", hints, hard_delete=True)
    assert plan.on_snapshot  # its source was filtered by the tombstones read at the planned version
    newer = "(t.`_dlt_sequence` IS NULL) OR (s.`_dlt_sequence` > t.`_dlt_sequence`)"
    assert builder_calls(plan, DATA + ["__hd"])[3:] == [
        ("whenMatchedDelete", f"condition={'(s.`__hd`) AND (' + newer + ')'!r}"),
        ("whenMatchedUpdate", f"condition={newer!r}", f"set={copies(DATA)!r}"),
        ("whenNotMatchedInsert", "condition='NOT (s.`__hd`)'", f"values={copies(DATA)!r}"),
    ]


def test_upsert_of_events_with_a_truncate_deletes_the_unmatched_rows_not_newer_than_it():
    hints = TableHints(primary_key=("id",), sequence_by=("day", "pos"), apply_as_truncates="op = 'T'")
    disposition = WriteDisposition.parse({"disposition": "merge", "strategy": "upsert"})
    plan = plan_load(
        disposition, hints, table_exists=True, batch_empty=False, hard_delete=True, truncate=(3, 7)
    )
    assert plan.on_snapshot
    older = (
        "(t.`_dlt_sequence` IS NULL) OR ((t.`_dlt_sequence` < 3) OR "
        "((t.`_dlt_sequence` = 3) AND (t.`_dlt_sequence_2` <= 7)))"
    )
    calls = builder_calls(plan, DATA + ["__hd"])
    assert [c[0] for c in calls[3:]] == [
        "whenMatchedDelete",
        "whenMatchedUpdate",
        "whenNotMatchedInsert",
        "whenNotMatchedBySourceDelete",
    ]
    assert calls[-1] == ("whenNotMatchedBySourceDelete", f"condition={older!r}")
    first = plan_load(
        disposition,
        hints,
        table_exists=True,
        batch_empty=False,
        hard_delete=True,
        table_columns=("id", "day", "pos"),  # no sequence yet: every unmatched row goes
        truncate=(3, 7),
    )
    assert builder_calls(first, DATA + ["__hd"])[-1] == ("whenNotMatchedBySourceDelete", "condition=None")


def test_upsert_with_hard_delete_deletes_flagged_matches_and_copies_columns_explicitly():
    plan = merge("upsert", TableHints(primary_key=("id",), hard_delete="deleted"), hard_delete=True)
    calls = builder_calls(plan, DATA + ["__hd"])
    assert calls[3:] == [
        ("whenMatchedDelete", "condition='s.`__hd`'"),
        ("whenMatchedUpdate", "condition=None", f"set={copies(DATA)!r}"),
        ("whenNotMatchedInsert", "condition='NOT (s.`__hd`)'", f"values={copies(DATA)!r}"),
    ]


def test_insert_only_inserts_unmatched_keys_with_insert_all():
    plan = merge("insert-only", TableHints(primary_key=("id",)))
    assert builder_calls(plan, DATA)[3:] == [("whenNotMatchedInsertAll", "condition=None")]
    flagged = merge("insert-only", TableHints(primary_key=("id",), hard_delete="deleted"), hard_delete=True)
    # shaping drops flagged rows and the flag, so Delta's own insert-all applies
    assert builder_calls(flagged, DATA)[3:] == [("whenNotMatchedInsertAll", "condition=None")]


def test_scd2_full_extract_inserts_new_versions_and_retires_absent_active_ones():
    plan = plan_scd2(Scd2Settings(), (), table_exists=True, batch_empty=False, boundary=B)
    columns = ["id", "value", "_dlt_load_id", "_dlt_id", "_dlt_valid_from", "_dlt_valid_to"]
    calls = builder_calls(plan, columns)
    assert calls[1][2] == "(t.`_dlt_id` = s.`_dlt_id`) AND (t.`_dlt_valid_to` IS NULL)"
    assert calls[3:] == [
        ("whenNotMatchedInsertAll", "condition=None"),
        (
            "whenNotMatchedBySourceUpdate",
            "condition='t.`_dlt_valid_to` IS NULL'",
            "set={'`_dlt_valid_to`': \"TIMESTAMP '2024-04-09T18:27:53.734235+00:00'\"}",
        ),
    ]


def test_scd2_with_merge_key_retires_via_helper_rows_and_inserts_without_helpers():
    settings = Scd2Settings(active_column="is_active")
    plan = plan_scd2(settings, ("id",), table_exists=True, batch_empty=False, boundary=B)
    data = ["id", "value", "_dlt_load_id", "_dlt_id", "_dlt_valid_from", "_dlt_valid_to", "is_active"]
    calls = builder_calls(plan, data + ["__action", "__retire_at"])
    assert calls[1][2] == "(t.`id` = s.`id`) AND (t.`_dlt_id` = s.`_dlt_id`) AND (t.`_dlt_valid_to` IS NULL)"
    assert calls[3:] == [
        (
            "whenMatchedUpdate",
            "condition=\"s.`__action` = 'retire'\"",
            "set={'`_dlt_valid_to`': 's.`__retire_at`', '`is_active`': 'FALSE'}",
        ),
        ("whenNotMatchedInsert", IS_INSERT_ROW, f"values={copies(data)!r}"),
    ]


def test_scd2_of_events_finds_versions_by_key_and_valid_from_closes_them_and_inserts_without_helpers():
    plan = plan_scd2_events(Scd2Settings(), ("id",), table_exists=True, batch_empty=False)
    data = ["id", "value", "_dlt_load_id", "_dlt_id", "_dlt_valid_from", "_dlt_valid_to"]
    calls = builder_calls(plan, data + ["__action", "__retire_at", "__split"])
    assert calls[1][2] == "(t.`id` = s.`id`) AND (t.`_dlt_valid_from` = s.`_dlt_valid_from`)"
    assert calls[3:] == [
        (
            "whenMatchedUpdate",
            "condition=\"s.`__action` = 'retire'\"",
            "set={'`_dlt_valid_to`': 's.`__retire_at`'}",
        ),
        ("whenNotMatchedInsert", IS_INSERT_ROW, f"values={copies(data)!r}"),
    ]


def test_a_clause_without_translation_is_refused():
    from airflow_provider_deltamerge.plan.merge import Clause

    plan = MergePlan(Operation.MERGE, on=Lit(True), clauses=(Clause("not_matched", "delete"),))
    with pytest.raises(ValueError, match="no translation for clause"):
        builder_calls(plan, DATA)


# -- writes -----------------------------------------------------------------------------------------


def write_plan(disposition, replace_where=None):
    return plan_load(
        WriteDisposition.parse(disposition),
        TableHints(),
        table_exists=True,
        batch_empty=False,
        hard_delete=False,
        replace_where=replace_where,
    )


def test_append_and_replace_write_with_schema_merge_metadata_and_txn():
    append, replace = (write_plan(d) for d in ("append", "replace"))
    expected = {
        "mergeSchema": "true",
        "userMetadata": REQUEST.user_metadata(),
        "txnAppId": "deltamerge:shop:items",
        "txnVersion": "1712687273734235",
    }
    assert (write_mode(append), write_options(append, REQUEST)) == ("append", expected)
    assert (write_mode(replace), write_options(replace, REQUEST)) == ("overwrite", expected)


def test_append_rerun_overwrites_only_the_window_with_replace_where():
    day_start = datetime(2024, 4, 9, tzinfo=UTC)
    window = And((Cmp(">=", Col("created_at"), Lit(day_start)), Cmp("<", Col("created_at"), Lit(B))))
    plan = write_plan("append", window)
    assert write_mode(plan) == "overwrite"
    assert write_options(plan, REQUEST)["replaceWhere"] == (
        "(`created_at` >= TIMESTAMP '2024-04-09T00:00:00+00:00') AND "
        "(`created_at` < TIMESTAMP '2024-04-09T18:27:53.734235+00:00')"
    )


def test_merge_gets_metadata_and_txn_as_session_confs_and_every_commit_microsecond_timestamps():
    assert commit_session_conf(merge("upsert", TableHints(primary_key=("id",))), REQUEST) == {
        USER_METADATA_CONF: REQUEST.user_metadata(),
        TXN_APP_ID_CONF: "deltamerge:shop:items",
        TXN_VERSION_CONF: "1712687273734235",
        PARQUET_TIMESTAMP_CONF: TIMESTAMP_MICROS,
        MATERIALIZE_SOURCE_CONF: "none",  # the staged batch is a local checkpoint: Delta copies it no more
    }
    for disposition in ("append", "replace"):  # writes take metadata and txn as options
        conf = commit_session_conf(write_plan(disposition), REQUEST)
        assert conf == {PARQUET_TIMESTAMP_CONF: TIMESTAMP_MICROS}


def test_a_merge_into_a_partitioned_table_bins_its_files_by_size():
    upsert = merge("upsert", TableHints(primary_key=("id",)))
    assert commit_session_conf(upsert, REQUEST, partitioned=True)[OPTIMIZE_WRITE_CONF] == "true"
    assert OPTIMIZE_WRITE_CONF not in commit_session_conf(upsert, REQUEST)
    assert OPTIMIZE_WRITE_CONF not in commit_session_conf(write_plan("append"), REQUEST, partitioned=True)


@pytest.mark.parametrize(
    "plan",
    [
        merge("delete-insert", TableHints(primary_key=("id",), merge_key=("day",))),
        merge("upsert", TableHints(primary_key=("id",), sequence_by=("ts",))),
    ],
    ids=["delete-insert-on-both-keys", "upsert-of-events"],
)
def test_a_merge_whose_source_reads_a_table_leaves_the_copy_of_its_source_to_delta(plan):
    """A source joined with the target's rows, or filtered by tombstones read at a version, is not the
    staged checkpoint alone: Delta decides whether to copy it, as it always does."""
    assert plan.needs_target_read or plan.on_snapshot
    assert MATERIALIZE_SOURCE_CONF not in commit_session_conf(plan, REQUEST)


def test_every_session_we_build_writes_timestamps_as_int64_microseconds():
    """INT96, Spark's default, reads back as nanoseconds in pyarrow and delta-rs: year 9999 overflows."""
    from airflow_provider_deltamerge.hooks.deltamerge import JOB_CONF
    from airflow_provider_deltamerge.spark.session import LOCAL_SESSION_CONF, local_session_conf

    for conf in (LOCAL_SESSION_CONF, local_session_conf(), JOB_CONF):
        assert conf[PARQUET_TIMESTAMP_CONF] == TIMESTAMP_MICROS


def test_spark_sql_types_timestamps_with_and_without_time_zone_and_dates():
    naive = datetime(2024, 4, 9, 18, 27, 53, 734235)
    assert render_spark(Lit(B)) == "TIMESTAMP '2024-04-09T18:27:53.734235+00:00'"
    assert render_spark(Lit(naive)) == "TIMESTAMP_NTZ '2024-04-09T18:27:53.734235'"
    assert render_spark(Lit(naive.date())) == "DATE '2024-04-09'"


def test_spark_sql_quotes_identifiers_and_escapes_string_literals():
    assert render_spark(Cmp("=", Col("we`ird", "t"), Lit("it's a\\b"))) == r"t.`we``ird` = 'it\'s a\\b'"


# -- tables, metadata and metrics -------------------------------------------------------------------


@pytest.mark.parametrize(
    "target, by_name",
    [
        ("/lake/items", False),
        ("s3://bucket/lake/items", False),
        ("lake/items", False),
        ("db.items", True),
        ("cat.db.items", True),
        ("items", True),
        ("a.b.c.d", False),
    ],
)
def test_a_table_is_a_metastore_name_or_a_path(target, by_name):
    ref = TableRef.parse(target)
    calls = []
    load_table(Recording(DeltaTable, calls), "SPARK", ref)
    assert ref.by_name is by_name
    assert calls == [("forName" if by_name else "forPath", "SPARK", target)]


PREFIXED = {f"deltamerge.{key}": value for key, value in REQUEST.metadata.items()}


def test_both_writers_record_the_metadata_as_one_json_object_in_user_metadata():
    text = REQUEST.user_metadata()
    assert json.loads(text) == PREFIXED  # the delta-rs writer commits this very text, and so does Delta
    assert write_options(write_plan("append"), REQUEST)["userMetadata"] == text
    merging = commit_session_conf(merge("upsert", TableHints(primary_key=("id",))), REQUEST)
    assert merging[USER_METADATA_CONF] == text


@pytest.mark.parametrize(
    "entry",
    [
        {"userMetadata": REQUEST.user_metadata()},  # both writers, now
        PREFIXED,  # the delta-rs writer before: top-level commitInfo keys
        {**PREFIXED, "userMetadata": "nightly run by hand"},  # and someone's own note beside them
        {**{k: "stale" for k in PREFIXED}, "userMetadata": REQUEST.user_metadata()},  # userMetadata first
    ],
    ids=["user-metadata", "top-level", "top-level-beside-free-text", "both"],
)
def test_one_reader_takes_the_metadata_from_user_metadata_or_the_earlier_top_level_keys(entry):
    entry = {"version": 7, "operation": "MERGE", "operationMetrics": {}, **entry}
    assert commit_metadata(entry) == REQUEST.metadata
    assert logged_commit(entry).load_id == REQUEST.load_id


@pytest.mark.parametrize("user_metadata", [None, "", "nightly run by hand", "[1, 2]", '{"owner": "ops"}'])
def test_a_commit_no_load_of_ours_made_has_no_metadata(user_metadata):
    entry = {"version": 3, "operation": "WRITE", "userMetadata": user_metadata, "engineInfo": "Apache-Spark"}
    assert commit_metadata(entry) == {} and logged_commit(entry).load_id is None


DELTA_MERGE_METRICS = {  # as Delta 4.x records them in operationMetrics: strings, and more names than ours
    "numSourceRows": "3",
    "numTargetRowsInserted": "1",
    "numTargetRowsUpdated": "1",
    "numTargetRowsMatchedUpdated": "1",
    "numTargetRowsNotMatchedBySourceUpdated": "0",
    "numTargetRowsDeleted": "1",
    "numTargetRowsMatchedDeleted": "1",
    "numTargetRowsNotMatchedBySourceDeleted": "0",
    "numTargetRowsCopied": "4",
    "numTargetBytesAdded": "1800",
    "numTargetBytesRemoved": "1500",
    "numOutputRows": "6",
    "numTargetFilesAdded": "2",
    "numTargetFilesRemoved": "1",
    "numTargetChangeFilesAdded": "0",
    "executionTimeMs": "812",
    "materializeSourceTimeMs": "40",
    "scanTimeMs": "300",
    "rewriteTimeMs": "450",
    "numTargetDeletionVectorsAdded": "0",
    "numTargetDeletionVectorsRemoved": "0",
    "numTargetDeletionVectorsUpdated": "0",
}


def test_merge_metrics_are_deltas_names_as_ints_limited_to_the_names_both_writers_report():
    metrics = merge_metrics(DELTA_MERGE_METRICS)
    assert metrics == {
        "numSourceRows": 3,
        "numTargetRowsInserted": 1,
        "numTargetRowsUpdated": 1,
        "numTargetRowsDeleted": 1,
        "numTargetRowsCopied": 4,
        "numOutputRows": 6,
        "numTargetFilesAdded": 2,
        "numTargetFilesRemoved": 1,
        "executionTimeMs": 812,
        "scanTimeMs": 300,
        "rewriteTimeMs": 450,
    }
    assert set(metrics) == set(MERGE_METRICS_FROM_DELTA_RS.values())
    without_scan = {k: v for k, v in DELTA_MERGE_METRICS.items() if k != "scanTimeMs"}
    assert "scanTimeMs" not in merge_metrics(without_scan)  # absent, never invented
    entry = {"version": 3, "operation": "MERGE", "operationMetrics": DELTA_MERGE_METRICS}
    assert logged_commit(entry).metrics == metrics


def test_write_metrics_take_the_merge_names_of_the_delta_rs_writer():
    append = {
        "operation": "WRITE",
        "operationParameters": {"mode": "Append"},
        "operationMetrics": {"numFiles": "2", "numOutputBytes": "2100", "numOutputRows": "5"},
    }
    assert write_commit_metrics(append, 0, 0) == write_metrics(5, 2, 0, 0)
    assert logged_commit({"version": 0, **append}).metrics == write_metrics(5, 2, 0, 0)  # removes nothing
    overwrite = {
        "operation": "WRITE",
        "operationParameters": {"mode": "Overwrite"},
        "operationMetrics": {"numFiles": "1", "numOutputBytes": "900", "numOutputRows": "2"},
    }
    assert write_commit_metrics(overwrite, 3, 7) == write_metrics(2, 1, 3, 7)  # counted on the snapshot
    assert "numTargetFilesRemoved" not in write_commit_metrics(overwrite)  # unknown, so absent
    replace_where = {
        "operation": "WRITE",
        "operationParameters": {"mode": "Overwrite", "predicate": "[...]"},
        "operationMetrics": {
            "numFiles": "1",
            "numOutputRows": "2",
            "numRemovedFiles": "1",
            "numDeletedRows": "4",
            "numCopiedRows": "0",
        },
    }
    assert write_commit_metrics(replace_where) == write_metrics(2, 1, 1, None)
    created = {
        "operation": "CREATE TABLE AS SELECT",
        "operationParameters": {"isManaged": "true"},
        "operationMetrics": {"numFiles": "1", "numOutputRows": "2"},
    }
    assert write_commit_metrics(created) == write_metrics(2, 1, 0, 0)


def test_write_metrics_read_alike_from_either_writers_history():
    """A commit is read the same whichever writer made it: delta-rs names its WRITE metrics differently."""
    by_delta_rs = {
        "operation": "WRITE",
        "operationParameters": {"mode": "Overwrite"},
        "operationMetrics": {"num_added_files": 1, "num_removed_files": 3, "num_added_rows": 2},
    }
    assert write_commit_metrics(by_delta_rs, rows_deleted=7) == write_metrics(2, 1, 3, 7)
    assert logged_commit({"version": 4, **by_delta_rs}).metrics == write_metrics(2, 1, 3, None)
    first_write = {
        "operation": "WRITE",
        "operationParameters": {"mode": "ErrorIfExists"},
        "operationMetrics": {"num_added_files": 1, "num_removed_files": 0, "num_added_rows": 5},
    }
    assert logged_commit({"version": 0, **first_write}).metrics == write_metrics(5, 1, 0, 0)
    merged = {"operation": "MERGE", "operationMetrics": {"num_source_rows": 3, "num_target_rows_updated": 1}}
    assert logged_commit({"version": 5, **merged}).metrics == {"numSourceRows": 3, "numTargetRowsUpdated": 1}


# -- one commit of the delta-spark writer, over a history kept in memory -----------------------------


class Conf:
    """A SparkSession's runtime conf."""

    def __init__(self):
        self.values: dict[str, str] = {}

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        self.values[key] = value

    def unset(self, key):
        self.values.pop(key, None)


class Session:
    """A SparkSession: its frames have `parallelism` partitions, its shuffles `shuffle_partitions`."""

    def __init__(self, parallelism=2, shuffle_partitions=2):
        self.conf, self.parallelism, self.shuffle_partitions = Conf(), parallelism, shuffle_partitions


class Frame:
    """A small DataFrame: the rows a history, detail or snapshot read gives."""

    def __init__(self, rows, calls=None, name="frame"):
        from pyspark.sql import Row

        self.rows, self.calls, self.name = [Row(**r) for r in rows], calls, name

    def select(self, *columns):
        return Frame([{c: r[c] for c in columns} for r in self.rows], self.calls, self.name)

    def first(self):
        return self.rows[0]

    def collect(self):
        return list(self.rows)

    def count(self):
        self.calls.append((f"{self.name}.count",))
        return len(self.rows)


def checked(real_class, name, args, kwargs):
    """Delta's class has this method and would accept these arguments (TypeError / AttributeError if not)."""
    method = getattr(real_class, name)
    bound_to_class = isinstance(inspect.getattr_static(real_class, name), classmethod)
    inspect.signature(method).bind(*(args if bound_to_class else (None, *args)), **kwargs)


def delta_exception(kind, message: str):
    """Delta's exception of that kind, as the delta-spark package raises it. PySpark 3.5 builds its
    captured exceptions only with a running JVM, which these tests have not: there, one of the kind
    that carries the message without one."""
    try:
        return kind(message)
    except AssertionError:

        class WithoutJvm(kind):
            def __init__(self, text: str):
                Exception.__init__(self, text)
                self.desc, self.stackTrace, self.cause, self._origin = text, "", None, None

            def __str__(self) -> str:
                return self.desc

        return WithoutJvm(message)


class DeltaStandIn:
    """delta.tables.DeltaTable (the class and its tables) over a history kept in memory, newest first.

    Calls are checked against Delta's classes and recorded. A MERGE's execute() and a write's save()
    commit as Delta does: a new version with the metadata and txn the session confs or the write
    options give it; `confs_at_commit` keeps the session confs each commit ran with. As in Delta, a write
    adds one file per partition of the frame written, a MERGE one per shuffle partition unless Delta's
    optimized write bins them; and a MERGE fails with Delta's ConcurrentAppendException where a commit
    landing while it runs (`during_merge`) added files it read: in the partitions its condition's
    target-only conjuncts on `partition_columns` name, or anywhere without such conjuncts.
    """

    def __init__(self, session, history):
        self.session, self.history_rows, self.calls, self.confs_at_commit = session, history, [], []
        self.partition_columns, self.during_merge = (), []

    def __getattr__(self, name):
        if name not in {"forPath", "forName", "isDeltaTable", "history", "detail", "alias", "merge"}:
            raise AttributeError(name)

        def call(*args, **kwargs):
            checked(DeltaTable, name, args, kwargs)
            self.calls.append((name, *args))
            return getattr(self, f"_{name}")(*args, **kwargs)

        return call

    def _forPath(self, spark, path):
        return self

    _forName = _forPath

    def _isDeltaTable(self, spark, identifier):
        return True

    def _history(self, limit=None):
        return Frame(self.history_rows[:limit], self.calls)

    def _detail(self):
        return Frame([{"numFiles": 99}], self.calls)

    def _alias(self, name):
        return self

    def _merge(self, source, condition):
        return MergeStandIn(self, condition)

    def version(self):
        return int(self.history_rows[0]["version"]) if self.history_rows else -1

    def commit(self, operation, metrics, parameters=None, user_metadata=None, added=({},)):
        """`added`: the partition values of each file the commit adds."""
        self.confs_at_commit.append(dict(self.session.conf.values))
        row = {
            "version": self.version() + 1,
            "operation": operation,
            "operationParameters": parameters or {},
            "operationMetrics": metrics,
            "userMetadata": user_metadata or self.session.conf.get(USER_METADATA_CONF),
            "added": added,
        }
        self.history_rows.insert(0, row)


class MergeStandIn:
    """DeltaMergeBuilder: clauses are checked and kept; execute() commits a MERGE."""

    def __init__(self, table, condition="TRUE"):
        self.table, self.condition = table, condition

    def __getattr__(self, name):
        def call(*args, **kwargs):
            checked(DeltaMergeBuilder, name, args, kwargs)
            return self

        return call

    def execute(self):
        table = self.table
        start = table.version()
        for land in table.during_merge:
            land()
        read = partitions_read(self.condition, table.partition_columns)
        for row in table.history_rows[: table.version() - start]:
            if row["operationParameters"].get("mode") != "Append" and any(map(read, row["added"])):
                raise delta_exception(
                    ConcurrentAppendException, f"files were added to {row['added']} by a concurrent update"
                )
        files = table.session.shuffle_partitions  # a file per partition of the MERGE's shuffle
        metrics = {"numSourceRows": "2", "numTargetRowsInserted": "1", "numTargetFilesAdded": str(files)}
        table.commit("MERGE", metrics)


def partitions_read(condition, partition_columns):
    """Whether a file with these partition values is read by a MERGE on `condition` (Spark SQL as the
    writer renders it): Delta prunes by the conjuncts on target partition columns and literals alone."""
    column = "|".join(map(re.escape, partition_columns)) or "(?!)"
    named = re.findall(rf"t\.`({column})` IN \(([^)]*)\)", condition)
    ranged = re.findall(rf"t\.`({column})` (>=|<=|=|<|>) (-?\d+)\b", condition)
    tests = [lambda v, c=c, vs=vs: str(v.get(c)) in vs.split(", ") for c, vs in named]
    tests += [lambda v, c=c, op=op, n=n: COMPARE[op](v.get(c, 0), int(n)) for c, op, n in ranged]
    return lambda values: all(t(values) for t in tests)


COMPARE = {">=": int.__ge__, "<=": int.__le__, "=": int.__eq__, "<": int.__lt__, ">": int.__gt__}


class WriteStandIn:
    """DataFrameWriter of the shaped source: save() commits a WRITE with the options' metadata, one file
    per partition of the frame."""

    def __init__(self, table, frame=None):
        self.table, self.settings, self.frame = table, {}, frame

    def format(self, name):
        return self

    def mode(self, mode):
        self.settings["mode"] = mode
        return self

    def options(self, **options):
        self.settings.update(options)
        return self

    def save(self, path):
        mode = "Overwrite" if self.settings["mode"] == "overwrite" else "Append"
        metrics = {"numFiles": str(self.frame.partitions if self.frame else 1), "numOutputRows": "1"}
        self.table.commit("WRITE", metrics, {"mode": mode}, self.settings["userMetadata"])

    saveAsTable = save


class ShapedSource(Source):
    def __init__(self, columns, table):
        super().__init__(columns)
        self.write = WriteStandIn(table, self)
        self.grouped_by: list[tuple] = []
        self.partitions = table.session.parallelism

    def drop(self, *columns):
        return self

    def repartition(self, count, *columns):
        self.partitions = count
        return self

    repartitionByRange = repartition

    def sortWithinPartitions(self, *columns):
        return self

    def groupBy(self, *columns):  # the unique-key check: a query that finds no duplicates
        self.grouped_by.append(columns)
        return NoDuplicates()


class NoDuplicates:
    def count(self):
        return self

    def filter(self, condition):
        return self

    def limit(self, n):
        return self

    def collect(self):
        return []


@pytest.fixture
def stand_in(monkeypatch):
    """The delta-spark writer's Delta, over a table whose newest version is 4."""
    return stand_in_for(Session(), monkeypatch)


def stand_in_for(session, monkeypatch):
    import delta.tables

    from airflow_provider_deltamerge.delta import driver_log

    # the stand-in commits to its own history, not to a log on disk: the writer reads its history
    monkeypatch.setattr(driver_log, "log_table", lambda spark, location: None)
    written = {"operation": "WRITE", "operationParameters": {}, "operationMetrics": {}, "userMetadata": None}
    history = [{"version": v, **written, "added": ({},)} for v in range(4, -1, -1)]
    table = DeltaStandIn(session, history)
    monkeypatch.setattr(delta.tables, "DeltaTable", table)
    return table


def commit_with(stand_in, plan, target="/lake/items", version=4):
    spark = stand_in.session
    ref = TableRef.parse(target)
    snapshot = DeltaSparkSnapshot(ref, version, None, Frame([{"id": 1}] * 3, stand_in.calls, "snapshot"))
    source = ShapedSource(DATA, stand_in)
    return DeltaSparkWriter(spark).commit(spark, target, snapshot, plan, source, REQUEST)


def test_a_merge_neither_counts_nor_describes_the_table_and_reads_only_the_newest_commit(stand_in):
    result = commit_with(stand_in, merge("upsert", TableHints(primary_key=("id",))))

    metrics = {"numSourceRows": 2, "numTargetRowsInserted": 1, "numTargetFilesAdded": 2}  # a file a partition
    assert (result.version, result.metrics) == (5, metrics)
    assert not [c for c in stand_in.calls if c[0] in {"detail", "snapshot.count"}]
    # one read of the newest commit, after it: a merge runs on the table as Delta finds it
    assert [c for c in stand_in.calls if c[0] == "history"] == [("history", 1)]
    (confs,) = stand_in.confs_at_commit
    assert confs == commit_session_conf(merge("upsert", TableHints(primary_key=("id",))), REQUEST)
    assert stand_in.session.conf.values == {}  # restored after the commit


def test_the_commit_of_a_load_is_looked_for_only_among_the_commits_after_its_plan(stand_in):
    class ConcurrentAppend(MergeStandIn):
        def execute(self):
            super().execute()
            self.table.commit("WRITE", {"numFiles": "1"}, {"mode": "Append"}, "another team's note")

    stand_in._merge = lambda source, condition: ConcurrentAppend(stand_in)
    result = commit_with(stand_in, merge("upsert", TableHints(primary_key=("id",))))

    assert result.version == 5 and not result.already_applied
    reads = [c for c in stand_in.calls if c[0] == "history"]
    assert reads == [("history", 1), ("history", 2)]


def test_a_write_sets_microsecond_timestamps_and_counts_nothing(stand_in):
    result = commit_with(stand_in, write_plan("append"), version=4)

    assert result.metrics == write_metrics(1, 1, 0, 0)
    assert not [c for c in stand_in.calls if c[0] in {"detail", "snapshot.count"}]
    assert stand_in.confs_at_commit == [{PARQUET_TIMESTAMP_CONF: TIMESTAMP_MICROS}]
    assert stand_in.history_rows[0]["userMetadata"] == REQUEST.user_metadata()


def test_a_session_that_has_microsecond_timestamps_already_is_not_asked_to_set_them(stand_in):
    class ServerConf(Conf):
        """A Spark Connect server's conf that sessions may read but not change."""

        def set(self, key, value):
            if key == PARQUET_TIMESTAMP_CONF:
                raise PermissionError(f"cannot modify {key}")
            super().set(key, value)

    stand_in.session.conf = ServerConf()
    stand_in.session.conf.values[PARQUET_TIMESTAMP_CONF] = TIMESTAMP_MICROS

    assert commit_with(stand_in, write_plan("append")).version == 5
    assert stand_in.confs_at_commit == [{PARQUET_TIMESTAMP_CONF: TIMESTAMP_MICROS}]


def test_a_full_overwrite_of_a_path_table_counts_what_it_removes_from_the_delta_log(stand_in, tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    path = str(tmp_path / "items")
    write_deltalake(path, pa.table({"id": [1, 2]}))
    write_deltalake(path, pa.table({"id": [3]}), mode="append")
    stand_in.history_rows = stand_in.history_rows[-2:]  # versions 1 and 0, as on disk

    result = commit_with(stand_in, write_plan("replace"), target=path, version=1)

    assert (result.metrics["numTargetFilesRemoved"], result.metrics["numTargetRowsDeleted"]) == (2, 3)
    assert not [c for c in stand_in.calls if c[0] in {"detail", "snapshot.count"}]


@pytest.mark.parametrize("target", ["db.items", "/nowhere/items"], ids=["metastore-table", "unreadable-path"])
def test_a_full_overwrite_counts_with_spark_where_the_driver_cannot_read_the_log(stand_in, target):
    result = commit_with(stand_in, write_plan("replace"), target=target)

    assert (result.metrics["numTargetFilesRemoved"], result.metrics["numTargetRowsDeleted"]) == (99, 3)
    counted = [c[0] for c in stand_in.calls if c[0] in {"detail", "snapshot.count"}]
    assert counted == ["detail", "snapshot.count"]


# -- what Delta's conflict check takes a merge to have read; the files a commit adds --------------------


def upsert_of_days(named: bool):
    """An upsert keyed by (day, id) into a table partitioned by day, of a batch of days 1 and 5, bounded
    by the batch's keys: its days named, or spanned by their range."""
    ranges = (KeyRange("day", 1, 5, (1, 5) if named else ()), KeyRange("id", 0, 7))
    return bounded(merge("upsert", TableHints(primary_key=("day", "id"))), ranges)


def a_load_into_day_3(stand_in):
    return lambda: stand_in.commit("MERGE", {}, added=({"day": 3},))


def test_a_merge_naming_its_partitions_lands_beside_loads_into_another_partition(stand_in):
    """One load into day 3 lands after the batch of days 1 and 5 was planned, one while its merge runs:
    Delta's check reads days 1 and 5 only, so the batch lands at its first attempt."""
    stand_in.partition_columns = ("day",)
    a_load_into_day_3(stand_in)()
    stand_in.during_merge.append(a_load_into_day_3(stand_in))

    assert commit_with(stand_in, upsert_of_days(named=True)).version == 7
    [condition] = [c[2] for c in stand_in.calls if c[0] == "merge"]
    assert condition.endswith("AND (t.`day` IN (1, 5)) AND (t.`id` >= 0) AND (t.`id` <= 7)")


def test_a_merge_spanning_its_partitions_conflicts_with_a_load_into_one_between(stand_in):
    stand_in.partition_columns = ("day",)
    stand_in.during_merge.append(a_load_into_day_3(stand_in))

    with pytest.raises(ConflictError, match="another writer changed table /lake/items"):
        commit_with(stand_in, upsert_of_days(named=False))
    assert stand_in.version() == 5  # the load into day 3 only


def test_a_write_adds_the_same_files_whichever_session_makes_it(monkeypatch):
    """A write is split by the batch's size, not by the session's partitioning. (A MERGE writes as
    Delta's MERGE does on the session's settings: a retry on a session like the first run's adds as many
    files.)"""
    sessions = [Session(parallelism=n, shuffle_partitions=2 * n) for n in (1, 2, 8)]
    plan = write_plan("append", Lit(True))
    added = [commit_with(stand_in_for(s, monkeypatch), plan).metrics["numTargetFilesAdded"] for s in sessions]
    assert added == [1, 1, 1]
