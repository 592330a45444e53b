"""The delta-spark writer without Delta's jars: MergePlans as DeltaMergeBuilder calls, write options, metrics.

`Recording` stands in for delta.tables.DeltaTable / DeltaMergeBuilder: it accepts only methods the real
classes have, with arguments their signatures accept, and records the calls.
"""

from __future__ import annotations

import inspect
from datetime import datetime, timezone

import pytest
from delta.tables import DeltaMergeBuilder, DeltaTable

from airflow_provider_deltamerge.delta.delta_spark import TableRef, load_table
from airflow_provider_deltamerge.delta.spark_sql import (
    TXN_APP_ID_CONF,
    TXN_VERSION_CONF,
    USER_METADATA_CONF,
    logged_commit,
    merge_builder,
    merge_session_conf,
    parse_user_metadata,
    render_spark,
    user_metadata,
    write_commit_metrics,
    write_mode,
    write_options,
)
from airflow_provider_deltamerge.delta.writer import (
    MERGE_METRICS_FROM_DELTA_RS,
    CommitRequest,
    merge_metrics,
    our_metadata,
    write_metrics,
)
from airflow_provider_deltamerge.plan.expressions import And, Cmp, Col, Lit
from airflow_provider_deltamerge.plan.merge import MergePlan, Operation, plan_load
from airflow_provider_deltamerge.plan.scd2 import Scd2Settings, plan_scd2
from airflow_provider_deltamerge.spec.options import TableHints, WriteDisposition

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
        "userMetadata": user_metadata(REQUEST),
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


def test_merge_gets_metadata_and_txn_as_session_confs():
    assert merge_session_conf(REQUEST) == {
        USER_METADATA_CONF: user_metadata(REQUEST),
        TXN_APP_ID_CONF: "deltamerge:shop:items",
        TXN_VERSION_CONF: "1712687273734235",
    }


def test_spark_sql_types_timestamps_with_and_without_time_zone_and_dates():
    naive = datetime(2024, 4, 9, 18, 27, 53, 734235)
    assert render_spark(Lit(B)) == "TIMESTAMP '2024-04-09T18:27:53.734235+00:00'"
    assert render_spark(Lit(naive)) == "TIMESTAMP_NTZ '2024-04-09T18:27:53.734235'"
    assert render_spark(Lit(naive.date())) == "DATE '2024-04-09'"


def test_spark_sql_quotes_identifiers_and_escapes_string_literals():
    assert render_spark(Cmp("=", Col("we`ird", "t"), Lit("it's a\\b"))) == "t.`we``ird` = 'it''s a\\\\b'"


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


def test_commit_metadata_reads_back_as_the_delta_rs_writer_gives_it():
    entry = {"version": 7, "operation": "MERGE", "userMetadata": user_metadata(REQUEST)}
    assert logged_commit(entry).metadata == REQUEST.metadata == our_metadata(REQUEST.custom_metadata())
    assert parse_user_metadata("nightly run by hand") == {} and parse_user_metadata(None) == {}


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
    assert logged_commit({"version": 0, **append}).metrics == write_metrics(5, 2, 0, None)
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
    assert write_commit_metrics(created) == write_metrics(2, 1, 0, None)
