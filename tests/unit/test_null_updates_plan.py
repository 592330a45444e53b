"""The plan of an upsert of partial updates (`ignore_null_updates`): a per-column CASE in the update, as
delta-spark's builder receives it (the recording stand-in) and as delta-rs renders it."""

from __future__ import annotations

import ast

from airflow_provider_deltamerge.delta.datafusion import DataFusionDialect
from airflow_provider_deltamerge.model.null_updates import sequences_shape
from airflow_provider_deltamerge.model.options import TableHints, WriteDisposition
from airflow_provider_deltamerge.plan.expressions import Case, Col, Lit, render
from airflow_provider_deltamerge.plan.merge import plan_load
from tests.unit.test_delta_spark_translation import builder_calls

UPSERT = WriteDisposition.parse({"disposition": "merge", "strategy": "upsert"})
HINTS = TableHints(primary_key=("id",), sequence_by=("seq",), ignore_null_updates=True)
SOURCE = ("id", "seq", "a", "_dlt_load_id", "_dlt_id", "_dlt_sequence", "_dlt_sequence_of_a")


def planned(table_columns, hints=HINTS, source=SOURCE, hard_delete=False, truncate=None, shapes=None):
    return plan_load(
        UPSERT,
        hints,
        table_exists=True,
        batch_empty=False,
        hard_delete=hard_delete,
        table_columns=table_columns,
        source_columns=source,
        truncate=truncate,
        shapes=shapes,
    )


def test_each_chosen_column_takes_the_events_value_only_where_it_is_newer_than_the_stored_one():
    plan = planned(SOURCE)
    assert plan.on_snapshot
    calls = builder_calls(plan, list(SOURCE))
    update, insert = calls[3], calls[4]
    assert insert == ("whenNotMatchedInsertAll", "condition=None")
    assert update[0] == "whenMatchedUpdate"
    sets = ast.literal_eval(update[2][len("set=") :])  # the repr of a dict of strings, as recorded
    row_newer = "(t.`_dlt_sequence` IS NULL) OR (s.`_dlt_sequence` > t.`_dlt_sequence`)"
    stored = (
        "CASE WHEN NOT (t.`_dlt_sequence_of_a` IS NULL) THEN t.`_dlt_sequence_of_a` "
        "WHEN NOT (t.`a` IS NULL) THEN t.`_dlt_sequence` END"
    )
    carried = "s.`_dlt_sequence_of_a`"
    a_newer = f"(NOT ({carried} IS NULL)) AND (({stored} IS NULL) OR ({carried} > {stored}))"
    assert update[1] == f"condition={f'({row_newer}) OR ({a_newer})'!r}"
    assert sets == {
        "`seq`": f"CASE WHEN {row_newer} THEN s.`seq` ELSE t.`seq` END",
        "`a`": f"CASE WHEN {a_newer} THEN s.`a` ELSE t.`a` END",
        "`_dlt_load_id`": "s.`_dlt_load_id`",
        "`_dlt_id`": "s.`_dlt_id`",
        "`_dlt_sequence`": f"CASE WHEN {row_newer} THEN s.`_dlt_sequence` ELSE t.`_dlt_sequence` END",
        "`_dlt_sequence_of_a`": f"CASE WHEN {a_newer} THEN s.`_dlt_sequence_of_a` ELSE {stored} END",
    }


def test_a_table_without_the_columns_yet_takes_the_events_values_and_compares_the_rows_sequence():
    plan = planned(("id", "seq", "_dlt_load_id", "_dlt_id", "_dlt_sequence"))
    sets = dict(plan.clauses[0].assignments)
    assert sets["a"] == Col("a", "s")  # no stored value to keep
    assert sets["_dlt_sequence_of_a"] == Col("_dlt_sequence_of_a", "s")
    legacy = planned(("id", "seq", "a", "_dlt_load_id", "_dlt_id", "_dlt_sequence"))
    kept = dict(legacy.clauses[0].assignments)["a"]
    assert 't."_dlt_sequence_of_a"' not in render(kept, DataFusionDialect())  # not in the table yet
    assert '"_dlt_sequence"' in render(kept, DataFusionDialect())  # the row's sequence stands in


def test_only_the_chosen_columns_are_kept_column_by_column():
    hints = TableHints(
        primary_key=("id",), sequence_by=("seq",), ignore_null_updates_except_column_list=("b",)
    )
    source = (*SOURCE, "b")
    sets = dict(planned((*SOURCE, "b"), hints, source).clauses[0].assignments)
    assert "_dlt_sequence_of_a" in render(sets["a"], DataFusionDialect())
    assert "_dlt_sequence_of" not in render(sets["b"], DataFusionDialect())  # the row's newest event's


