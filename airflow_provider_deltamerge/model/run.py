"""Which run a load belongs to, and the ids it commits under (pure).

- `RunContext`: the Airflow run (or nothing, outside Airflow) and the one rule for "the same run";
- load ids: dlt's epoch-seconds ids, strictly increasing, and what they stand for (a time, a txn version);
- `app_id`: the Delta txn application id of a stream of commits.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from ..errors import ConfigError

# What makes two attempts the same run of a task: a retry shares all of these (window: a backfill
# chunk's, so that chunks of one run are different loads).
RUN_IDENTITY = ("dag_id", "task_id", "run_id", "map_index", "conf", "window")


@dataclass(frozen=True)
class RunContext:
    """Where a load was started from: the Airflow run, or nothing outside Airflow."""

    dag_id: str | None = None
    task_id: str | None = None
    run_id: str | None = None
    try_number: int | None = None
    map_index: int | None = None
    run_type: str | None = None
    logical_date: str | None = None
    # Start of the schedule period that ends at this run, from the DAG's timetable (Airflow 3 gives
    # cron-scheduled runs a zero-width data interval; the operator fills this in for them).
    period_start: str | None = None
    conf: dict[str, Any] = field(default_factory=dict)  # dag_run.conf's window bounds: narrow the run's
    # The window the task itself was given (its `window` argument, or a backfill chunk): loaded as given.
    window: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_value(cls, value: RunContext | dict[str, Any] | None) -> RunContext:
        if value is None:
            return cls()
        if isinstance(value, RunContext):
            return value
        if not isinstance(value, dict):
            raise ConfigError("run_context", f"{value!r} must be a dict of the Airflow run's ids")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError("run_context", f"unknown key(s) {unknown}; valid: {', '.join(sorted(known))}")
        for name, item in value.items():
            _check_field(name, item)
        return cls(**value)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def in_airflow(self) -> bool:
        return self.run_id is not None

    def is_same_run(self, other: dict[str, Any]) -> bool:
        """Whether `other` is an attempt of this run: a run context dict (commit metadata keeps all
        of RUN_IDENTITY) or a `_dlt_loads` row (dag, task and run ids); what it lacks is not compared."""
        ours = self.to_dict()
        shared = [key for key in RUN_IDENTITY if key in other]
        return self.in_airflow and "run_id" in shared and all(other[key] == ours[key] for key in shared)


_INTEGER_FIELDS = ("try_number", "map_index")
_MAPPING_FIELDS = ("conf", "window")


def _check_field(name: str, value: Any) -> None:
    """Each field has the type the load record stores it as: checked before anything is committed,
    because a record that cannot be written after the commit would block every later load."""
    if name in _MAPPING_FIELDS:
        valid, kind = isinstance(value, dict), "a dict"
    elif name in _INTEGER_FIELDS:
        valid, kind = (
            value is None or (isinstance(value, int) and not isinstance(value, bool)),
            "a whole number",
        )
    else:
        valid, kind = value is None or isinstance(value, str), "a string"
    if not valid:
        raise ConfigError(
            f"run_context.{name}", f"{value!r} is a {type(value).__name__}; it must be {kind} (or None)"
        )


def app_id(pipeline_name: str, table_name: str, run: RunContext, load_id: str | None = None) -> str:
    """The Delta txn application id of a load's stream of commits; `load_id` is the load's.

    Delta treats txn versions (the load id as a number, `txn_version`) as a high-water mark per
    application, and fails a commit when another commit of the same application landed concurrently, so
    an id names a stream whose loads run one after another. In Airflow that is one task run, whose
    retries reuse the id. Outside Airflow nothing tells which loads run one after another, and loads of
    one table may run at the same time, so each load is a stream of its own, named by its load id: a
    resubmission of the same load id shares it and is seen as applied, while different loads never
    collide on it. Without a load id this is the pipeline's table, the prefix every stream shares.
    """
    stream = f"deltamerge:{pipeline_name}:{table_name}"
    if run.dag_id is not None:
        return f"{stream}:{run.dag_id}:{run.task_id}:{run.map_index}:{run.run_id}"
    return stream if load_id is None else f"{stream}:load:{load_id}"


_clock_lock = threading.Lock()
_last_micros = 0  # the newest load id made in this process, in microseconds


def new_load_id(after: str | None = None) -> str:
    """dlt's load id: epoch seconds with microseconds, strictly increasing here and after `after`.
    Counted in whole microseconds: a float one microsecond above the last can print as the same id."""
    global _last_micros
    with _clock_lock:
        floor = max(_last_micros, txn_version(after) if after else 0) + 1
        _last_micros = max(time.time_ns() // 1000, floor)
        seconds, micros = divmod(_last_micros, 1_000_000)
        return f"{seconds}.{micros:06d}"


def txn_version(load_id: str) -> int:
    """The load id as an integer that grows with it: the Delta txn version of the load's commit."""
    return round(float(load_id) * 1_000_000)


def load_time(load_id: str) -> datetime:
    """The time a load id stands for (epoch seconds with microseconds), exactly, as UTC."""
    seconds, _, fraction = load_id.partition(".")
    try:
        micros = int((fraction + "000000")[:6]) if fraction else 0
        return datetime.fromtimestamp(int(seconds), timezone.utc) + timedelta(microseconds=micros)
    except ValueError:
        raise ConfigError(
            "load_id", f"{load_id!r} is not epoch seconds; scd2 needs it as the load time"
        ) from None
