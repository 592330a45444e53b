"""What tests need from Airflow under the names each supported release gives it (3.0 and later)."""

from __future__ import annotations


def dag_serialization():
    """Airflow's DAG serializer: DagSerialization from 3.1, SerializedDAG in 3.0."""
    from airflow.serialization import serialized_objects

    return getattr(serialized_objects, "DagSerialization", None) or serialized_objects.SerializedDAG


def cron_timetables():
    """(CronTriggerTimetable, CronDataIntervalTimetable): the task SDK's from 3.1, the core's in 3.0."""
    classes = timetable_classes()
    return classes.CronTriggerTimetable, classes.CronDataIntervalTimetable


def timetable_classes():
    """The timetable classes a DAG is given: the task SDK's from 3.1, the core's in 3.0."""
    from types import SimpleNamespace

    try:
        from airflow.sdk import (
            CronDataIntervalTimetable,
            CronTriggerTimetable,
            DeltaDataIntervalTimetable,
            DeltaTriggerTimetable,
            MultipleCronTriggerTimetable,
        )
    except ImportError:
        from airflow.timetables.interval import CronDataIntervalTimetable, DeltaDataIntervalTimetable
        from airflow.timetables.trigger import (
            CronTriggerTimetable,
            DeltaTriggerTimetable,
            MultipleCronTriggerTimetable,
        )
    return SimpleNamespace(
        CronDataIntervalTimetable=CronDataIntervalTimetable,
        CronTriggerTimetable=CronTriggerTimetable,
        DeltaDataIntervalTimetable=DeltaDataIntervalTimetable,
        DeltaTriggerTimetable=DeltaTriggerTimetable,
        MultipleCronTriggerTimetable=MultipleCronTriggerTimetable,
    )


def drifting_timetable():
    """A custom timetable whose runs are five hours apart counted from any instant it is asked about:
    no grid, so the run before one of its runs cannot be known."""
    from airflow.timetables.base import DagRunInfo, DataInterval, Timetable

    class EveryFiveHoursFromWhereverAsked(Timetable):
        def next_dagrun_info(self, *, last_automated_data_interval, restriction):
            after = last_automated_data_interval.end if last_automated_data_interval else restriction.earliest
            return DagRunInfo.exact(after.add(hours=5))

        def infer_manual_data_interval(self, *, run_after):
            return DataInterval.exact(run_after)

    return EveryFiveHoursFromWhereverAsked()


def register_assets(dag) -> None:
    """Airflow 3.0's dag.test() refuses outlets whose assets no DAG processor has registered yet;
    later releases register them themselves. Writes the DAG, and so its assets, to the metadata DB."""
    import airflow

    if not airflow.__version__.startswith("3.0."):
        return
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.models.dag import DAG as SchedulerDAG
    from airflow.serialization.serialized_objects import SerializedDAG

    DagBundlesManager().sync_bundles_to_db()
    scheduler_dag = SerializedDAG.deserialize_dag(SerializedDAG.serialize_dag(dag))
    SchedulerDAG.bulk_write_to_db("dags-folder", None, [scheduler_dag])