def test_case_renders_in_both_dialects():
    case = Case(((Col("x", "s"), Lit(1)),), Lit(None))
    assert render(case, DataFusionDialect()) == 'CASE WHEN s."x" THEN 1 ELSE NULL END'
    assert render(Case(((Lit(True), Col("y")),)), DataFusionDialect()) == 'CASE WHEN TRUE THEN "y" END'


def test_the_arguments_travel_through_the_request_json_the_operator_and_the_load_command():
    from airflow_provider_deltamerge.cli.commands import load_arguments
    from airflow_provider_deltamerge.cli.parser import build_parser
    from airflow_provider_deltamerge.model.request import LoadRequest
    from airflow_provider_deltamerge.operators.merge import DeltaMergeOperator

    arguments = {
        "dataset": "/tmp/d",
        "table_name": "t",
        "write_disposition": {"disposition": "merge", "strategy": "upsert"},
        "primary_key": "id",
        "sequence_by": "seq",
        "ignore_null_updates_except_column_list": ["ZipCode"],
    }
    request = LoadRequest.create(**arguments)
    assert request.hints.ignore_null_updates_except_column_list == ("zip_code",)
    assert LoadRequest.from_json(request.to_json()).hints == request.hints
    operator = DeltaMergeOperator(task_id="cdc", source={"table": "e"}, ignore_null_updates=True, **arguments)
    loaded = operator.load_arguments({})
    assert (loaded["ignore_null_updates"], loaded["ignore_null_updates_except_column_list"]) == (
        True,
        ["ZipCode"],
    )
    command = ["load", "/tmp/d", "t", "--source", "events", "--sequence-by", "seq", "--ignore-null-updates"]
    command += ["--ignore-null-updates-column-list", "a,b"]
    parsed = load_arguments(build_parser().parse_args(command))
    assert (parsed["ignore_null_updates"], parsed["ignore_null_updates_column_list"]) == (True, ["a", "b"])
    assert load_arguments(build_parser().parse_args(command[:-3]))["ignore_null_updates"] is False


def test_with_deletes_a_newer_delete_deletes_and_a_delete_in_the_batch_resets_older_stored_values():
    hints = TableHints(
        primary_key=("id",), sequence_by=("seq",), ignore_null_updates=True, apply_as_deletes="op = 'D'"
    )
    plan = planned(SOURCE, hints, (*SOURCE, "__hd", "__deleted_at"), hard_delete=True)
    assert plan.helper_columns == ("__hd", "__deleted_at")
    delete, update, insert = plan.clauses
    dialect = DataFusionDialect()
    assert (delete.action, insert.action) == ("delete", "insert_all")
    assert render(delete.condition, dialect).startswith('(s."__hd") AND ')
    assert render(insert.condition, dialect) == 'NOT (s."__hd")'
    sets = dict(update.assignments)
    assert "__deleted_at" not in sets and "__hd" not in sets
    value = render(sets["a"], dialect)  # the event's, else the stored one newer than the delete, else null
    assert value.startswith("CASE WHEN ") and 's."__deleted_at" IS NULL' in value and "ELSE" not in value
    assert 's."__deleted_at"' in render(update.condition, dialect)  # a reset alone updates the row


def test_a_truncate_keeps_no_stored_value_as_old_as_it_in_matched_rows_or_in_the_rows_left():
    hints = TableHints(
        primary_key=("id",), sequence_by=("seq",), ignore_null_updates=True, apply_as_truncates="op = 'T'"
    )
    plan = planned(SOURCE, hints, (*SOURCE, "__hd"), hard_delete=True, truncate=(3,))
    calls = builder_calls(plan, [*SOURCE, "__hd"])
    assert [c[0] for c in calls[3:]] == [
        "whenMatchedDelete",
        "whenMatchedUpdate",
        "whenNotMatchedInsert",
        "whenNotMatchedBySourceDelete",
        "whenNotMatchedBySourceUpdate",
    ]
    matched = ast.literal_eval(calls[4][2][len("set=") :])
    assert matched["`a`"].endswith(" > 3 THEN t.`a` END")  # kept only where newer than the truncate
    assert calls[6][1] == "condition='(t.`_dlt_sequence` IS NULL) OR (t.`_dlt_sequence` <= 3)'"
    stale = "t.`_dlt_sequence_of_a` <= 3"
    assert calls[7][1] == f"condition={f'({stale})'!r}"
    assert ast.literal_eval(calls[7][2][len("set=") :]) == {
        "`a`": f"CASE WHEN {stale} THEN NULL ELSE t.`a` END",
        "`_dlt_sequence_of_a`": f"CASE WHEN {stale} THEN NULL ELSE t.`_dlt_sequence_of_a` END",
    }


