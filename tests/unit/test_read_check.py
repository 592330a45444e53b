"""A delta-rs commit over a stale read is refused: the files a plan read, by the partitions its
condition names, checked against the table as it is now (real Delta tables on disk, no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge.delta.read_check import files_read, require_reads_current
from airflow_provider_deltamerge.errors import ConflictError
from airflow_provider_deltamerge.plan.expressions import TARGET, Cmp, Col, In, Lit

DAYS_1_AND_5 = (In(Col("day", TARGET), (Lit(1), Lit(5))),)


@pytest.fixture
def days(tmp_path):
    """Days 1, 3 and 5, two files each."""
    path = str(tmp_path / "days")
    for _ in range(2):
        write_deltalake(
            path, pa.table({"day": [1, 3, 5], "v": ["a", "b", "c"]}), partition_by=["day"], mode="append"
        )
    return path


def test_a_plan_reads_the_files_of_the_partitions_it_names(days):
    table = DeltaTable(days)
    assert len(files_read(table)) == 6
    assert {p.split("/")[0] for p in files_read(table, DAYS_1_AND_5)} == {"day=1", "day=5"}
    assert {p.split("/")[0] for p in files_read(table, (Cmp(">", Col("day", TARGET), Lit(1)),))} == {
        "day=3",
        "day=5",
    }


def test_an_optimize_of_another_partition_leaves_the_read_current_and_of_its_own_makes_it_stale(days):
    planned = DeltaTable(days)
    DeltaTable(days).optimize.compact(partition_filters=[("day", "=", "3")])
    require_reads_current(planned, DeltaTable(days), DAYS_1_AND_5)
    with pytest.raises(ConflictError, match="removed 2 of the files the load read"):
        require_reads_current(planned, DeltaTable(days))  # a plan reading the whole table
    DeltaTable(days).optimize.compact(partition_filters=[("day", "=", "5")])
    with pytest.raises(ConflictError, match="planned on"):
        require_reads_current(planned, DeltaTable(days), DAYS_1_AND_5)


def test_a_plan_whose_source_holds_rows_of_the_table_is_stale_once_a_file_is_added_where_it_read(days):
    planned = DeltaTable(days)
    write_deltalake(days, pa.table({"day": [3], "v": ["d"]}), mode="append")
    require_reads_current(planned, DeltaTable(days), DAYS_1_AND_5, added_too=True)
    write_deltalake(days, pa.table({"day": [5], "v": ["d"]}), mode="append")
    require_reads_current(planned, DeltaTable(days), DAYS_1_AND_5)  # a file added: nothing it read gone
    with pytest.raises(ConflictError, match="changed 1 of the files"):
        require_reads_current(planned, DeltaTable(days), DAYS_1_AND_5, added_too=True)


def test_a_commit_that_widened_the_schema_makes_every_read_stale(days):
    """The plan's columns are the schema it was planned on: a column added since (by a load whose batch
    brought it) means planning again, even where no file the plan read was touched."""
    planned = DeltaTable(days)
    widened = pa.table({"day": [7], "v": ["d"], "score": [1.5]})
    write_deltalake(days, widened, partition_by=["day"], mode="append", schema_mode="merge")

    with pytest.raises(ConflictError, match="changed the table's schema"):
        require_reads_current(planned, DeltaTable(days), DAYS_1_AND_5)
