"""DeltaBackfillOperator: a stateless backfill of [start, end) in chunks, one load per chunk.

For chunks as separate (mapped) tasks, each retried on its own, map DeltaMergeOperator over the
windows instead. Airflow runs mapped task instances in no fixed order, even one at a time, so a merge
whose windows may change the same keys needs `sequence_by=<the cursor column>` (the newest row wins
whichever window lands last); DeltaBackfillOperator loads its chunks in order::

    @task
    def windows(dag_run=None):
        return [[a.isoformat(), b.isoformat()] for a, b in backfill_windows(
            dag_run.conf["start"], dag_run.conf["end"], every="7 days")]

    DeltaMergeOperator.partial(task_id="load", ..., max_active_tis_per_dagrun=1).expand(window=windows())
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..model.backfill import backfill_windows, parse_every
from ..model.incremental import coerce_bound
from ..model.sources import names_change_feed
from .context import openlineage_spark_conf, split_conf
from .merge import DeltaMergeOperator, is_templated

if TYPE_CHECKING:
    from airflow.sdk import Context


def _instant(argument: str, value: Any) -> Any:
    """A window bound (datetime, date or ISO 8601 text) as a UTC datetime, for comparisons."""
    return coerce_bound(value, "timestamp", argument)


def _text(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def backfill_range(start: Any, end: Any, conf_window: dict[str, Any]) -> tuple[Any, Any]:
    """[start, end) of the backfill: the arguments, narrowed by dag_run.conf's start/end.

    Without arguments, dag_run.conf gives the range. With arguments, conf may only narrow it.
    """
    chosen = {"start": conf_window.get("start", start), "end": conf_window.get("end", end)}
    for key, bound in (("start", start), ("end", end)):
        if chosen[key] is None:
            raise ConfigError(key, "the backfill needs a start and an end, as arguments or in dag_run.conf")
        if bound is None or key not in conf_window:
            continue
        given, limit = _instant(f"dag_run.conf[{key!r}]", chosen[key]), _instant(key, bound)
        if (given < limit) if key == "start" else (given > limit):
            raise ConfigError(
                f"dag_run.conf[{key!r}]", f"{chosen[key]!r} widens the task's range [{start}, {end})"
            )
    return chosen["start"], chosen["end"]


class DeltaBackfillOperator(DeltaMergeOperator):
    """Backfill ``[start, end)`` in chunks of ``every``, one stateless load per chunk, in order.

    :param start: first instant of the range (datetime or ISO 8601); or ``start`` in dag_run.conf.
    :param end: end of the range, exclusive; or ``end`` in dag_run.conf.
    :param every: chunk length, e.g. "7 days", "1 day", "12 hours".
    Other arguments as :class:`DeltaMergeOperator` (not ``window``). Returns the per-chunk metrics.
    """

    template_fields: Sequence[str] = (*DeltaMergeOperator.template_fields, "start", "end", "every")

    def __init__(self, *, start: Any = None, end: Any = None, every: str = "7 days", **kwargs: Any) -> None:
        if kwargs.get("window") is not None:
            raise ConfigError("window", "DeltaBackfillOperator makes its own windows; use start, end, every")
        if kwargs.get("incremental") is None and not names_change_feed(kwargs.get("source")):
            raise ConfigError("incremental", "a backfill needs the cursor column that places rows in windows")
        super().__init__(**kwargs)
        self.start = start
        self.end = end
        self.every = every
        if not is_templated(every):
            parse_every(every)
        if not is_templated([start, end, every]) and start is not None and end is not None:
            backfill_windows(*backfill_range(start, end, {}), every=every)

    def plan(self, context: Context) -> list[tuple[Any, Any]]:
        """The chunk windows of this run (arguments, narrowed or given by dag_run.conf)."""
        with self.failing_without_retry():
            conf_window, overrides = split_conf(self._dag_run_conf(context), self.conf_overridable)
            every = overrides.get("every", self.every)
            return backfill_windows(*backfill_range(self.start, self.end, conf_window), every=every)

    def execute(self, context: Context) -> list[dict[str, Any]]:
        self._lineage_conf = openlineage_spark_conf(context)
        windows = self.plan(context)
        self.log.info("Backfilling %s in %d chunk(s)", self.table_name, len(windows))
        loads = []
        for number, (start, end) in enumerate(windows, 1):
            self.log.info("Chunk %d/%d: [%s, %s)", number, len(windows), start, end)
            loads.append(
                self.load(self.build_request(context, window={"start": _text(start), "end": _text(end)}))
            )
        self.publish(
            context,
            {
                "loads": loads,
                "window_start": _text(windows[0][0]),
                "window_end": _text(windows[-1][1]),
                "table_version": next(
                    (m["table_version"] for m in reversed(loads) if m.get("table_version") is not None), None
                ),
            },
        )
        return loads
