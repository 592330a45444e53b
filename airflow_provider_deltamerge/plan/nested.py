"""Nested tables (pure): which child tables a batch's arrays become, and the columns of each (dlt's K-1).

A column holding arrays becomes a child table `<table>__<column>` beside the table, one row per element,
recursively (`<table>__<column>__<field>` for arrays inside the elements). Elements that are structs
give one column per field (struct fields flattened into `<field>__<subfield>`); scalar elements give the
column `value`; an element that is itself an array gives a row with the array in a field `list`, which
becomes the next child table (`<table>__<column>__list`), as dlt normalises lists of lists.

Nesting levels count down from `max_table_nesting` as in dlt's normaliser: the root's rows are at that
level, a struct is flattened and an array becomes a child table only while the level of the place it
sits in is above 0, flattening a struct enters the next level down, and a child table's rows sit one
level below its parent's rows. Below that, a value is kept as JSON text. The root table's own struct
columns are stored as they are; only its array columns become child tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..errors import ConfigError, SourceError
from ..model.naming import (
    CHILD_SEPARATOR,
    LOAD_ID,
    ROW_ID,
    check_distinct_names,
    check_folder_name,
    check_storable_names,
    check_table_location,
    name_key,
)
from ..model.options import TableHints, WriteDisposition
from .expressions import SOURCE, TARGET, Col, In, Lit, Not, keys_equal
from .merge import HARD_DELETE_FLAG, Clause, MergePlan, Operation, SourceShape, plan_load

SEPARATOR = CHILD_SEPARATOR  # between the fragments of a child table's or a flattened column's name
PARENT_ID = "_dlt_parent_id"  # the parent row's _dlt_id
LIST_INDEX = "_dlt_list_idx"  # the element's 0-based position in its list
ROOT_ID = "_dlt_root_id"  # the root row's _dlt_id, where merges need it (K-3)
VALUE = "value"  # the column of scalar elements
LIST_FIELD = "list"  # the field that holds an element which is itself a list
UNLIMITED_NESTING = 1000  # dlt's default max_table_nesting
ROOT_KEY_STRATEGIES = ("delete-insert", "upsert", "insert-only")  # strategies whose child rows carry ROOT_ID
CHILD_SYSTEM_COLUMNS = (LOAD_ID, ROW_ID, PARENT_ID, LIST_INDEX, ROOT_ID)  # what a load adds to child rows


@dataclass(frozen=True)
class Shape:
    """A value's type as the planner sees it: a scalar, a struct of named fields, or an array."""

    kind: str  # "scalar" | "struct" | "array"
    fields: tuple[tuple[str, Shape], ...] = ()  # struct: (source field name, shape)
    element: Shape | None = None  # array: the elements' shape

    @classmethod
    def scalar(cls) -> Shape:
        return cls("scalar")

    @classmethod
    def struct(cls, *fields: tuple[str, Shape]) -> Shape:
        return cls("struct", tuple(fields))

    @classmethod
    def array(cls, element: Shape) -> Shape:
        return cls("array", element=element)


@dataclass(frozen=True)
class Column:
    """One stored column of a child table: where its value sits in the row's value, and its name."""

    path: tuple[str, ...]  # source field names from the row's value; () is the value itself
    name: str
    as_json: bool = False  # a struct or array below the nesting limit: stored as JSON text


@dataclass(frozen=True)
class NestedTable:
    """One child table: its rows are the elements of the array at `source` in each parent row."""

    name: str
    parent: str
    source: tuple[str, ...]  # path of the array in the parent row's value (the root: its columns)
    element: str  # "struct" | "scalar" | "array" (an array element is wrapped as {"list": element})
    columns: tuple[Column, ...]
    depth: int  # 1 for a child of the root table


@dataclass(frozen=True)
class NestedPlan:
    root: str
    child_columns: tuple[str, ...]  # the root's columns that become child tables (dropped from the root)
    json_columns: tuple[str, ...]  # the root's array columns kept as JSON text (max_table_nesting=0)
    tables: tuple[NestedTable, ...]  # parents before their children

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tables)

    def table(self, name: str) -> NestedTable:
        return next(t for t in self.tables if t.name == name)


def is_child_table_of(root: str, name: str) -> bool:
    """Whether a table name is one of `root`'s child tables at any depth."""
    return name.startswith(root + SEPARATOR) and len(name) > len(root) + len(SEPARATOR)


