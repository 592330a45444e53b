"""Column names Spark and Delta take only quoted, through every disposition and merge strategy on each
writer (`naming="direct"` keeps them as given): dots, dashes, colons, backticks, quotes, brackets,
unicode, leading digits and SQL words as keys, hints, partition, cursor, sequence and child-table
columns, loaded, read back by name and merged again. Refused before anything is written, the table
version unchanged: names equal ignoring case (Spark and Delta take names so), naming both; names with a
character Delta Lake does not allow without column mapping (a space, `,;{}()=`, a tab, a newline).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import (
    ColumnNameError,
    ConfigError,
    Incremental,
    InvalidColumnNameError,
    run_load,
)
from tests.helpers import ordered, table_version

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)

# Each group is the compound primary key of its cases: every name in it is a key on every path.
NAME_GROUPS = {
    "punctuation": ("a.b", "a-b:c", "a`b"),
    "quotes": ('a"b', "a'b", "a[0]"),
    "words": ("ünï_cödé", "1st", "select"),
}
VALUE = "v.al`ue"  # a value column with a dot and a backtick
ORDER = "order"  # a reserved word
DELETED = "is.deleted?"  # the hard_delete column
SORT = "sort.by"  # the dedup_sort column

STRATEGIES = {
    "append": "append",
    "replace": "replace",
    "delete-insert": {"disposition": "merge", "strategy": "delete-insert"},
    "upsert": {"disposition": "merge", "strategy": "upsert"},
    "insert-only": {"disposition": "merge", "strategy": "insert-only"},
    "scd2": {"disposition": "merge", "strategy": "scd2"},
}
HARD_DELETES = ("delete-insert", "upsert")  # the strategies whose hard_delete column deletes rows here


def row(keys, n, value, **more):
    return {keys[0]: n, keys[1]: str(n), keys[2]: n * 10, VALUE: value, ORDER: n, **more}


def load(spark, dataset, data, **arguments):
    arguments.setdefault("table_name", "odd")
    arguments.setdefault("pipeline_name", "names")
    arguments.setdefault("naming", "direct")
    return run_load(data, spark=spark, dataset=dataset, **arguments)


def read(path, columns=None, active_only=None) -> list[dict]:
    """The table's rows read by column name (the given names, exactly)."""
    table = DeltaTable(path).to_pyarrow_table()
    rows = table.to_pylist()
    if active_only is not None:
        rows = [r for r in rows if r[active_only] is None]
    wanted = columns or [c for c in table.column_names if not c.startswith("_dlt")]
    return ordered([{c: r[c] for c in wanted} for r in rows])


def expected_rows(strategy: str, keys, first: list[dict], second: list[dict]) -> list[dict]:
    """The table after both loads, as each strategy takes them (a plain model)."""

    def key(r):
        return tuple(r[k] for k in keys)

    def plain(rows):
        return [{k: v for k, v in r.items() if k not in (DELETED, SORT)} for r in rows]

    if strategy == "append":
        return ordered(plain(first + second))
    if strategy == "replace":
        return ordered(plain(second))
    table = {key(r): r for r in plain(first)}
    if strategy == "delete-insert":  # one row per key: the highest dedup_sort value
        second = sorted(second, key=lambda r: r[SORT])
        second = list({key(r): r for r in second}.values())
    for r in second:
        if strategy == "insert-only":
            table.setdefault(key(r), plain([r])[0])
        elif r.get(DELETED):
            table.pop(key(r), None)
        else:
            table[key(r)] = plain([r])[0]
    return ordered(list(table.values()))