TWO_PARTS = ("lsn", "pos")
TWO_PART_SOURCE = (
    "id",
    "lsn",
    "pos",
    "a",
    "_dlt_load_id",
    "_dlt_id",
    "_dlt_sequence",
    "_dlt_sequence_2",
    "_dlt_sequence_of_a",
    "_dlt_sequence_2_of_a",
)


def test_a_sequence_of_two_columns_is_kept_per_value_and_compared_in_order():
    hints = TableHints(
        primary_key=("id",), sequence_by=TWO_PARTS, ignore_null_updates=True, apply_as_truncates="op = 'T'"
    )
    plan = planned(TWO_PART_SOURCE, hints, (*TWO_PART_SOURCE, "__hd"), hard_delete=True, truncate=(4, 1))
    calls = builder_calls(plan, [*TWO_PART_SOURCE, "__hd"])
    matched = ast.literal_eval(calls[4][2][len("set=") :])
    stored = [
        "CASE WHEN NOT (t.`_dlt_sequence_of_a` IS NULL) "
        f"THEN t.`{own}` WHEN NOT (t.`a` IS NULL) THEN t.`{row}` END"
        for own, row in (("_dlt_sequence_of_a", "_dlt_sequence"), ("_dlt_sequence_2_of_a", "_dlt_sequence_2"))
    ]
    carried = ["s.`_dlt_sequence_of_a`", "s.`_dlt_sequence_2_of_a`"]
    newer = f"({carried[0]} > {stored[0]}) OR (({carried[0]} = {stored[0]}) AND ({carried[1]} > {stored[1]}))"
    a_newer = f"(NOT ({carried[0]} IS NULL)) AND (({stored[0]} IS NULL) OR ({newer}))"
    after_truncate = f"({stored[0]} > 4) OR (({stored[0]} = 4) AND ({stored[1]} > 1))"
    assert matched["`a`"] == f"CASE WHEN {a_newer} THEN s.`a` WHEN {after_truncate} THEN t.`a` END"
    assert matched["`_dlt_sequence_2_of_a`"] == (
        f"CASE WHEN {a_newer} THEN s.`_dlt_sequence_2_of_a` WHEN {after_truncate} THEN {stored[1]} END"
    )
    own = ("t.`_dlt_sequence_of_a`", "t.`_dlt_sequence_2_of_a`")
    stale = f"({own[0]} < 4) OR (({own[0]} = 4) AND ({own[1]} <= 1))"
    assert calls[7][1] == f"condition={f'({stale})'!r}"
    assert set(ast.literal_eval(calls[7][2][len("set=") :])) == {
        "`a`",
        "`_dlt_sequence_of_a`",
        "`_dlt_sequence_2_of_a`",
    }


def test_the_system_columns_of_a_values_sequence_name_their_column_and_part():
    from airflow_provider_deltamerge.model.null_updates import sequence_owner, sequences_of

    assert sequences_of("a", 3) == ("_dlt_sequence_of_a", "_dlt_sequence_2_of_a", "_dlt_sequence_3_of_a")
    named = {"_dlt_sequence_of_2_of_x": ("2_of_x", 1), "_dlt_sequence_12_of_of_": ("of_", 12)}
    for name, owner in {**named, **{n: ("a", i) for i, n in enumerate(sequences_of("a", 3), 1)}}.items():
        assert sequence_owner(name) == owner
    for other in ("_dlt_sequence", "_dlt_sequence_2", "_dlt_sequence_1_of_a", "a", "_dlt_sequence_of_"):
        assert sequence_owner(other) is None


ADDRESS = (("street", None), ("geo", (("lat", None),)))  # struct<street, geo: struct<lat>>
KEPT = {"address": ADDRESS, "_dlt_field_sequences_of_address": sequences_shape(ADDRESS)}  # the table's
STRUCT_SOURCE = (
    "id",
    "seq",
    "address",
    "_dlt_load_id",
    "_dlt_id",
    "_dlt_sequence",
    "_dlt_sequence_of_address",
    "_dlt_field_sequences_of_address",
)