def plan_nested(
    root: str,
    columns: tuple[tuple[str, Shape], ...],
    normalize: Callable[[str], str],
    max_table_nesting: int | None = None,
) -> NestedPlan:
    """The child tables of a root table whose (stored, top-level) columns have these shapes."""
    level = UNLIMITED_NESTING if max_table_nesting is None else max_table_nesting
    child_columns, json_columns, tables = [], [], []
    for name, shape in columns:
        if shape.kind != "array":
            continue
        if level > 0:
            child_columns.append(name)
            tables += _tables(root + SEPARATOR + name, root, (name,), shape.element, level - 1, 1, normalize)
        else:
            json_columns.append(name)
    return NestedPlan(root, tuple(child_columns), tuple(json_columns), tuple(tables))


def _tables(
    name: str,
    parent: str,
    source: tuple[str, ...],
    element: Shape,
    level: int,
    depth: int,
    normalize: Callable[[str], str],
) -> list[NestedTable]:
    """The table of one array's elements, whose rows sit at `level`, and its own child tables."""
    if element.kind == "scalar":
        return [NestedTable(name, parent, source, "scalar", (Column((), VALUE),), depth)]
    if element.kind == "array":  # a list of lists: rows {"list": element}, one level further down
        element, level, kind = Shape.struct((LIST_FIELD, element)), level - 1, "array"
    else:
        kind = "struct"
    columns, arrays = _flatten(element.fields, level, (), (), normalize)
    table = NestedTable(name, parent, source, kind, tuple(columns), depth)
    children = []
    for path, stored, shape in arrays:
        child = name + SEPARATOR + stored
        children += _tables(child, name, path, shape.element, level - 1, depth + 1, normalize)
    return [table, *children]


def _flatten(
    fields: tuple[tuple[str, Shape], ...],
    level: int,
    path: tuple[str, ...],
    stored: tuple[str, ...],
    normalize: Callable[[str], str],
) -> tuple[list[Column], list[tuple[tuple[str, ...], str, Shape]]]:
    """A row's columns (structs flattened while the level allows) and the arrays that become tables."""
    columns: list[Column] = []
    arrays: list[tuple[tuple[str, ...], str, Shape]] = []
    for field, shape in fields:
        field_path, field_stored = (*path, field), (*stored, normalize(field))
        name = SEPARATOR.join(field_stored)
        if shape.kind == "scalar":
            columns.append(Column(field_path, name))
        elif level <= 0:
            columns.append(Column(field_path, name, as_json=True))
        elif shape.kind == "struct":
            more, deeper = _flatten(shape.fields, level - 1, field_path, field_stored, normalize)
            columns += more
            arrays += deeper
        else:
            arrays.append((field_path, name, shape))
    return columns, arrays


def source_of(table: NestedTable) -> str:
    """The list a child table is made of, as the source spells it: `list column 'tags' of table 'u'`."""
    return f"list column {'.'.join(table.source)!r} of table {table.parent!r}"


def check_child_tables(plan: NestedPlan, dataset: str) -> None:
    """Refuse, before anything is committed, child tables a load cannot write: a name the store cannot
    hold (model.naming: every depth, after the naming convention), two lists that make one table, and
    columns of a child table that are one name twice (ignoring case, as Spark and Delta compare names)
    or one of the system columns a load adds to child rows (a `_dlt_id` field inside the elements would
    be taken for the row's id)."""
    made_by: dict[str, NestedTable] = {}
    for table in plan.tables:
        check_folder_name(source_of(table), table.name)
        check_table_location(source_of(table), dataset, table.name)
        if table.name in made_by:
            raise ConfigError(
                source_of(table),
                f"makes child table {table.name!r}, and so does the {source_of(made_by[table.name])}; "
                "nothing was loaded. Rename one of them in the source, or use naming='snake_case'.",
            )
        made_by[table.name] = table
        names = [c.name for c in table.columns]
        check_distinct_names(table.name, names)
        check_storable_names(table.name, names)
        system = {name_key(c) for c in CHILD_SYSTEM_COLUMNS}
        taken = sorted({n for n in names if name_key(n) in system})
        if taken:
            raise SourceError(
                f"the elements of the {source_of(table)} give child table {table.name!r} the column(s) "
                f"{taken}, which are (ignoring case) the system columns a load adds to child rows "
                f"({', '.join(CHILD_SYSTEM_COLUMNS)}); nothing was loaded. Rename those fields in the source."
            )