@pytest.mark.parametrize("group", NAME_GROUPS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_odd_names_load_read_back_and_merge_again(spark, dataset, strategy, group):
    keys = NAME_GROUPS[group]
    path = f"{dataset}/odd"
    hints = {}
    columns = {}
    if strategy != "scd2" and STRATEGIES[strategy] not in ("append", "replace"):
        hints["primary_key"] = list(keys)
    if strategy == "scd2":
        hints["merge_key"] = list(keys)
    if strategy in HARD_DELETES:
        columns[DELETED] = {"hard_delete": True}
    if strategy == "delete-insert":
        columns[SORT] = {"dedup_sort": "desc"}
    first = [row(keys, n, "old", **({SORT: 1} if strategy == "delete-insert" else {})) for n in (1, 2, 3)]
    second = [row(keys, 2, "new"), row(keys, 4, "new")]
    if strategy in HARD_DELETES:
        second.append(row(keys, 3, "gone", **{DELETED: True}))
    if strategy == "delete-insert":  # two rows of one key: the higher sort value wins
        second = [{**r, SORT: 2} for r in second] + [row(keys, 2, "older", **{SORT: 1})]
    # scd2 by merge key: the batch's keys get new versions; keys it lacks stay as they are

    arguments = {"write_disposition": STRATEGIES[strategy], "columns": columns or None, **hints}
    load(spark, dataset, first, **arguments)
    again = load(spark, dataset, second, **arguments)

    wanted = [*keys, VALUE, ORDER]
    active = "_dlt_valid_to" if strategy == "scd2" else None
    assert read(path, wanted, active) == expected_rows(strategy, keys, first, second)
    assert again.table_version == table_version(path) == 1
    if strategy in HARD_DELETES:
        assert again.metrics["numTargetRowsDeleted"] >= 1


@pytest.mark.parametrize("strategy", ["append", "upsert"])
def test_an_odd_partition_column_partitions_and_bounds_the_merge(spark, dataset, strategy):
    """A partition column named with a dot, a space and a quote: Delta's partition folders escape it;
    an upsert bounds its merge condition by the batch's values of it (plan/pruning)."""
    region = "re.gion'x'"
    keys = {"primary_key": "i:d"} if strategy == "upsert" else {}
    disposition = STRATEGIES[strategy]
    columns = {region: {"data_type": "text", "partition": True}}
    rows = [{"i:d": n, region: "eu" if n % 2 else "us", VALUE: "old"} for n in range(4)]
    load(spark, dataset, rows, write_disposition=disposition, columns=columns, **keys)
    load(spark, dataset, [{"i:d": 1, region: "eu", VALUE: "new"}], write_disposition=disposition, **keys)

    path = f"{dataset}/odd"
    assert DeltaTable(path).metadata().partition_columns == [region]
    got = read(path, ["i:d", region, VALUE])
    old = [{"i:d": n, region: "eu" if n % 2 else "us", VALUE: "old"} for n in range(4)]
    if strategy == "upsert":
        old[1][VALUE] = "new"
        assert got == ordered(old)
    else:
        assert got == ordered([*old, {"i:d": 1, region: "eu", VALUE: "new"}])


@pytest.mark.parametrize("cursor", ["updated-at", "select", "x`y", "updated.at"])
def test_an_odd_cursor_column_filters_incrementally(spark, dataset, cursor):
    def rows(hours, value):
        return [{"i.d": n, cursor: T0 + timedelta(hours=n), VALUE: value} for n in hours]

    merge = {
        "write_disposition": STRATEGIES["upsert"],
        "primary_key": "i.d",
        "incremental": Incremental(cursor),
    }
    load(spark, dataset, rows(range(3), "old"), **merge)
    again = load(spark, dataset, rows(range(5), "new"), **merge)  # rows 0..1 are before the cursor

    assert again.metrics["rows_staged"] == 3  # the boundary row 2 again, and 3, 4
    got = read(f"{dataset}/odd", ["i.d", VALUE])
    assert got == ordered([{"i.d": n, VALUE: "old" if n < 2 else "new"} for n in range(5)])


def test_odd_sequence_and_event_columns_apply_change_events(spark, dataset):
    """sequence_by, the CDC column list, a delete condition and the tombstones of a key over columns with
    odd names (the key holds a backtick, which delta-rs cannot spell in a merge of its own)."""
    sequence, op = "seq.no", "op-code"

    def event(n, seq, name, code="U"):
        return {"i`d": n, sequence: seq, "na`me": name, op: code, "dropped.col": "x"}

    arguments = {
        "write_disposition": STRATEGIES["upsert"],
        "primary_key": "i`d",
        "sequence_by": sequence,
        "except_column_list": ["dropped.col", op],
        "apply_as_deletes": f"`{op}` = 'D'",
    }
    load(spark, dataset, [event(1, 1, "a"), event(2, 1, "b"), event(3, 1, "c")], **arguments)
    load(spark, dataset, [event(1, 3, "a2"), event(1, 2, "stale"), event(2, 5, None, "D")], **arguments)
    load(spark, dataset, [event(2, 4, "late")], **arguments)  # older than key 2's tombstone

    got = read(f"{dataset}/odd")
    assert [{k: r[k] for k in ("i`d", "na`me")} for r in got] == ordered(
        [{"i`d": 1, "na`me": "a2"}, {"i`d": 3, "na`me": "c"}]
    )
    assert "dropped.col" not in got[0] and op not in got[0]


def test_odd_names_in_child_tables(spark, dataset):
    """Lists whose elements have odd field names become child tables; an upsert merges them again."""
    upsert = {"write_disposition": STRATEGIES["upsert"], "primary_key": "o.id"}
    first = [
        {"o.id": 1, "it.ems": [{"s.ku": "a", "qty`": 1}, {"s.ku": "b", "qty`": 2}]},
        {"o.id": 2, "it.ems": [{"s.ku": "c", "qty`": 3}]},
    ]
    load(spark, dataset, first, **upsert)
    load(spark, dataset, [{"o.id": 1, "it.ems": [{"s.ku": "z", "qty`": 9}]}], **upsert)

    items = read(f"{dataset}/odd__it.ems", ["s.ku", "qty`"])
    assert items == ordered([{"s.ku": "z", "qty`": 9}, {"s.ku": "c", "qty`": 3}])


def test_odd_scd2_validity_columns(spark, dataset):
    scd2 = {
        "disposition": "merge",
        "strategy": "scd2",
        "validity_column_names": ["valid.from", "valid`to"],
    }
    load(spark, dataset, [{"i.d": 1, VALUE: "a"}, {"i.d": 2, VALUE: "b"}], write_disposition=scd2)
    load(spark, dataset, [{"i.d": 1, VALUE: "a2"}], write_disposition=scd2)

    rows = DeltaTable(f"{dataset}/odd").to_pyarrow_table().to_pylist()
    active = sorted((r["i.d"], r[VALUE]) for r in rows if r["valid`to"] is None)
    assert active == [(1, "a2")]
    assert sorted((r["i.d"], r[VALUE]) for r in rows if r["valid`to"] is not None) == [(1, "a"), (2, "b")]


# ---- names equal ignoring case: refused before anything is written, naming both ----


def _refused(spark, dataset, data, names, **arguments):
    """The load is refused with ColumnNameError naming both names; the table keeps its version."""
    path = f"{dataset}/odd"
    version = table_version(path)
    with pytest.raises(ColumnNameError) as refused:
        load(spark, dataset, data, **arguments)
    message = str(refused.value)
    assert all(repr(n) in message for n in names), message
    assert "Nothing was loaded" in message and "Rename one of them" in message
    assert table_version(path) == version
    return refused.value


@pytest.fixture
def existing(spark, dataset):
    """The table, with columns `id` and `Name`."""
    load(spark, dataset, [{"id": 1, "Name": "a"}], write_disposition="merge", primary_key="id")


@pytest.mark.parametrize("naming", ["direct", "snake_case"])
def test_two_batch_columns_equal_ignoring_case_are_refused(spark, dataset, existing, naming):
    # direct: `Name` and `name` differ but for case; snake_case maps `NAME` and `Name` both to `name`
    names = ("Name", "name") if naming == "direct" else ("NAME", "Name")
    data = [{"id": 2, names[0]: "x", names[1]: "y"}]
    _refused(spark, dataset, data, names, write_disposition="merge", primary_key="id", naming=naming)


def test_a_dataframe_with_columns_equal_ignoring_case_is_refused(spark, dataset, existing):
    frame = spark.createDataFrame([(2, "x", "y")], "id long, `A.b` string, `a.B` string")
    _refused(spark, dataset, frame, ("A.b", "a.B"), write_disposition="merge", primary_key="id")


def test_a_batch_column_equal_to_a_table_column_but_for_case_is_refused(spark, dataset, existing):
    error = _refused(
        spark,
        dataset,
        [{"id": 2, "name": "x"}],
        ("Name", "name"),
        write_disposition="merge",
        primary_key="id",
    )
    assert error.names == ("Name", "name") and error.table == "odd"


def test_a_declared_column_equal_to_a_batch_column_but_for_case_is_refused(spark, dataset, existing):
    _refused(
        spark,
        dataset,
        [{"id": 2, "Name": "x", "amount": 1}],
        ("AMOUNT", "amount"),
        write_disposition="merge",
        primary_key="id",
        columns={"AMOUNT": {"data_type": "bigint"}},
    )


def test_flattened_fields_equal_ignoring_case_are_refused(spark, dataset, existing):
    _refused(spark, dataset, [{"id": 2, "Name": "x", "p": {"Q": 1, "q": 2}}], ("Q", "q"), primary_key="id")


def test_child_table_fields_equal_ignoring_case_are_refused(spark, dataset, existing):
    data = [{"id": 2, "Name": "x", "items": [{"Sku": "a", "sku": "b"}]}]
    _refused(spark, dataset, data, ("Sku", "sku"), write_disposition="merge", primary_key="id")
    assert not DeltaTable.is_deltatable(f"{dataset}/odd__items")


def test_a_child_table_column_equal_to_a_batch_column_but_for_case_is_refused(spark, dataset):
    load(spark, dataset, [{"id": 1, "items": [{"sku": "a"}]}])
    child = f"{dataset}/odd__items"
    version = table_version(child)
    with pytest.raises(ColumnNameError) as refused:
        load(spark, dataset, [{"id": 2, "items": [{"SKU": "b"}]}])
    assert "'sku'" in str(refused.value) and "'SKU'" in str(refused.value)
    assert table_version(child) == version and table_version(f"{dataset}/odd") == 0


def test_a_column_equal_to_a_system_column_but_for_case_is_refused(spark, dataset, existing):
    _refused(
        spark,
        dataset,
        [{"id": 2, "Name": "x", "_DLT_ID": "mine"}],
        ("_dlt_id", "_DLT_ID"),
        write_disposition="merge",
        primary_key="id",
    )


def test_a_column_name_error_is_a_config_error_of_the_naming():
    error = ColumnNameError("odd", ("ID", "id"), "of the batch")
    assert isinstance(error, ConfigError) and error.argument == "naming"


# ---- characters Delta Lake does not allow in a column name (without column mapping) ----


@pytest.mark.parametrize("name", ["a b", "a,b", "a;b", "a{b}", "f(x)", "a=b", "a\tb", "a\nb"])
def test_a_column_name_delta_does_not_allow_is_refused(spark, dataset, existing, name):
    path = f"{dataset}/odd"
    with pytest.raises(InvalidColumnNameError) as refused:
        load(spark, dataset, [{"id": 2, "Name": "x", name: 1}], write_disposition="merge", primary_key="id")
    assert refused.value.name == name and repr(name) in str(refused.value)
    assert "Nothing was loaded" in str(refused.value)
    assert table_version(path) == 0


def test_a_child_table_field_or_validity_column_delta_does_not_allow_is_refused(spark, dataset, existing):
    with pytest.raises(InvalidColumnNameError, match="'s ku'"):
        load(spark, dataset, [{"id": 2, "Name": "x", "items": [{"s ku": "a"}]}], primary_key="id")
    assert not DeltaTable.is_deltatable(f"{dataset}/odd__items")
    scd2 = {"disposition": "merge", "strategy": "scd2", "validity_column_names": ["valid from", "to"]}
    with pytest.raises(InvalidColumnNameError, match="'valid from'"):
        load(spark, dataset, [{"id": 2, "Name": "x"}], table_name="other", write_disposition=scd2)
    assert not DeltaTable.is_deltatable(f"{dataset}/other")
    assert table_version(f"{dataset}/odd") == 0
