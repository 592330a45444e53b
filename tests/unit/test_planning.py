"""plan_load: one MergePlan per disposition and strategy (pure; no Spark)."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.model.options import TableHints, WriteDisposition
from airflow_provider_deltamerge.plan.expressions import SOURCE, TARGET, Col, Lit, Not, eq, same
from airflow_provider_deltamerge.plan.merge import (
    ACTION,
    HARD_DELETE_FLAG,
    Clause,
    Operation,
    SourceShape,
    plan_load,
)

APPEND = WriteDisposition.parse("append")
REPLACE = WriteDisposition.parse("replace")
DELETE_INSERT = WriteDisposition.parse("merge")
UPSERT = WriteDisposition.parse({"disposition": "merge", "strategy": "upsert"})
INSERT_ONLY = WriteDisposition.parse({"disposition": "merge", "strategy": "insert-only"})
PK = TableHints(primary_key=("id",))


def plan(disposition, hints=PK, *, exists=True, empty=False, flagged=False, **extra):
    return plan_load(disposition, hints, table_exists=exists, batch_empty=empty, hard_delete=flagged, **extra)


def test_append_writes_and_an_empty_append_does_nothing():
    assert plan(APPEND).operation is Operation.WRITE
    assert plan(APPEND, exists=False).operation is Operation.WRITE
    assert plan(APPEND, empty=True).operation is Operation.NOTHING


def test_append_of_a_window_replaces_only_that_window():
    window = eq(Col("day"), Lit("2024-01-01"))
    replaced = plan(APPEND, replace_where=window)
    assert (replaced.operation, replaced.replace_where) == (Operation.OVERWRITE, window)
    assert plan(APPEND, exists=False, replace_where=window).operation is Operation.WRITE


def test_replace_overwrites_even_with_an_empty_batch():
    assert plan(REPLACE).operation is Operation.OVERWRITE
    assert plan(REPLACE, empty=True).operation is Operation.OVERWRITE  # truncates (WD-3)
    assert plan(REPLACE, exists=False).operation is Operation.OVERWRITE
    assert plan(REPLACE, exists=False, empty=True).operation is Operation.NOTHING
    assert plan(REPLACE).replace_where is None


@pytest.mark.parametrize("disposition", [DELETE_INSERT, UPSERT, INSERT_ONLY], ids=lambda d: d.label)
def test_an_empty_merge_batch_does_nothing(disposition):
    assert plan(disposition, empty=True).operation is Operation.NOTHING
    assert plan(disposition, empty=True, exists=False).operation is Operation.NOTHING


@pytest.mark.parametrize("disposition", [DELETE_INSERT, UPSERT, INSERT_ONLY], ids=lambda d: d.label)
def test_a_merge_into_a_new_table_writes_without_the_flag(disposition):
    written = plan(disposition, exists=False, flagged=True)
    assert written.operation is Operation.WRITE
    assert written.source is SourceShape.ROWS  # flagged rows are dropped, never written
    assert written.helper_columns == (HARD_DELETE_FLAG,)


def test_upsert_updates_all_and_inserts_on_the_primary_key():
    p = plan(UPSERT, TableHints(primary_key=("a", "b")))
    assert p.operation is Operation.MERGE
    assert p.on.operands == (eq(Col("a", TARGET), Col("a", SOURCE)), eq(Col("b", TARGET), Col("b", SOURCE)))
    assert p.clauses == (Clause("matched", "update_all"), Clause("not_matched", "insert_all"))
    assert p.helper_columns == ()


def test_upsert_with_hard_deletes_deletes_matched_flags_and_never_inserts_them():
    p = plan(UPSERT, flagged=True)
    flag = Col(HARD_DELETE_FLAG, SOURCE)
    assert p.source is SourceShape.ROWS_WITH_FLAG
    assert p.on == eq(Col("id", TARGET), Col("id", SOURCE))
    assert p.clauses == (
        Clause("matched", "delete", condition=flag),
        Clause("matched", "update_all"),
        Clause("not_matched", "insert_all", condition=Not(flag)),  # HD-7 as we differ: nothing inserted
    )
    assert p.helper_columns == (HARD_DELETE_FLAG,)


def test_insert_only_inserts_keys_not_present_and_never_updates_or_deletes():
    p = plan(INSERT_ONLY, flagged=True)
    assert p.operation is Operation.MERGE
    assert p.source is SourceShape.ROWS  # flagged rows are filtered before the merge (HD-8)
    assert p.on == eq(Col("id", TARGET), Col("id", SOURCE))
    assert p.clauses == (Clause("not_matched", "insert_all"),)
    assert HARD_DELETE_FLAG in p.helper_columns


def test_delete_insert_on_the_primary_key_deletes_staged_keys_and_inserts_rows():
    p = plan(DELETE_INSERT, flagged=True)
    assert p.operation is Operation.MERGE
    assert p.source is SourceShape.DELETE_KEYS_AND_ROWS
    assert p.delete_keys == ("id",)
    assert p.on == eq(Col("id", TARGET), Col("__k_id", SOURCE))
    assert p.clauses == (
        Clause("matched", "delete"),
        Clause("not_matched", "insert_all", condition=eq(Col(ACTION, SOURCE), Lit("insert"))),
    )
    assert set(p.helper_columns) == {ACTION, "__k_id", HARD_DELETE_FLAG}
    assert not p.needs_target_read


def test_delete_insert_on_a_merge_key_replaces_partitions():
    p = plan(DELETE_INSERT, TableHints(merge_key=("country", "region")))
    assert p.source is SourceShape.DELETE_KEYS_AND_ROWS
    assert p.delete_keys == ("country", "region")
    assert p.on.operands == (
        eq(Col("country", TARGET), Col("__k_country", SOURCE)),
        eq(Col("region", TARGET), Col("__k_region", SOURCE)),
    )
    assert set(p.helper_columns) == {ACTION, "__k_country", "__k_region"}


def test_delete_insert_with_both_keys_deletes_target_rows_matching_either():
    p = plan(DELETE_INSERT, TableHints(primary_key=("id",), merge_key=("day", "id")))
    assert p.source is SourceShape.TARGET_KEYS_AND_ROWS
    assert p.needs_target_read
    assert p.delete_keys == ("id", "day")  # each column once
    assert p.match_any_of == (("id",), ("day", "id"))
    # target tuples may hold NULLs, and 'insert' rows (NULL helpers) must never match
    assert p.on.operands == (
        same(Col("id", TARGET), Col("__k_id", SOURCE)),
        same(Col("day", TARGET), Col("__k_day", SOURCE)),
        eq(Col(ACTION, SOURCE), Lit("delete")),
    )
    assert p.clauses[0] == Clause("matched", "delete")


def test_delete_insert_without_keys_appends():
    p = plan(DELETE_INSERT, TableHints(), flagged=True)
    assert p.operation is Operation.WRITE
    assert p.helper_columns == (HARD_DELETE_FLAG,)


def test_every_plan_says_why():
    for p in (
        plan(APPEND),
        plan(REPLACE),
        plan(DELETE_INSERT),
        plan(UPSERT),
        plan(INSERT_ONLY),
        plan(APPEND, empty=True),
    ):
        assert p.reason


def test_a_merge_is_bounded_by_the_batch_key_ranges_only_where_no_unmatched_target_row_is_touched():
    from airflow_provider_deltamerge.plan.expressions import And, Cmp, Col, Lit
    from airflow_provider_deltamerge.plan.pruning import KeyRange, bounded

    hints = TableHints(primary_key=("id",))
    upsert = plan_load(
        WriteDisposition("merge", "upsert"), hints, table_exists=True, batch_empty=False, hard_delete=False
    )
    ranges = (KeyRange("id", 10, 20), KeyRange("other", "a", "b"))
    on = bounded(upsert, ranges).on
    assert isinstance(on, And)
    assert on.operands[-2:] == (Cmp(">=", Col("id", "t"), Lit(10)), Cmp("<=", Col("id", "t"), Lit(20)))
    assert bounded(upsert, ()) == upsert  # an empty batch has no ranges

    append = plan_load(
        WriteDisposition("append"), hints, table_exists=True, batch_empty=False, hard_delete=False
    )
    assert bounded(append, ranges) == append


def test_an_scd2_merge_of_events_is_bounded_by_the_batch_merge_key_ranges():
    """Its source holds the batch's keys only (new versions, and the table's versions of those keys it
    closes), and no clause acts on an unmatched target row: a version outside the range is untouched."""
    from airflow_provider_deltamerge.plan.expressions import Cmp
    from airflow_provider_deltamerge.plan.pruning import KeyRange, bounded, read_scope
    from airflow_provider_deltamerge.plan.scd2 import Scd2Settings
    from airflow_provider_deltamerge.plan.scd2_feed import plan_scd2_events

    events = plan_scd2_events(Scd2Settings(), ("id",), table_exists=True, batch_empty=False)
    on = bounded(events, (KeyRange("id", 3, 8),)).on
    assert on.operands[-2:] == (Cmp(">=", Col("id", TARGET), Lit(3)), Cmp("<=", Col("id", TARGET), Lit(8)))
    assert read_scope(bounded(events, (KeyRange("id", 3, 8, (3, 8)),)), ("id",)) == ()  # read: all of it


def test_a_merge_names_the_partitions_of_the_batch_where_it_lists_them():
    from airflow_provider_deltamerge.plan.expressions import Cmp, Col, In, Lit
    from airflow_provider_deltamerge.plan.pruning import KeyRange, bounded

    hints = TableHints(primary_key=("day", "id"))
    upsert = plan_load(
        WriteDisposition("merge", "upsert"), hints, table_exists=True, batch_empty=False, hard_delete=False
    )
    ranges = (KeyRange("day", 1, 30, values=(1, 30)), KeyRange("id", 5, 9))
    bounds = bounded(upsert, ranges).on.operands[-3:]
    assert bounds[0] == In(Col("day", "t"), (Lit(1), Lit(30)))  # days 2-29 are neither read nor locked
    assert bounds[1:] == (Cmp(">=", Col("id", "t"), Lit(5)), Cmp("<=", Col("id", "t"), Lit(9)))


def test_what_a_plan_reads_is_the_partitions_its_condition_names_else_the_whole_table():
    from airflow_provider_deltamerge.plan.expressions import Cmp, In
    from airflow_provider_deltamerge.plan.pruning import KeyRange, bounded, read_scope, rewrites_files

    keyed = TableHints(primary_key=("day", "id"))
    named = bounded(plan(UPSERT, keyed), (KeyRange("day", 1, 5, (1, 5)), KeyRange("id", 0, 7)))
    spanned = bounded(plan(UPSERT, keyed), (KeyRange("day", 1, 5), KeyRange("id", 0, 7)))
    day = Col("day", TARGET)
    assert read_scope(named, ("day",)) == (In(day, (Lit(1), Lit(5))),)
    assert read_scope(spanned, ("day",)) == (Cmp(">=", day, Lit(1)), Cmp("<=", day, Lit(5)))
    assert read_scope(named, ()) == ()  # an unpartitioned table: all of it
    window = Cmp(">=", Col("day"), Lit(3))
    assert read_scope(plan(APPEND, replace_where=window), ("day",)) == (window,)
    assert read_scope(plan(REPLACE), ("day",)) == ()
    both_keys = plan(DELETE_INSERT, TableHints(primary_key=("id",), merge_key=("day",)))
    assert both_keys.needs_target_read and read_scope(both_keys, ("day",)) == ()  # its source read all
    assert [rewrites_files(plan(d)) for d in (APPEND, REPLACE, UPSERT)] == [False, True, True]
