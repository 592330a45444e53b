"""What a run loaded before this attempt, and which rows an append of it replaces (pure).

The evidence is durable: the `_dlt_loads` rows of the table (after recovery has recorded every commit
that landed unrecorded, whoever recovered it) and the table's commits, never what this attempt happened
to see. One run of a task is its dag, task, run id and map index (`model.run.RunContext.is_same_run`; a
`_dlt_loads` row keeps the map index in its metrics).

- A retry after an attempt that committed and stopped before recording its load (Airflow saw it fail;
  its record was written from the commit by whichever load came next, marked RECORDED_FROM_COMMIT)
  finishes that load: it returns it instead of loading again (`load_to_finish`), and marks it finished.
- A re-run after an attempt that succeeded (the task cleared and run again, maybe after its source was
  fixed) makes the run's rows those of its latest attempt: an append deletes the rows of the run's
  earlier loads of the same window and inserts its batch in ONE commit (`replace_predicate`); replace
  overwrites anyway; merge strategies merge the batch again on its keys. A stateful incremental load
  (its window starts at the stored cursor, which the earlier load moved) returns the run's earlier load.
- Mapped instances of one run (other map indexes) that load the same window keep each other's rows:
  the window overwrite leaves the rows of their loads alone (`sibling_load_ids`); a `replace` by one
  of them of a table a sibling loaded is refused (`refuse_replacing_siblings`).
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..model.naming import LOAD_ID
from ..model.options import WriteDisposition
from ..model.run import RunContext
from .expressions import Col, Expr, In, Lit, Not, Or, all_of

MAP_INDEX = "map_index"  # the metrics key that keeps a mapped instance's index in `_dlt_loads`
# The metrics key of a load recorded from its commit by another load (its own attempt stopped first),
# until a retry of its run finishes it.
RECORDED_FROM_COMMIT = "recorded_from_commit"
# The metrics key of a load an attempt finished instead of loading again: that attempt's, from then on. A
# task that loads several batches loads them all again in its retry; the batch whose load it finished must
# not be taken for an earlier attempt's by the batches after it (an append of those would replace it).
FINISHED_BY_TRY = "finished_by_try"


def run_of_record(row: dict[str, Any]) -> dict[str, Any]:
    """The run identity a `_dlt_loads` row keeps: dag, task and run ids, and the map index (metrics)."""
    return {
        "dag_id": row.get("dag_id"),
        "task_id": row.get("task_id"),
        "run_id": row.get("run_id"),
        MAP_INDEX: (row.get("metrics") or {}).get(MAP_INDEX),
    }


def map_index_metrics(run: RunContext) -> dict[str, int]:
    """The metrics entry that records a mapped instance's index (none for an unmapped task)."""
    return {MAP_INDEX: run.map_index} if run.map_index is not None else {}


def earlier_loads_of_run(run: RunContext, recorded: list[dict]) -> list[dict]:
    """The recorded loads of the table (`recorded`, `_dlt_loads` rows, oldest first) that earlier attempts
    of this run made (a lower try number). Loads of this attempt are its own: a task may load several
    batches into one table; without a try number attempts are not told apart, and none is earlier."""
    if run.try_number is None:
        return []
    return [
        row
        for row in recorded
        if run.is_same_run(run_of_record(row))
        and row.get("try_number") is not None
        and attempt_of(row) < run.try_number
    ]


def attempt_of(row: dict[str, Any]) -> int:
    """The attempt a recorded load belongs to: the try that made it, or a later one that finished it."""
    return max(row["try_number"], (row.get("metrics") or {}).get(FINISHED_BY_TRY) or 0)


def first_of_latest_attempt(rows: list[dict]) -> dict | None:
    """Of a run's earlier loads (oldest first), the first that the latest of their attempts made. A task
    may load several batches into one table, which its retry loads again in the same order: the retry's
    first call stands for that attempt's first batch, not its last."""
    if not rows:
        return None
    latest = max(attempt_of(row) for row in rows)
    return next(row for row in rows if attempt_of(row) == latest)


