"""scd2 options and plans (pure): validation, normalised names, timestamps, and the one MERGE per load."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.model.naming import direct, snake_case
from airflow_provider_deltamerge.model.options import TableHints, WriteDisposition, validate_disposition
from airflow_provider_deltamerge.model.run import load_time
from airflow_provider_deltamerge.model.scd2 import Scd2Options, parse_timestamp, validate_options
from airflow_provider_deltamerge.plan.expressions import render, standard_string
from airflow_provider_deltamerge.plan.merge import ACTION, Operation, SourceShape
from airflow_provider_deltamerge.plan.scd2 import RETIRE_AT, Scd2Settings, plan_scd2

UTC = timezone.utc
B = datetime(2024, 4, 9, 18, 27, 53, 734235, tzinfo=UTC)
HIGH = datetime(9999, 12, 31, tzinfo=UTC)


class SqlText:
    """A plain dialect so plans can be read as text in assertions."""

    @staticmethod
    def quote(name: str) -> str:
        return f'"{name}"'

    @staticmethod
    def timestamp(value: datetime) -> str:
        return f"TS'{value.isoformat()}'"

    @staticmethod
    def date(value: date) -> str:
        return f"D'{value.isoformat()}'"

    string = staticmethod(standard_string)


def sql(expr) -> str:
    return render(expr, SqlText())


def options(merge_key=(), normalize=snake_case, **values) -> Scd2Options:
    return validate_options(Scd2Options.from_dict(values), tuple(merge_key), normalize)


def clauses_as_text(plan) -> list[tuple]:
    return [
        (
            c.when,
            c.action,
            sql(c.condition) if c.condition is not None else None,
            {k: sql(v) for k, v in c.assignments},
        )
        for c in plan.clauses
    ]


# -- options ----------------------------------------------------------------------------------------


def test_defaults_are_dlt_names_null_marker_and_load_time_boundary():
    settings = Scd2Settings.from_options(options())
    assert (settings.valid_from, settings.valid_to) == ("_dlt_valid_from", "_dlt_valid_to")
    assert settings.active_marker is None and settings.boundary is None
    assert settings.version_column == "_dlt_id" and settings.hashed_version
    assert settings.boundary_column is None and settings.active_column is None
    assert settings.system_columns == ("_dlt_valid_from", "_dlt_valid_to")


def test_names_go_through_the_naming_convention():
    checked = options(
        validity_column_names=["ValidFrom", "Valid To"],
        row_version_column_name="RowHash",
        active_column_name="IsCurrent",
    )
    assert checked.validity_column_names == ("valid_from", "valid_to")
    assert checked.row_version_column_name == "row_hash"
    assert checked.active_column_name == "is_current"
    kept = options(normalize=direct, validity_column_names=["ValidFrom", "Valid To"])
    assert kept.validity_column_names == ("ValidFrom", "Valid To")


@pytest.mark.parametrize(
    "value, expected",
    [
        ("9999-12-31", HIGH),
        ("2024-04-09T18:27:53.734235Z", B),
        ("2024-04-09 20:27:53.734235+02:00", B),
        ("2024-04-09T18:27:53.734235", B),  # naive is UTC
        (date(9999, 12, 31), HIGH),
        (B, B),
    ],
)
def test_timestamps_become_utc(value, expected):
    assert parse_timestamp("active_record_timestamp", value) == expected
    checked = options(active_record_timestamp=value)
    assert Scd2Settings.from_options(checked).active_marker == expected
    assert checked.active_record_timestamp == expected.isoformat()  # JSON-serialisable, canonical


@pytest.mark.parametrize("option", ["active_record_timestamp", "boundary_timestamp"])
@pytest.mark.parametrize("value", ["yesterday", "2024-13-01", "12/31/9999", 1712687273])
def test_a_bad_timestamp_is_a_config_error_naming_the_option(option, value):
    with pytest.raises(ConfigError) as caught:
        options(**{option: value})
    assert caught.value.argument == option
    assert repr(str(value)) in str(caught.value) and "9999-12-31" in str(caught.value)


@pytest.mark.parametrize(
    "names, message",
    [
        ("valid_from", "list of two column names"),
        (["only_one"], "list of two column names"),
        (["a", "b", "c"], "list of two column names"),
        (["same", "same"], "same column twice"),
        (["", "to"], "list of two column names"),
    ],
)
def test_validity_names_need_two_different_names(names, message):
    with pytest.raises(ConfigError, match=message) as caught:
        options(validity_column_names=names)
    assert caught.value.argument == "validity_column_names"


def test_validity_names_equal_after_normalisation_are_refused():
    with pytest.raises(ConfigError, match="both become 'valid_from'") as caught:
        options(validity_column_names=["ValidFrom", "valid_from"])
    assert caught.value.argument == "validity_column_names"


def test_unknown_option_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown scd2 option.*retire_absent.*boundary_column"):
        WriteDisposition.parse({"disposition": "merge", "strategy": "scd2", "retire_absent": False})


@pytest.mark.parametrize(
    "values, merge_key, option, message",
    [
        (
            {"boundary_timestamp": "2024-01-01", "boundary_column": "updated_at"},
            ("id",),
            "boundary_column",
            "cannot be combined with boundary_timestamp",
        ),
        ({"boundary_column": "updated_at"}, (), "boundary_column", "needs a merge_key"),
        (
            {"boundary_timestamp": "9999-12-31", "active_record_timestamp": "9999-12-31T00:00:00Z"},
            (),
            "boundary_timestamp",
            "equals active_record_timestamp",
        ),
        ({"active_column_name": "_dlt_valid_to"}, (), "active_column_name", "also a validity column"),
        (
            {"row_version_column_name": "ValidTo", "validity_column_names": ["valid_from", "valid_to"]},
            (),
            "row_version_column_name",
            "'valid_to' is also the validity_column_names column",
        ),
        (
            {"boundary_column": "is_current", "active_column_name": "IsCurrent"},
            ("id",),
            "boundary_column",
            "also the active_column_name column",
        ),
        ({}, ("id", "_dlt_valid_from"), "merge_key", "'_dlt_valid_from' is also the validity_column_names"),
        ({"row_version_column_name": 7}, (), "row_version_column_name", "must be a column name"),
        ({"active_column_name": "  "}, (), "active_column_name", "must be a column name"),
        ({"row_version_column_name": "_dlt_load_id"}, (), "row_version_column_name", "not a row version"),
    ],
)
def test_conflicting_options_name_the_option(values, merge_key, option, message):
    with pytest.raises(ConfigError, match=message) as caught:
        options(merge_key, **values)
    assert caught.value.argument == option


def test_helper_column_prefix_is_reserved():
    with pytest.raises(ConfigError, match="reserved for helper columns") as caught:
        options(normalize=direct, row_version_column_name="__hash")
    assert caught.value.argument == "row_version_column_name"
    assert options(row_version_column_name="__hash").row_version_column_name == "_hash"  # snake_case folds it


def test_validate_disposition_leaves_other_dispositions_alone():
    upsert = WriteDisposition.parse({"disposition": "merge", "strategy": "upsert"})
    assert validate_disposition(upsert, TableHints(primary_key=("id",)), snake_case) is upsert
    scd2 = WriteDisposition.parse(
        {"disposition": "merge", "strategy": "scd2", "active_column_name": "IsCurrent"}
    )
    checked = validate_disposition(scd2, TableHints(merge_key=("id",)), snake_case)
    assert checked.strategy == "scd2" and checked.scd2.active_column_name == "is_current"
    assert checked.to_dict()["active_column_name"] == "is_current"


def test_load_time_is_the_load_id_to_the_microsecond():
    assert load_time("1712687273.734235") == B
    assert load_time("1712687273.7") == datetime(2024, 4, 9, 18, 27, 53, 700000, tzinfo=UTC)
    assert load_time("1712687273") == datetime(2024, 4, 9, 18, 27, 53, tzinfo=UTC)
    with pytest.raises(ConfigError) as caught:
        load_time("first-load")
    assert caught.value.argument == "load_id"


# -- plans ------------------------------------------------------------------------------------------


def test_empty_batch_commits_nothing_whatever_the_table():
    for exists in (True, False):
        for merge_key in ((), ("id",)):
            plan = plan_scd2(Scd2Settings(), merge_key, table_exists=exists, batch_empty=True, boundary=B)
            assert plan.operation is Operation.NOTHING
            assert "retires nothing" in plan.reason


def test_first_load_writes_the_rows():
    plan = plan_scd2(Scd2Settings(), ("id",), table_exists=False, batch_empty=False, boundary=B)
    assert plan.operation is Operation.WRITE and plan.source is SourceShape.ROWS
    assert plan.helper_columns == () and not plan.needs_target_read


def test_full_extract_matches_active_versions_and_retires_absent_ones_at_the_boundary():
    plan = plan_scd2(Scd2Settings(), (), table_exists=True, batch_empty=False, boundary=B)
    assert plan.operation is Operation.MERGE and plan.source is SourceShape.ROWS
    assert not plan.needs_target_read and plan.helper_columns == ()
    assert sql(plan.on) == '(t."_dlt_id" = s."_dlt_id") AND (t."_dlt_valid_to" IS NULL)'
    assert clauses_as_text(plan) == [
        ("not_matched", "insert_all", None, {}),
        (
            "not_matched_by_source",
            "update",
            't."_dlt_valid_to" IS NULL',
            {"_dlt_valid_to": f"TS'{B.isoformat()}'"},
        ),
    ]


def test_active_marker_and_active_flag_and_own_version_column():
    settings = Scd2Settings(
        valid_from="from",
        valid_to="to",
        active_marker=HIGH,
        version_column="row_hash",
        active_column="is_current",
    )
    plan = plan_scd2(settings, (), table_exists=True, batch_empty=False, boundary=B)
    active = f"t.\"to\" = TS'{HIGH.isoformat()}'"
    assert sql(plan.on) == f'(t."row_hash" = s."row_hash") AND ({active})'
    assert clauses_as_text(plan)[1] == (
        "not_matched_by_source",
        "update",
        active,
        {"to": f"TS'{B.isoformat()}'", "is_current": "FALSE"},
    )


def test_merge_key_retires_through_retire_rows_matched_on_key_and_version():
    plan = plan_scd2(Scd2Settings(), ("country", "region"), table_exists=True, batch_empty=False, boundary=B)
    assert plan.operation is Operation.MERGE and plan.source is SourceShape.SCD2_ROWS_AND_RETIRES
    assert plan.needs_target_read
    assert plan.delete_keys == ("country", "region", "_dlt_id", "_dlt_valid_to")  # the target columns read
    assert plan.helper_columns == (ACTION, RETIRE_AT)
    # compound keys compare column by column, never concatenated (SCD-13)
    assert sql(plan.on) == (
        '(t."country" = s."country") AND (t."region" = s."region") AND (t."_dlt_id" = s."_dlt_id") '
        'AND (t."_dlt_valid_to" IS NULL)'
    )
    assert clauses_as_text(plan) == [
        ("matched", "update", "s.\"__action\" = 'retire'", {"_dlt_valid_to": 's."__retire_at"'}),
        ("not_matched", "insert_all", "s.\"__action\" = 'insert'", {}),
    ]
    scope = plan.retire
    assert (scope.merge_key, scope.version_column, scope.valid_from, scope.valid_to, scope.active_marker) == (
        ("country", "region"),
        "_dlt_id",
        "_dlt_valid_from",
        "_dlt_valid_to",
        None,
    )


def test_boundary_column_plans_without_a_fixed_boundary():
    settings = Scd2Settings(boundary_column="updated_at", active_column="is_current")
    plan = plan_scd2(settings, ("id",), table_exists=True, batch_empty=False, boundary=None)
    assert plan.source is SourceShape.SCD2_ROWS_AND_RETIRES
    assert clauses_as_text(plan)[0][3] == {"_dlt_valid_to": 's."__retire_at"', "is_current": "FALSE"}
    with pytest.raises(ValueError, match="needs a boundary"):
        plan_scd2(Scd2Settings(), ("id",), table_exists=True, batch_empty=False, boundary=None)


def test_version_column_in_the_merge_key_is_read_once():
    settings = Scd2Settings(version_column="code")
    plan = plan_scd2(settings, ("code",), table_exists=True, batch_empty=False, boundary=B)
    assert plan.delete_keys == ("code", "_dlt_valid_to")
