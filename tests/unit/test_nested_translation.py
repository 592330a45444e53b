"""Child-table commits as the delta-spark writer makes them (DeltaMergeBuilder calls, recorded)."""

from __future__ import annotations

from airflow_provider_deltamerge.plan.nested import plan_child_commit
from tests.unit.test_delta_spark_translation import IS_INSERT_ROW, builder_calls, copies

CHILD = ["bar", "_dlt_load_id", "_dlt_id", "_dlt_parent_id", "_dlt_list_idx", "_dlt_root_id"]


def child_plan(mode):
    return plan_child_commit(mode, table_exists=True, batch_empty=False, flagged=mode != "insert-only")


def test_delete_insert_deletes_child_rows_by_root_id_and_inserts_the_batchs():
    calls = builder_calls(child_plan("delete-insert"), CHILD + ["__action", "__k__dlt_root_id"])
    assert calls[1][2] == "t.`_dlt_root_id` = s.`__k__dlt_root_id`"
    assert calls[3:] == [
        ("whenMatchedDelete", "condition=None"),
        ("whenNotMatchedInsert", IS_INSERT_ROW, f"values={copies(CHILD)!r}"),
    ]


def test_upsert_merges_child_rows_on_their_id_and_deletes_the_flagged_ones():
    calls = builder_calls(child_plan("upsert"), CHILD + ["__hd"])
    assert calls[1][2] == "t.`_dlt_id` = s.`_dlt_id`"
    assert calls[3:] == [
        ("whenMatchedDelete", "condition='s.`__hd`'"),
        ("whenMatchedUpdate", "condition=None", f"set={copies(CHILD)!r}"),
        ("whenNotMatchedInsert", "condition='NOT (s.`__hd`)'", f"values={copies(CHILD)!r}"),
    ]


def test_insert_only_inserts_child_rows_with_new_ids():
    calls = builder_calls(child_plan("insert-only"), CHILD)
    assert calls[1][2] == "t.`_dlt_id` = s.`_dlt_id`"
    assert calls[3:] == [("whenNotMatchedInsertAll", "condition=None")]
