"""A SQL condition over a row's own columns (pure): `apply_as_deletes`, `apply_as_truncates`, and any
option that is such a condition.

A condition may compare, combine and transform the row's columns and literals. It may not read anything
else or run anything: no subquery (which can read files: ``op IN (SELECT op FROM parquet.`/path`)``), no
function outside an allow-list of deterministic built-ins (so none that runs Java (`java_method`,
`reflect`), reads files (`read_files`), is a UDF, or differs between runs (`rand`, `uuid`, `current_*`,
`input_file_name`)), no lambda, window or aggregate. Checked by tokenizing the text here, the same way
on local Spark, spark-submit and Spark Connect (which gives no handle on Spark's parser); whether its
columns are the row's and it is true/false is asked of Spark against the batch's schema (spark/cdc.py).

Strict on purpose: what is not recognised as safe is refused, naming the offending part. A column named
like a keyword this refuses (`table`, `values`, ...) is written in backticks.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import ConfigError

# Built-in functions a condition may call: deterministic, reading nothing but their arguments.
ALLOWED_FUNCTIONS = frozenset(
    """
    coalesce nvl nvl2 ifnull nullif isnull isnotnull isnan nanvl if greatest least equal_null
    lower upper lcase ucase trim ltrim rtrim btrim length len char_length character_length octet_length
    bit_length substring substr left right concat concat_ws startswith endswith contains instr locate
    position lpad rpad replace translate regexp regexp_like regexp_extract regexp_replace rlike like
    ilike split_part initcap reverse repeat ascii chr char soundex levenshtein
    abs ceil ceiling floor round bround mod pmod sign signum sqrt power pow exp ln log log10 log2
    negative positive
    to_date to_timestamp year month day dayofmonth dayofweek dayofyear hour minute second quarter
    weekofyear date_add date_sub datediff date_trunc trunc date_format extract date_part datepart
    make_date months_between add_months last_day to_utc_timestamp from_utc_timestamp
    timestamp_seconds timestamp_millis timestamp_micros unix_seconds unix_millis unix_micros
    cast try_cast boolean tinyint smallint int integer bigint float double decimal dec numeric string
    binary date timestamp varchar
    array array_contains size cardinality element_at try_element_at struct named_struct map_keys
    map_values map_contains_key array_position get
    md5 sha1 sha2 crc32 get_json_object json_array_length
    """.split()
)
# Keywords after which a parenthesis groups (`IN (...)`, `NOT (...)`) rather than calls a function.
_GROUPING_KEYWORDS = frozenset(
    "and or not in when then else case is like ilike rlike regexp between any some all as distinct".split()
)
# Keywords that only a query (a subquery), a window or a lambda has: refused wherever they stand.
_QUERY_KEYWORDS = frozenset(
    "select values table with exists over window lateral join union intersect except minus".split()
)
# Functions whose own syntax holds FROM: EXTRACT(field FROM x), TRIM(BOTH 'x' FROM s), ...
_FROM_FUNCTIONS = frozenset("extract trim substring substr overlay".split())
# Names Spark resolves as a function without parentheses where the row has no column of that name.
NAMES_RESOLVED_AS_FUNCTIONS = frozenset(
    """
    current_date current_timestamp current_time current_user current_catalog current_database
    current_schema current_timezone localtimestamp user session_user system_user
    """.split()
)
_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<comment>--|/\*)
    | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    | (?P<quoted>`(?:[^`]|``)*`)
    | (?P<number>\.?[0-9][0-9A-Za-z_.]*)
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<paren>[()\[\],.])
    | (?P<operator>[=<>!+\-*/%&|^~:]+)
    """,
    re.VERBOSE | re.DOTALL,
)


