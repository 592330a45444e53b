"""A SQL condition over a row's own columns (model/row_condition.py): what passes, and each kind of
part that is refused, typed, naming the option and the offending part, before anything is read."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import ConfigError, LoadRequest
from airflow_provider_deltamerge.model.row_condition import ALLOWED_FUNCTIONS, check_row_condition

ACCEPTED = [
    "op = 'D'",
    "op IN ('d', 'D') AND lsn > 10",
    "lower(trim(op)) = 'd' AND NOT (name IS NULL)",
    "CAST(amount AS DECIMAL(10, 2)) > 1.5",
    "a IS DISTINCT FROM b",
    "a IS NOT DISTINCT FROM b",
    "extract(YEAR FROM ts) = 2020",
    "trim(BOTH 'x' FROM op) = 'd'",
    "payload.op = 'd' AND payload.table = 't'",  # a struct's fields may have any name
    "op LIKE ANY ('d%', 'x%')",
    "CASE WHEN op = 'd' THEN true ELSE false END",
    "tags[0] = 'gone' AND size(tags) > 0",
    "lsn::int = 1",
    "`table` = 1 AND `select` = 2",  # columns named like keywords, in backticks
    "op rlike '\\\\d+'",
    "ts > TIMESTAMP '2020-01-01 00:00:00' AND d < DATE '2020-01-01'",
    "lsn BETWEEN 1 AND 2",
    "coalesce(op, 'u') = 'd'",
    "op = 'it''s'",
    'op = "d"',
    "user = 'system'",  # a column named user: the batch is checked to have it (spark/cdc.py)
    "-lsn < -1 AND lsn % 2 = 0",
]

# (kind, condition, the offending part the message names)
REFUSED = [
    ("subquery reading a file", "op IN (SELECT op FROM parquet.`/tmp/x`)", "SELECT at position 7"),
    ("subquery with EXISTS", "EXISTS (SELECT 1)", "EXISTS at position 0"),
    ("subquery of a table", "op IN (TABLE ops)", "TABLE at position 7"),
    ("subquery of values", "op IN (VALUES ('d'))", "VALUES at position 7"),
    ("pipe query", "op IN (FROM ops)", "FROM at position 7"),
    ("common table expression", "op IN (WITH x AS (SELECT 1) SELECT * FROM x)", "WITH at position 7"),
    ("Java call", "java_method('java.lang.Math', 'random') > 0", "it calls java_method()"),
    ("Java call by reflection", "reflect('java.util.UUID', 'randomUUID') = op", "it calls reflect()"),
    (
        "Java call, qualified",
        "system.builtin.java_method('a', 'b') = 'c'",
        "qualified function ...java_method()",
    ),
    ("Java call, quoted", "`java_method`('a', 'b') = 'c'", "it calls the quoted name `java_method`"),
    ("Java call, by IDENTIFIER", "IDENTIFIER('java_method')('a', 'b') = 'c'", "it calls IDENTIFIER()"),
    ("file read", "read_files('/tmp/x') IS NULL", "it calls read_files()"),
    ("input file", "input_file_name() = ''", "it calls input_file_name()"),
    ("UDF", "my_udf(op) = 'd'", "it calls my_udf()"),
    ("random", "rand() > 0.5", "it calls rand()"),
    ("uuid", "uuid() = op", "it calls uuid()"),
    ("current time", "current_timestamp() > ts", "it calls current_timestamp()"),
    ("aggregate", "count(op) > 1", "it calls count()"),
    ("window", "lsn > 1 OVER", "OVER at position"),
    ("lambda", "exists(tags, t -> t = 'gone')", "the operator '->'"),
    ("comment", "op = 'd' -- and more", "a comment (--"),
    ("block comment", "op = 'd' /* x */", "a comment (/*"),
    ("second statement", "op = 'd'; DROP TABLE x", "the character ';'"),
    ("variable", "op = ${kind}", "the character '$'"),
    ("parameter", "op = :kind", "the operator ':'"),
    ("positional parameter", "op = ?", "the character '?'"),
    ("escaped quote", "r'\\' = op OR java_method('a', 'b') = ''", "holds its own quote"),
    ("unbalanced", "(op = 'd'", "parentheses do not balance"),
    ("call of a call", "lower(op)(1) = 'd'", "it calls )(...)"),
]


@pytest.mark.parametrize("condition", ACCEPTED)
def test_a_condition_over_the_rows_columns_passes(condition):
    assert check_row_condition("apply_as_deletes", f"  {condition} ") == condition


@pytest.mark.parametrize("kind, condition, part", REFUSED, ids=[r[0] for r in REFUSED])
@pytest.mark.parametrize("argument", ["apply_as_deletes", "apply_as_truncates"])
def test_each_kind_of_part_a_condition_may_not_have_is_refused_naming_it(argument, kind, condition, part):
    with pytest.raises(ConfigError) as refused:
        check_row_condition(argument, condition)
    assert refused.value.argument == argument
    assert str(refused.value).startswith(f"{argument}: {condition!r} is refused: ")
    assert part in str(refused.value)
    assert str(pickle.loads(pickle.dumps(refused.value))) == str(refused.value)


def events_request(**arguments) -> LoadRequest:
    return LoadRequest.create(
        source={"table": "events"},
        dataset="/lake/silver",
        table_name="t",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key="id",
        sequence_by="lsn",
        **arguments,
    )


@pytest.mark.parametrize("kind, condition, part", REFUSED[:8], ids=[r[0] for r in REFUSED[:8]])
def test_a_request_with_such_a_condition_is_refused_when_it_is_made(kind, condition, part):
    for argument in ("apply_as_deletes", "apply_as_truncates"):
        with pytest.raises(ConfigError, match=f"^{argument}: ") as refused:
            events_request(**{argument: condition})
        assert part in str(refused.value)


def test_a_spark_submit_request_carrying_such_a_condition_is_refused_when_read():
    """The spark-submit job (and a Spark Connect client) reads the request from JSON: checked again."""
    sent = events_request(apply_as_deletes="op = 'D'").to_json()
    sent = sent.replace("op = 'D'", "java_method('java.lang.System', 'exit', 1) = 'x'")
    with pytest.raises(ConfigError, match=r"^apply_as_deletes: .* it calls java_method\(\)"):
        LoadRequest.from_json(sent)


def test_a_name_spark_reads_as_a_function_must_be_a_column_of_the_row():
    assert check_row_condition("apply_as_deletes", "user = 'x'", ["id", "user"]) == "user = 'x'"
    for condition in ("current_date > d", "`current_user` = 'x'", "USER = 'x'"):
        with pytest.raises(
            ConfigError, match="is not a column of the row, and Spark reads it as the function"
        ):
            check_row_condition("apply_as_deletes", condition, ["id", "d"])


def test_what_is_not_a_condition_is_refused():
    for value in ("", "  ", 3, ["op = 'd'"]):
        with pytest.raises(ConfigError, match="is not a SQL condition"):
            check_row_condition("apply_as_deletes", value)
    assert check_row_condition("apply_as_deletes", None) is None


WORDS = st.sampled_from(
    ["op", "lsn", "'d'", "1", "=", "AND", "OR", "NOT", "(", ")", ",", "IN", "SELECT", "FROM", "java_method",
     "rand", "lower", "->", "--", ";", "`x`", ".", "current_date", "TABLE"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, min_size=1, max_size=12))
def test_a_condition_that_passes_has_no_refused_part_whatever_the_text(words):
    """Whatever the tokens, a condition that passes names no subquery keyword, no function outside the
    allow-list before a parenthesis, and no comment or statement separator."""
    text = " ".join(words)
    try:
        check_row_condition("apply_as_deletes", text)
    except ConfigError:
        return
    lowered = [w.lower() for w in words]
    assert not {"--", ";", "->"} & set(lowered)
    after_dot = [
        i for i, w in enumerate(lowered) if i > 1 and lowered[i - 1] == "." and lowered[i - 2] not in "(,."
    ]
    keywords = [w for i, w in enumerate(lowered) if i not in after_dot]  # a struct's field may be named so
    assert not {"select", "table", "from"} & set(keywords)
    for word, following in zip(lowered, [*lowered[1:], ""], strict=True):
        if following == "(" and word.isidentifier():
            assert word in ALLOWED_FUNCTIONS or word in ("and", "or", "not", "in")