def check_not_adopted(
    root: str, plan: NestedPlan, existing: Iterable[str], root_tables: Mapping[str, set[str | None]]
) -> None:
    """Refuse child tables a load would write into a table that is not one of `root`'s: a table loaded
    on its own, another root table's child table, or one written by another tool. `existing`: the
    tables found as root's child tables on storage (by name and columns); `root_tables`: for each table
    the load writes that exists, the `root_table` its loads' commits name (None for a commit of a table
    loaded on its own). A table found as root's child table is another's where its commits name
    another root; any other table is root's only where its commits name root alone (a concurrent
    load of root may have created it)."""
    existing = set(existing)
    for name, owners in sorted(root_tables.items()):
        others = sorted(o for o in owners if o not in (None, root))
        if name in existing and not others or name not in existing and owners == {root}:
            continue
        what = f"a child table of {others[0]!r}" if others else "a table of its own (not a child table)"
        made = (
            f"the {source_of(plan.table(name))} makes child table {name!r}"
            if name in plan.names
            else f"{root!r} would write {name!r}, found beside it as one of its child tables"
        )
        raise ConfigError(
            "table_name",
            f"{made}, but the dataset's table {name!r} is {what}; nothing was loaded. Rename the list "
            f"column in the source, or load {root!r} under another table name.",
        )


def check_root_table(table: str, root_tables: Iterable[str | None]) -> None:
    """Refuse loading a table directly that is a child table of another: `root_tables` are the
    `root_table` the table's commits name (None where a commit is a root table's own)."""
    owner = next((r for r in root_tables if r not in (None, table)), None)
    if owner is not None:
        raise ConfigError(
            "table_name",
            f"{table!r} is a child table of {owner!r} (made from one of its list columns); loading it on "
            f"its own would mix rows without parents into it, and the next load of {owner!r} would "
            f"change them. Nothing was loaded. Load {owner!r}, or choose another table name.",
        )


def takes_root_key(disposition: str, strategy: str | None) -> bool:
    """Whether child rows carry `_dlt_root_id` (K-3): merges by delete-insert, upsert or insert-only."""
    return disposition == "merge" and strategy in ROOT_KEY_STRATEGIES


def plan_child_commit(
    mode: str, *, table_exists: bool, batch_empty: bool, flagged: bool, superseded: tuple[str, ...] = ()
) -> MergePlan:
    """The commit of one child table: `mode` is how the root table's commit changes it (append,
    replace, or a merge strategy), applied on the child's own keys: `_dlt_root_id` for delete-insert
    (rows flagged as deletes carry the ids of deleted roots), `_dlt_id` for upsert and insert-only
    (flagged rows carry the ids of child rows to delete). `superseded`: loads of interrupted attempts
    whose rows an insert-only commit replaces (see `_insert_only_replacing`)."""
    if mode == "insert-only" and table_exists and superseded and flagged:
        return _insert_only_replacing(superseded)
    if mode in ("append", "replace"):
        disposition, hints = WriteDisposition(mode), TableHints()
    elif mode == "delete-insert":
        disposition, hints = WriteDisposition("merge", mode), TableHints(merge_key=(ROOT_ID,))
    else:
        disposition, hints = WriteDisposition("merge", mode), TableHints(primary_key=(ROW_ID,))
    return plan_load(
        disposition, hints, table_exists=table_exists, batch_empty=batch_empty, hard_delete=flagged
    )


def _insert_only_replacing(superseded: tuple[str, ...]) -> MergePlan:
    """insert-only into a child table where interrupted attempts of the run left rows (their root table's
    commit never landed): a row of theirs the batch has takes the batch's values, one it lacks arrives
    flagged and goes; every other row stays, as insert-only keeps it."""
    flagged = Col(HARD_DELETE_FLAG, SOURCE)
    theirs = In(Col(LOAD_ID, TARGET), tuple(Lit(load_id) for load_id in superseded))
    return MergePlan(
        Operation.MERGE,
        SourceShape.ROWS_WITH_FLAG,
        on=keys_equal((ROW_ID,), (ROW_ID,)),
        clauses=(
            Clause("matched", "delete", condition=flagged),
            Clause("matched", "update_all", condition=theirs),
            Clause("not_matched", "insert_all", condition=Not(flagged)),
        ),
        helper_columns=(HARD_DELETE_FLAG,),
        reason="insert-only replacing the rows of interrupted attempts",
    )
