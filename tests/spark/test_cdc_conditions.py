"""`apply_as_deletes` / `apply_as_truncates` are conditions over the event's own columns: a load whose
condition reads anything else or runs anything is refused (ConfigError naming the option and the
offending part) before anything is read or committed, and one of columns, operators and allowed
built-ins applies. The kinds of parts themselves, and a spark-submit request carrying one, are tested
one by one in tests/unit/test_row_condition.py.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import ConfigError
from tests.helpers import table_version
from tests.spark.test_cdc import rows
from tests.spark.test_cdc_deletes import event, load

pytestmark = pytest.mark.spark

REFUSED = [
    ("op IN (SELECT op FROM parquet.`{dataset}/accounts`)", "SELECT at position 7"),
    ("java_method('java.lang.Math', 'random') > 0", "it calls java_method()"),
    ("reflect('java.util.UUID', 'randomUUID') = op", "it calls reflect()"),
    ("read_files('{dataset}/accounts') IS NULL", "it calls read_files()"),
    ("input_file_name() = '' AND op = 'D'", "it calls input_file_name()"),
    ("is_delete(op)", "it calls is_delete()"),  # a UDF the session has
    ("rand() < 2 AND op = 'D'", "it calls rand()"),
    ("current_date > DATE '2000-01-01' AND op = 'D'", "current_date is not a column of the row"),
]


@pytest.mark.parametrize("argument", ["apply_as_deletes", "apply_as_truncates"])
@pytest.mark.parametrize("condition, part", REFUSED, ids=[p for _, p in REFUSED])
def test_a_condition_that_reads_or_runs_anything_is_refused_before_anything_is_committed(
    spark, dataset, argument, condition, part
):
    spark.udf.register("is_delete", lambda op: op == "D", "boolean")
    load(spark, dataset, [event(1, 1, "ann")])
    version = table_version(f"{dataset}/accounts")
    condition = condition.format(dataset=dataset)
    with pytest.raises(ConfigError) as refused:
        load(spark, dataset, [event(1, 2, op="D")], **{argument: condition})
    assert refused.value.argument == argument and part in str(refused.value)
    assert table_version(f"{dataset}/accounts") == version
    assert rows(dataset) == {1: event(1, 1, "ann")}
    assert not DeltaTable.is_deltatable(f"{dataset}/_dlt_tombstones_accounts")


def test_a_condition_of_allowed_built_ins_applies(spark, dataset):
    load(spark, dataset, [event(1, 1, "ann"), event(2, 1, "bob")])
    load(
        spark,
        dataset,
        [event(1, 2, op="d"), event(2, 2, "bob2")],
        apply_as_deletes="upper(trim(op)) IN ('D')",
    )
    assert rows(dataset) == {2: event(2, 2, "bob2")}