def load_to_finish(disposition: WriteDisposition, earlier: list[dict], window) -> dict | None:
    """The run's earlier load this attempt returns instead of loading (its `_dlt_loads` row), or None.

    That is the first load of this window (`model.window.Window` or None) the run's latest earlier
    attempt made (`first_of_latest_attempt`) where that attempt stopped before recording it, and the
    newest of any window where the window is stateful: a
    stateful incremental window starts at the cursor the earlier load moved, so loading again would not
    load the same rows."""
    stateful = window is not None and window.stateful and disposition.disposition != "replace"
    if stateful:
        return earlier[-1] if earlier else None
    interrupted = first_of_latest_attempt(_of_window(earlier, window))
    if interrupted is None or not (interrupted.get("metrics") or {}).get(RECORDED_FROM_COMMIT):
        return None
    return interrupted


def superseded_load_ids(disposition: WriteDisposition, earlier: list[dict], window) -> tuple[str, ...]:
    """The loads whose rows an append of this run replaces: the run's earlier loads of the same window."""
    if disposition.disposition != "append":
        return ()
    return tuple(r["load_id"] for r in _of_window(earlier, window))


def _of_window(recorded: list[dict], window) -> list[dict]:
    """The `_dlt_loads` rows of loads of this window (`model.window.Window` or None), as they keep it."""
    bounds = window.as_dict() if window is not None else {}
    start, end = _text(bounds.get("start")), _text(bounds.get("end"))
    return [r for r in recorded if (r["window_start"], r["window_end"]) == (start, end)]


def sibling_load_ids(run: RunContext, recorded: list[dict], commits) -> tuple[str, ...]:
    """Loads of the table by other mapped instances of this run: `_dlt_loads` rows and the table's
    commits (`LoggedCommit`s: those of siblings that have not recorded themselves yet)."""
    return tuple(sorted(sibling_loads(run, recorded, commits)))


def sibling_loads(run: RunContext, recorded: list[dict], commits) -> dict[str, int]:
    """As `sibling_load_ids`: each sibling load's id and map index."""
    if not run.in_airflow or run.map_index is None:
        return {}
    runs = [(r["load_id"], run_of_record(r)) for r in recorded]
    runs += [(c.load_id, c.metadata.get("run") or {}) for c in commits if c.load_id]
    return {load_id: other[MAP_INDEX] for load_id, other in runs if _sibling(run, other)}


def refuse_replacing_siblings(run: RunContext, disposition: WriteDisposition, table: str, siblings) -> None:
    """A `replace` by one mapped instance would delete what its siblings (`sibling_loads`) loaded into
    the table: refused, before anything is read, naming the sibling and what works instead."""
    if disposition.disposition != "replace" or not siblings:
        return
    load_id, map_index = max(siblings.items(), key=lambda item: float(item[0]))
    raise ConfigError(
        "write_disposition",
        f"'replace' by map index {run.map_index} of run {run.run_id!r} would delete the rows that map "
        f"index {map_index} of the same run loaded into table {table!r} (load {load_id}); nothing was "
        "loaded. Mapped instances that share a table load with 'append' (a window overwrite keeps each "
        "other's rows) or merge on a primary key; or give each its own table.",
    )


def _sibling(run: RunContext, other: dict[str, Any]) -> bool:
    same_task_run = all(other.get(k) == getattr(run, k) for k in ("dag_id", "task_id", "run_id"))
    return same_task_run and other.get(MAP_INDEX) is not None and other.get(MAP_INDEX) != run.map_index


def replace_predicate(
    window_rows: Expr | None, load_id: str, superseded: tuple[str, ...], siblings: tuple[str, ...] = ()
) -> Expr | None:
    """The rows an append replaces: the window's rows (`window_rows`) but those of sibling loads, and
    the rows of the loads this one supersedes. The load's own id is listed, so that its rows match the
    predicate (Delta checks that an overwrite's new rows do)."""
    parts = []
    if window_rows is not None:
        parts.append(all_of(window_rows, Not(_load_id_in(siblings))) if siblings else window_rows)
    if superseded:
        parts.append(_load_id_in((*superseded, load_id)))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Or(tuple(parts))


def _load_id_in(load_ids: tuple[str, ...]) -> Expr:
    return In(Col(LOAD_ID), tuple(Lit(i) for i in load_ids))


def _text(value) -> str | None:
    return None if value is None else str(value)
