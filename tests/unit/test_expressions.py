"""The expression tree rendered per SQL dialect (pure)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from airflow_provider_deltamerge.delta.datafusion import DataFusionDialect
from airflow_provider_deltamerge.delta.spark_sql import SparkSqlDialect
from airflow_provider_deltamerge.plan.expressions import (
    SOURCE,
    TARGET,
    And,
    Cmp,
    Col,
    In,
    IsNull,
    Lit,
    Not,
    all_of,
    eq,
    keys_equal,
    render,
    same,
)

SPARKISH = SparkSqlDialect()  # the tree holds no dialect of its own: each writer brings one
DATAFUSION = DataFusionDialect()


def test_columns_are_quoted_and_qualified_per_dialect():
    assert render(Col("id", TARGET), DATAFUSION) == 't."id"'
    assert render(Col("id", SOURCE), SPARKISH) == "s.`id`"
    assert render(Col("day"), DATAFUSION) == '"day"'
    assert render(Col('we"ird'), DATAFUSION) == '"we""ird"'
    assert render(Col("we`ird"), SPARKISH) == "`we``ird`"
    assert render(Col("Mixed Case"), DATAFUSION) == '"Mixed Case"'


@pytest.mark.parametrize(
    ("value", "sql"),
    [
        (None, "NULL"),
        (True, "TRUE"),  # a bool is not rendered as the int it subclasses
        (False, "FALSE"),
        (0, "0"),
        (-7, "-7"),
        (2.5, "2.5"),
        ("insert", "'insert'"),
        ("", "''"),
    ],
)
def test_literals(value, sql):
    assert render(Lit(value), DATAFUSION) == sql
    assert render(Lit(value), SPARKISH) == sql


def test_a_quote_in_a_string_is_escaped_the_way_each_engine_reads_it():
    assert render(Lit("O'Brien"), DATAFUSION) == "'O''Brien'"  # the SQL standard
    assert render(Lit("O'Brien"), SPARKISH) == r"'O\'Brien'"  # Spark 3.5 reads '' as two literals


def test_aware_timestamps_are_rendered_in_utc_and_naive_ones_as_wall_clock():
    plus_two = datetime(2024, 1, 2, 5, 4, 5, 600000, tzinfo=timezone(timedelta(hours=2)))
    assert render(Lit(plus_two), SPARKISH) == "TIMESTAMP '2024-01-02T03:04:05.600000+00:00'"
    assert render(Lit(plus_two), DATAFUSION) == (
        "arrow_cast('2024-01-02T03:04:05.600000+00:00', 'Timestamp(Microsecond, Some(\"UTC\"))')"
    )
    naive = datetime(2024, 1, 2, 3, 4, 5)
    assert render(Lit(naive), SPARKISH) == "TIMESTAMP_NTZ '2024-01-02T03:04:05'"
    assert (
        render(Lit(naive), DATAFUSION) == "arrow_cast('2024-01-02T03:04:05', 'Timestamp(Microsecond, None)')"
    )


def test_dates():
    assert render(Lit(date(2024, 2, 29)), SPARKISH) == "DATE '2024-02-29'"
    assert render(Lit(date(2024, 2, 29)), DATAFUSION) == "arrow_cast('2024-02-29', 'Date32')"


def test_comparisons_and_logic():
    assert render(eq(Col("a", TARGET), Col("a", SOURCE)), DATAFUSION) == 't."a" = s."a"'
    assert render(Cmp("<=", Col("ts"), Lit(3)), SPARKISH) == "`ts` <= 3"
    assert render(same(Col("mk", TARGET), Col("__k_mk", SOURCE)), DATAFUSION) == (
        't."mk" IS NOT DISTINCT FROM s."__k_mk"'
    )
    assert render(IsNull(Col("valid_to", TARGET)), DATAFUSION) == 't."valid_to" IS NULL'
    assert render(Not(Col("__hd", SOURCE)), DATAFUSION) == 'NOT (s."__hd")'
    both = And((eq(Col("a"), Lit(1)), Not(IsNull(Col("b")))))
    assert render(both, SPARKISH) == "(`a` = 1) AND (NOT (`b` IS NULL))"


def test_a_list_of_values_per_dialect():
    days = In(Col("day", TARGET), (Lit(date(2024, 1, 1)), Lit(date(2024, 1, 5))))
    assert render(days, SPARKISH) == "t.`day` IN (DATE '2024-01-01', DATE '2024-01-05')"
    assert render(days, DATAFUSION) == (
        "t.\"day\" IN (arrow_cast('2024-01-01', 'Date32'), arrow_cast('2024-01-05', 'Date32'))"
    )
    regions = In(Col("region"), (Lit("eu"), Lit("O'Brien")))
    assert render(regions, DATAFUSION) == "\"region\" IN ('eu', 'O''Brien')"


def test_all_of_and_keys_equal():
    single = eq(Col("a"), Lit(1))
    assert all_of(single) is single
    assert all_of(single, single) == And((single, single))
    assert keys_equal(("id",), ("__k_id",)) == eq(Col("id", TARGET), Col("__k_id", SOURCE))
    compound = keys_equal(("a", "b"), ("a", "b"))
    assert render(compound, DATAFUSION) == '(t."a" = s."a") AND (t."b" = s."b")'


def test_anything_else_is_not_an_expression():
    with pytest.raises(TypeError, match="not an expression"):
        render("t.a = s.a", DATAFUSION)
