"""The weekly-load, monthly-maintenance example DAG run with dag.test(), and DeltaMaintenanceOperator's
arguments: refused when the DAG is parsed, or failing the task without retry when only the table
can tell."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import ConfigError
from airflow_provider_deltamerge.delta.store import read_loads
from airflow_provider_deltamerge.model.delta_jars import delta_jars_from_env

from .conftest import DAGS_FOLDER, DEMO_DIR, dags_folder_module

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

DATASET = f"{DEMO_DIR}/lake/nycflights13_maintained"
FLIGHTS = f"{DATASET}/flights"
SUNDAYS = [datetime(2013, 1, 20, tzinfo=timezone.utc) + timedelta(weeks=n) for n in range(3)]  # Feb 3 last


# The maintenance's commits, oldest first, by its writer: delta-rs claims the table before its OPTIMIZE
# and its VACUUM commits only where it deletes files; Delta logs every VACUUM as a start and an end.
MAINTENANCE_COMMITS = {
    "delta-rs": ["SET TBLPROPERTIES", "OPTIMIZE"],
    "delta-spark": ["OPTIMIZE", "VACUUM START", "VACUUM END"],
}


demo = dags_folder_module("run_demo")


def task_states(dag_run) -> dict[str, str]:
    from airflow.models import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.task_id, TaskInstance.state).where(
                TaskInstance.dag_id == dag_run.dag_id, TaskInstance.run_id == dag_run.run_id
            )
        ).all()
    return {task_id: getattr(state, "value", state) for task_id, state in rows}


def data_files(version: int | None = None) -> dict[str, int]:
    actions = DeltaTable(FLIGHTS, version=version).get_add_actions(flatten=True)
    return dict(
        zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True)
    )


def maintenance_commits(loaded_version: int) -> list[str]:
    """The operations of the commits after the load's, oldest first."""
    history = DeltaTable(FLIGHTS).history()  # newest first
    return [c["operation"] for c in reversed(history) if c["version"] > loaded_version]


def rows(version: int | None = None) -> int:
    return DeltaTable(FLIGHTS, version=version).to_pyarrow_table(columns=["flight"]).num_rows


def test_weekly_loads_with_maintenance_on_the_first_run_of_a_month(landed):
    dag = demo.load_dag(DAGS_FOLDER, "nycflights13_flights_maintained.py")
    for sunday in SUNDAYS[:2]:
        run = dag.test(logical_date=sunday, run_conf=demo.week_conf(sunday))
        assert run.state == "success"
        assert task_states(run) == {
            "merge_flights": "success",
            "first_run_of_the_month": "success",
            "compact_and_vacuum": "skipped",
        }
    run = dag.test(logical_date=SUNDAYS[2], run_conf=demo.week_conf(SUNDAYS[2]))
    assert run.state == "success" and task_states(run)["compact_and_vacuum"] == "success"
    loaded = demo.return_value(run, "merge_flights")
    maintained = demo.return_value(run, "compact_and_vacuum")

    before = data_files(loaded["table_version"])  # the table as the week's load left it
    assert len(before) >= len(SUNDAYS)  # each weekly merge added files
    assert maintained["operations"] == ["compaction", "vacuum", "checkpoint"]
    assert (maintained["numRemovedFiles"], maintained["numRemovedBytes"]) == (
        len(before),
        sum(before.values()),
    )
    assert maintained["numAddedFiles"] == len(data_files()) == 1
    assert maintained["table_version"] == maintained["checkpointVersion"] > loaded["table_version"]
    assert maintained["writer"] == ("delta-spark" if delta_jars_from_env() else "delta-rs")
    assert maintenance_commits(loaded["table_version"]) == MAINTENANCE_COMMITS[maintained["writer"]]
    assert (maintained["retentionHours"], maintained["numDeletedFiles"]) == (14 * 24, 0)  # the DAG's property
    assert DeltaTable(f"{DATASET}/flights").metadata().configuration.items() >= {
        ("delta.deletedFileRetentionDuration", "interval 14 days"),
        ("delta.checkpointInterval", "20"),
    }
    assert (
        rows()
        == rows(loaded["table_version"])
        == sum(r["metrics"]["numTargetRowsInserted"] for r in read_loads(DATASET))
    )
    assert len(read_loads(DATASET)) == len(SUNDAYS)  # maintenance is no load


@pytest.mark.parametrize(
    ("arguments", "argument"),
    [
        ({"dataset": "lake"}, "dataset"),
        ({"table_name": "a/b"}, "table_name"),
        ({"optimize": False}, "optimize"),
        ({"vacuum": True, "retention_hours": -1}, "retention_hours"),
        ({"force": True}, "force"),
        ({"backend": "spark"}, "backend"),
    ],
)
def test_bad_arguments_are_refused_when_the_dag_is_parsed(tmp_path, arguments, argument):
    from airflow_provider_deltamerge.operators.maintenance import DeltaMaintenanceOperator

    arguments = {"task_id": "maintain", "dataset": str(tmp_path), "table_name": "t", **arguments}
    with pytest.raises(ConfigError) as refused:
        DeltaMaintenanceOperator(**arguments)
    assert refused.value.argument == argument


def test_a_retention_below_the_tables_fails_the_task_without_retry_and_changes_nothing(tmp_path):
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_deltamerge.operators.maintenance import DeltaMaintenanceOperator

    table = str(tmp_path / "lake" / "events")
    for day in range(3):
        write_deltalake(table, pa.table({"day": [day]}), mode="append")
    operator = DeltaMaintenanceOperator(
        task_id="maintain",
        dataset=str(tmp_path / "lake"),
        table_name="events",
        vacuum=True,
        retention_hours=24,
    )
    with pytest.raises(AirflowFailException, match="maintain: retention_hours: 24 hours is below the 168"):
        operator.execute({})
    assert DeltaTable(table).version() == 2 and len(DeltaTable(table).file_uris()) == 3
