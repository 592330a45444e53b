"""From Airflow's task context to what the load needs: the run context, the interval, dag_run.conf.

The rules for ``dag_run.conf`` live here, in one place: it may give window bounds (``start``/``end``:
a manual run loads that range, a scheduled or backfill run only the part of its own window they
name, see ``model.window``) and set the options a task lists in ``conf_overridable``; it can never
name code to run or another target, so whoever may trigger a DAG cannot make it run arbitrary
callables or write elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..errors import ConfigError
from ..model.window import SCHEDULED_RUN_TYPES
from .schedule import needs_period, schedule_period_start

log = logging.getLogger(__name__)

WINDOW_KEYS = ("start", "end")
# Options a DAG author may let dag_run.conf set (per task, with `conf_overridable`).
OVERRIDABLE = (
    "write_disposition",
    "primary_key",
    "merge_key",
    "columns",
    "schema_contract",  # only ever tightened by dag_run.conf (see DeltaMergeOperator.load_arguments)
    "expectations",  # likewise
    "window_overwrite",
    "backend",
    "every",
)
# Never settable from dag_run.conf: what to read (code, queries, paths), where to write, how to run.
PROTECTED = (
    "source",
    "dataset",
    "table_name",
    "catalog",
    "create_schema",
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


def data_interval_of(context: Mapping[str, Any]) -> tuple[datetime, datetime] | None:
    start, end = context.get("data_interval_start"), context.get("data_interval_end")
    return (start, end) if start is not None and end is not None else None


def period_start_of(context: Mapping[str, Any], timetable: Any) -> str | None:
    """For a scheduled or backfill run whose data interval is not the period since the previous
    scheduled run: where that period starts (operators.schedule). None where the interval is that
    period, or the timetable cannot tell: a window that needs it is then refused (model.window), and
    the reason is logged here."""
    interval = data_interval_of(context)
    if interval is None or timetable is None:
        return None
    if run_type_of(context.get("dag_run")) not in (*SCHEDULED_RUN_TYPES, None):
        return None
    try:
        if not needs_period(timetable, interval):
            return None
        start = schedule_period_start(timetable, interval[1])
    except ConfigError as unknown:
        log.warning("The schedule period ending at %s is unknown: %s", interval[1], unknown)
        return None
    return None if start == interval[0] else _iso(start)


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