def test_a_struct_column_is_built_field_by_field_each_over_its_own_sequence():
    shapes = ({"address": ADDRESS}, KEPT)
    plan = planned(STRUCT_SOURCE, source=STRUCT_SOURCE, shapes=shapes)
    sets = builder_calls(plan, list(STRUCT_SOURCE))[3]
    assigned = ast.literal_eval(sets[2][len("set=") :])
    value, sequences = assigned["`address`"], assigned["`_dlt_field_sequences_of_address`"]
    street = "s.`_dlt_field_sequences_of_address`.`street`"
    own = "t.`_dlt_field_sequences_of_address`.`street`"
    assert value.startswith("CASE WHEN ") and "THEN named_struct('street', CASE WHEN " in value
    assert "THEN s.`address`.`street` ELSE t.`address`.`street` END, 'geo', CASE WHEN " in value
    assert f"(NOT ({street} IS NULL)) AND ((CASE WHEN NOT ({own} IS NULL) THEN {own} " in value
    assert "named_struct('lat', CASE WHEN " in value  # the nested struct, field by field too
    assert "named_struct('_dlt_sequence', CASE WHEN " in sequences  # a nested struct's own sequence
    assert f"({street} > CASE WHEN NOT ({own} IS NULL)" in sets[1]  # a newer field updates the row


def test_a_table_keeping_no_field_sequences_counts_a_field_as_of_its_structs_sequence():
    shapes = ({"address": ADDRESS}, {"address": ADDRESS})
    table = STRUCT_SOURCE[:-1]
    plan = planned(table, source=STRUCT_SOURCE)
    assert "named_struct" not in render(dict(plan.clauses[0].assignments)["address"], DataFusionDialect())
    plan = planned(table, source=STRUCT_SOURCE, shapes=shapes)
    sets = dict(plan.clauses[0].assignments)
    street = render(sets["_dlt_field_sequences_of_address"], DataFusionDialect())
    assert 't."_dlt_field_sequences_of_address"' not in street  # not in the table yet
    fallback = 'WHEN NOT (t."address"."street" IS NULL) THEN CASE WHEN NOT (t."_dlt_sequence_of_address"'
    assert fallback in street


def test_a_late_truncate_resets_a_structs_fields_older_than_it_in_the_rows_left():
    hints = TableHints(
        primary_key=("id",), sequence_by=("seq",), ignore_null_updates=True, apply_as_truncates="op = 'T'"
    )
    shapes = ({"address": ADDRESS}, KEPT)
    plan = planned(STRUCT_SOURCE, hints, (*STRUCT_SOURCE, "__hd"), True, (3,), shapes)
    reset = plan.clauses[-1]
    assert (reset.when, reset.action) == ("not_matched_by_source", "update")
    sets = {c: render(e, DataFusionDialect()) for c, e in reset.assignments}
    assert set(sets) == {"address", "_dlt_sequence_of_address", "_dlt_field_sequences_of_address"}
    whole = 'CASE WHEN (t."address" IS NULL) OR (t."_dlt_sequence_of_address" <= 3)'
    assert sets["address"].startswith(whole)
    assert (
        '\'street\', CASE WHEN CASE WHEN NOT (t."_dlt_field_sequences_of_address"."street" IS NULL)'
        in (sets["address"])
    )
    assert '"street" IS NULL) THEN t."_dlt_field_sequences_of_address"."street"' in render(
        reset.condition, DataFusionDialect()
    )


def test_a_struct_renders_as_named_struct_in_both_dialects():
    from airflow_provider_deltamerge.delta.spark_sql import SparkSqlDialect
    from airflow_provider_deltamerge.plan.expressions import Field, Struct

    struct = Struct((("it's", Field(Col("a", "t"), "b")), ("c", Lit(1))))
    assert render(struct, DataFusionDialect()) == """named_struct('it''s', t."a"."b", 'c', 1)"""
    assert render(struct, SparkSqlDialect()) == "named_struct('it\\'s', t.`a`.`b`, 'c', 1)"


def test_the_system_columns_of_a_structs_field_sequences_name_their_column_and_part():
    from airflow_provider_deltamerge.model.null_updates import field_sequences_of, field_sequences_owner

    names = field_sequences_of("a", 2)
    assert names == ("_dlt_field_sequences_of_a", "_dlt_field_sequences_2_of_a")
    assert [field_sequences_owner(n) for n in names] == [("a", 1), ("a", 2)]
    assert field_sequences_owner("_dlt_sequence_of_a") is None