def check_row_condition(argument: str, value: Any, columns: list[str] | None = None) -> str | None:
    """`value`, stripped, where it is a SQL condition over a row's own columns (the module's doc), or
    None for None; else ConfigError naming `argument` and the offending part. With `columns` (the row's),
    a name Spark would resolve as a function (`current_date`, `user`) must be one of them."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(argument, f"{value!r} is not a SQL condition; give one such as \"op = 'D'\"")
    text = value.strip()
    tokens = _tokens(argument, text)
    _check_calls(argument, text, tokens)
    if columns is not None:
        present = {c.lower() for c in columns}
        for kind, part, _ in tokens:
            name = part.strip("`").replace("``", "`").lower() if kind in ("word", "quoted") else ""
            if name in NAMES_RESOLVED_AS_FUNCTIONS and name not in present:
                raise _refused(
                    argument,
                    text,
                    f"{part} is not a column of the row, and Spark reads it as the function {name}(), "
                    "which differs from run to run",
                )
    return text


def _tokens(argument: str, text: str) -> list[tuple[str, str, int]]:
    """(kind, text, position) of each token but spaces; a comment or a character no condition needs is
    refused."""
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            character = text[position]
            raise _refused(argument, text, f"it has the character {character!r} at position {position}")
        kind, part = match.lastgroup, match.group()
        if kind == "comment":
            raise _refused(argument, text, f"it has a comment ({part} at position {position}); remove it")
        if kind == "string" and _quote_inside(part):
            raise _refused(
                argument,
                text,
                f"its string {part} holds its own quote escaped with a backslash (which Spark may read "
                "as the string's end); double the quote instead",
            )
        if kind == "operator" and ("->" in part or "|>" in part or ":" in part.replace("::", "")):
            raise _refused(
                argument, text, f"it has the operator {part!r} (of a lambda, a pipe or a parameter)"
            )
        if kind != "space":
            tokens.append((kind, part, position))
        position = match.end()
    if _unbalanced(tokens):
        raise _refused(argument, text, "its parentheses do not balance")
    return tokens


def _quote_inside(string: str) -> bool:
    """Whether a string literal holds its own quote character (escaped): read without backslash
    escapes (`r'...'`, or escapedStringLiterals), Spark would end it there, and what follows would be
    code this check took for text."""
    return string[0] in string[1:-1]


def _unbalanced(tokens) -> bool:
    depth = 0
    for kind, part, _ in tokens:
        if kind == "paren" and part == "(":
            depth += 1
        elif kind == "paren" and part == ")":
            depth -= 1
            if depth < 0:
                return True
    return depth != 0


def _check_calls(argument: str, text: str, tokens: list[tuple[str, str, int]]) -> None:
    """Every parenthesis after a name calls an allowed function, or groups after a keyword; no
    subquery's, window's or lambda's keyword; FROM only where a function's own syntax has it."""
    calls: list[str] = []  # per open parenthesis: the function it calls ("" where it groups)
    for index, (kind, part, position) in enumerate(tokens):  # `field`: a name after `a.`, any name
        before = tokens[index - 1] if index else ("", "", -1)
        after = tokens[index + 1] if index + 1 < len(tokens) else ("", "", -1)
        opens = after[0] == "paren" and after[1] == "("
        word = part.lower() if kind == "word" else ""
        owner = tokens[index - 2] if index > 1 else ("", "", -1)
        field = before[1] == "." and (owner[0] in ("word", "quoted") or owner[1] in (")", "]"))
        if kind == "paren" and part == "(":
            callee = before[1].lower() if before[0] == "word" else ""
            calls.append(callee if callee in ALLOWED_FUNCTIONS else "")
            if before[0] in ("quoted", "string", "number") or before[1] in (")", "]"):
                raise _refused(argument, text, f"it calls {before[1]}(...) at position {position}")
        elif kind == "paren" and part == ")" and calls:
            calls.pop()
        if kind == "quoted" and opens:
            raise _refused(argument, text, f"it calls the quoted name {part}; call built-ins by name")
        if not word or field and not opens:
            continue
        if opens and field:
            raise _refused(
                argument, text, f"it calls the qualified function ...{part}(); call built-ins by name"
            )
        if word in _QUERY_KEYWORDS:
            raise _refused(
                argument,
                text,
                f"it has {part.upper()} at position {position}, a keyword of subqueries, windows and tables "
                "(write a column named so in backticks)",
            )
        if word == "from" and not (
            before[1].lower() == "distinct" or (calls and calls[-1] in _FROM_FUNCTIONS)
        ):
            raise _refused(argument, text, f"it has FROM at position {position}: a condition reads no table")
        if opens and word not in ALLOWED_FUNCTIONS and word not in _GROUPING_KEYWORDS:
            raise _refused(
                argument,
                text,
                f"it calls {part}(), which is not an allowed function: only deterministic built-ins are (no "
                "UDF, nothing that runs code, reads files or differs from run to run)",
            )


def _refused(argument: str, text: str, part: str) -> ConfigError:
    return ConfigError(
        argument,
        f"{text!r} is refused: {part}. A condition is over the row's own columns: give one of its columns, "
        "literals, operators and deterministic built-in functions, such as \"op = 'D'\"",
    )
