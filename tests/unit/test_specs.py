"""Parsing of write dispositions, key and column hints: one ConfigError naming the argument (pure)."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.errors import ConfigError, DeltaMergeError
from airflow_provider_deltamerge.model.checks import key_tuple
from airflow_provider_deltamerge.model.naming import direct, snake_case
from airflow_provider_deltamerge.model.options import (
    TableHints,
    WriteDisposition,
    parse_columns,
    resolve_hints,
)
from airflow_provider_deltamerge.model.run import RunContext


def config_error(call, *args, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        call(*args, **kwargs)
    assert isinstance(raised.value, (DeltaMergeError, ValueError))
    return raised.value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("append", WriteDisposition("append")),
        ("replace", WriteDisposition("replace")),
        ("merge", WriteDisposition("merge", "delete-insert")),  # the default strategy (MS-2)
        ({"disposition": "merge"}, WriteDisposition("merge", "delete-insert")),
        ({"disposition": "merge", "strategy": "upsert"}, WriteDisposition("merge", "upsert")),
        ({"disposition": "merge", "strategy": "insert-only"}, WriteDisposition("merge", "insert-only")),
        (
            {"disposition": "merge", "strategy": "delete-insert", "deduplicated": True},
            WriteDisposition("merge", "delete-insert", True),
        ),
    ],
)
def test_write_disposition_forms(value, expected):
    parsed = WriteDisposition.parse(value)
    assert parsed == expected
    assert WriteDisposition.parse(parsed.to_dict()) == parsed
    assert WriteDisposition.parse(parsed) is parsed


def test_labels():
    assert WriteDisposition.parse("append").label == "append"
    assert WriteDisposition.parse({"disposition": "merge", "strategy": "upsert"}).label == "merge/upsert"


def test_unknown_disposition_lists_the_valid_ones():
    error = config_error(WriteDisposition.parse, "upsert")
    assert error.argument == "write_disposition"
    assert all(f"'{d}'" in str(error) for d in ("append", "replace", "merge"))
    assert "'skip'" not in str(error)  # skip is written by the loader only (LD-8)
    config_error(WriteDisposition.parse, {"strategy": "upsert"})  # no disposition at all


def test_unknown_strategy_lists_the_valid_ones():
    error = config_error(WriteDisposition.parse, {"disposition": "merge", "strategy": "merge-all"})
    assert error.argument == "write_disposition.strategy"
    assert "'merge-all'" in str(error)
    assert all(f"'{s}'" in str(error) for s in ("delete-insert", "upsert", "insert-only", "scd2"))


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (["merge"], "string or a dict"),
        ({"disposition": "merge", "deduplicated": "yes"}, "deduplicated"),
        ({"disposition": "append", "strategy": "upsert"}, "only to 'merge'"),
        ({"disposition": "replace", "deduplicated": True}, "only to 'merge'"),
        ({"disposition": "merge", "strategy": "upsert", "validity_column_names": ["a", "b"]}, "do not apply"),
        ({"disposition": "merge", "strategy": "scd2", "valid_columns": ["a", "b"]}, "valid_columns"),
    ],
)
def test_misplaced_options_are_refused(value, words):
    error = config_error(WriteDisposition.parse, value)
    assert words in str(error)


def test_key_tuple():
    assert key_tuple("primary_key", None) == ()
    assert key_tuple("primary_key", "id") == ("id",)
    assert key_tuple("primary_key", ["a", "b"]) == ("a", "b")
    assert key_tuple("merge_key", ("a",)) == ("a",)
    assert config_error(key_tuple, "primary_key", ["a", "a"]).argument == "primary_key"
    assert "twice" in str(config_error(key_tuple, "merge_key", ["a", "a"]))
    config_error(key_tuple, "primary_key", ["a", 1])
    config_error(key_tuple, "primary_key", [""])


def test_column_hints_are_validated():
    parsed = parse_columns({"ts": {"dedup_sort": "desc"}, "gone": {"hard_delete": True}})
    assert parsed["ts"].dedup_sort == "desc" and parsed["gone"].hard_delete
    assert parse_columns(None) == {}

    assert "must be a dict" in str(config_error(parse_columns, {"ts": "desc"}))
    error = config_error(parse_columns, {"ts": {"sorted": True}})
    assert error.argument == "columns['ts']" and "'sorted'" in str(error) and "dedup_sort" in str(error)
    error = config_error(parse_columns, {"ts": {"sort": "desc"}})  # dlt's sort hint is a flag
    assert error.argument == "columns['ts'].sort" and "dedup_sort" in str(error)
    assert parse_columns({"ts": {"sort": True}})["ts"].sort
    error = config_error(parse_columns, {"ts": {"dedup_sort": "newest"}})
    assert "'newest'" in str(error) and "'asc'" in str(error) and "'desc'" in str(error)
    assert "true or false" in str(config_error(parse_columns, {"gone": {"hard_delete": "yes"}}))
    config_error(parse_columns, {"id": {"primary_key": 1}})


@pytest.mark.parametrize("hint,value", [("hard_delete", True), ("dedup_sort", "asc")])
def test_at_most_one_column_per_hint(hint, value):
    error = config_error(parse_columns, {"a": {hint: value}, "b": {hint: value}})
    assert hint in str(error) and "'a'" in str(error) and "'b'" in str(error)


def test_resolved_hints_go_through_naming_and_column_flags():
    columns = parse_columns(
        {
            "UpdatedAt": {"dedup_sort": "desc"},
            "IsDeleted": {"hard_delete": True},
            "LineNo": {"primary_key": True},
            "Region": {"merge_key": True},
            "OrderId": {"primary_key": False},  # removes a key given as an argument (not sticky, MS-8)
        }
    )
    hints = resolve_hints(["OrderId", "TxId"], "Day", columns, snake_case)
    assert hints == TableHints(
        primary_key=("tx_id", "line_no"),
        merge_key=("day", "region"),
        hard_delete="is_deleted",
        dedup_sort=("updated_at", "desc"),
    )
    assert resolve_hints("TxId", None, {}, direct) == TableHints(primary_key=("TxId",))


def test_run_context_refuses_unknown_keys():
    assert RunContext.from_value(None) == RunContext()
    assert RunContext.from_value({"dag_id": "d", "try_number": 2}).try_number == 2
    error = config_error(RunContext.from_value, {"dag": "d"})
    assert error.argument == "run_context" and "'dag'" in str(error) and "dag_id" in str(error)
