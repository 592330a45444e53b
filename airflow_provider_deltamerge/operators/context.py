"""From Airflow's task context to what the load needs: the run context, the interval, dag_run.conf.

The rules for ``dag_run.conf`` live here, in one place: it may give window bounds (``start``/``end``:
a manual run loads that range, a scheduled or backfill run only the part of its own window they
name, see ``spec.window``) and set the options a task lists in ``conf_overridable``; it can never
name code to run or another target, so whoever may trigger a DAG cannot make it run arbitrary
callables or write elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..errors import ConfigError

WINDOW_KEYS = ("start", "end")
# Options a DAG author may let dag_run.conf set (per task, with `conf_overridable`).
OVERRIDABLE = (
    "write_disposition",
    "primary_key",
    "merge_key",
    "columns",
    "schema_contract",  # only ever tightened by dag_run.conf (see DeltaMergeOperator.load_arguments)
    "window_overwrite",
    "backend",
    "every",
)
# Never settable from dag_run.conf: what to read (code, queries, paths), where to write, how to run.
PROTECTED = (
    "source",
    "dataset",
    "table_name",
    "pipeline_name",
    "incremental",
    "naming",
    "max_table_nesting",
    "nested_layout",
    "root_key",
    "window",
    "conn_id",
    "storage_conn_id",
    "storage_options",
    "spark_conf",
    "submit_options",
    "python",
    "load_id",
    "format",
    "path",
    "options",
    "table",
    "sql",
    "callable",
)


def check_overridable(names: Iterable[str]) -> tuple[str, ...]:
    """Validate a task's `conf_overridable` list (at DAG parse time)."""
    names = (names,) if isinstance(names, str) else tuple(names)
    bad = [n for n in names if n not in OVERRIDABLE]
    if bad:
        raise ConfigError(
            "conf_overridable", f"{bad} cannot be set from dag_run.conf; allowed: {', '.join(OVERRIDABLE)}"
        )
    return names


def split_conf(conf: Mapping[str, Any] | None, overridable: Iterable[str]) -> tuple[dict, dict]:
    """dag_run.conf as (window, overrides); raises ConfigError for a key it may not set.

    Keys that are neither window bounds nor load options (other tasks' settings) are left alone.
    """
    window: dict[str, Any] = {}
    overrides: dict[str, Any] = {}
    allowed = set(overridable)
    for key, value in (conf or {}).items():
        if key in WINDOW_KEYS:
            if value is not None:
                if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                    raise ConfigError(f"dag_run.conf[{key!r}]", f"{value!r} must be an ISO 8601 timestamp")
                window[key] = value
        elif key in allowed:
            overrides[key] = value
        elif key in PROTECTED or key in OVERRIDABLE:
            raise ConfigError(
                f"dag_run.conf[{key!r}]",
                "this task does not let dag_run.conf set it"
                + ("" if key in PROTECTED else "; the DAG author can list it in conf_overridable"),
            )
    return window, overrides


def run_type_of(dag_run: Any) -> str | None:
    run_type = getattr(dag_run, "run_type", None)
    return None if run_type is None else str(getattr(run_type, "value", run_type))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _cron_previous(expression: str, timezone: Any, at: datetime) -> datetime:
    """The latest fire time of a cron expression strictly before `at`, in UTC (as Airflow does)."""
    import pendulum
    from croniter import croniter

    tz = pendulum.timezone(timezone) if isinstance(timezone, str) else timezone
    local = pendulum.instance(at).in_timezone(tz).naive()
    previous = croniter(expression, local).get_prev(datetime)
    return pendulum.instance(previous, tz=tz).in_timezone("UTC")


def _cron_of(timetable: Any) -> tuple[str, Any]:
    """(expression, timezone) of a cron timetable: attributes of the task SDK's (3.1 and later), in
    serialize() of Airflow 3.0's core timetables."""
    if hasattr(timetable, "expression"):
        return timetable.expression, timetable.timezone
    serialized = timetable.serialize()
    return serialized["expression"], serialized["timezone"]


def schedule_period_start(timetable: Any, at: datetime) -> datetime | None:
    """Start of the schedule period that ends at `at`, from the DAG's timetable; None if it has none."""
    try:  # Airflow 3.1 and later: the task SDK's own timetable classes
        from airflow.sdk import (
            CronDataIntervalTimetable,
            CronTriggerTimetable,
            DeltaDataIntervalTimetable,
            DeltaTriggerTimetable,
            MultipleCronTriggerTimetable,
        )
    except ImportError:  # Airflow 3.0 keeps them in the core package
        from airflow.timetables.interval import CronDataIntervalTimetable, DeltaDataIntervalTimetable
        from airflow.timetables.trigger import (
            CronTriggerTimetable,
            DeltaTriggerTimetable,
            MultipleCronTriggerTimetable,
        )

    if isinstance(timetable, MultipleCronTriggerTimetable):
        return max(schedule_period_start(t, at) for t in timetable.timetables)
    if isinstance(timetable, (CronTriggerTimetable, CronDataIntervalTimetable)):
        return _cron_previous(*_cron_of(timetable), at)
    if isinstance(timetable, (DeltaTriggerTimetable, DeltaDataIntervalTimetable)):
        return at - timetable.delta
    return None


def data_interval_of(context: Mapping[str, Any]) -> tuple[datetime, datetime] | None:
    start, end = context.get("data_interval_start"), context.get("data_interval_end")
    return (start, end) if start is not None and end is not None else None


def period_start_of(context: Mapping[str, Any], timetable: Any) -> str | None:
    """For a zero-width interval (Airflow 3 cron runs): where the schedule period ending at it starts."""
    interval = data_interval_of(context)
    if interval is None or interval[0] != interval[1] or timetable is None:
        return None
    return _iso(schedule_period_start(timetable, interval[1]))


def run_context_of(
    context: Mapping[str, Any],
    timetable: Any,
    conf_window: Mapping[str, Any],
    task_window: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The RunContext dict for a load: which run, which try, its type and period, the window bounds of
    dag_run.conf (which may only narrow a scheduled run's window) and the task's own window."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", None)
    return {
        "dag_id": ti.dag_id,
        "task_id": ti.task_id,
        "run_id": ti.run_id,
        "try_number": ti.try_number,
        "map_index": map_index if map_index is not None and map_index >= 0 else None,
        "run_type": run_type_of(context.get("dag_run")),
        "logical_date": _iso(context.get("logical_date")),
        "period_start": period_start_of(context, timetable),
        "conf": dict(conf_window),
        "window": dict(task_window or {}),
    }


def openlineage_spark_conf(context: Mapping[str, Any]) -> dict[str, str]:
    """Spark properties carrying OpenLineage's parent job and transport information, where Airflow's
    ``[openlineage] spark_inject_parent_job_info`` / ``spark_inject_transport_info`` ask for them, as
    SparkSubmitOperator adds them; empty otherwise (and without the OpenLineage provider)."""
    from airflow.providers.common.compat.openlineage.utils.spark import (
        inject_parent_job_information_into_spark_properties,
        inject_transport_information_into_spark_properties,
    )
    from airflow.providers.common.compat.sdk import conf

    properties: dict[str, str] = {}
    if conf.getboolean("openlineage", "spark_inject_parent_job_info", fallback=False):
        properties = inject_parent_job_information_into_spark_properties(properties, context)
    if conf.getboolean("openlineage", "spark_inject_transport_info", fallback=False):
        properties = inject_transport_information_into_spark_properties(properties, context)
    return dict(properties)
