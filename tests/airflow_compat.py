"""What tests need from Airflow under the names each supported release gives it (3.0 and later)."""

from __future__ import annotations


def dag_serialization():
    """Airflow's DAG serializer: DagSerialization from 3.1, SerializedDAG in 3.0."""
    from airflow.serialization import serialized_objects

    return getattr(serialized_objects, "DagSerialization", None) or serialized_objects.SerializedDAG


def cron_timetables():
    """(CronTriggerTimetable, CronDataIntervalTimetable): the task SDK's from 3.1, the core's in 3.0."""
    try:
        from airflow.sdk import CronDataIntervalTimetable, CronTriggerTimetable
    except ImportError:
        from airflow.timetables.interval import CronDataIntervalTimetable
        from airflow.timetables.trigger import CronTriggerTimetable
    return CronTriggerTimetable, CronDataIntervalTimetable
