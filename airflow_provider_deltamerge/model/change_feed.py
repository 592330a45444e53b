"""A Delta change data feed as a source (pure): the cursor, the version range one load reads, and what
is refused.

An upstream Delta table with ``delta.enableChangeDataFeed=true`` records each commit's changes. A load
of ``{"delta_changes": "<upstream>"}`` reads the changes between two of its versions, one row per
change: the upstream's columns and ``_change_type`` (insert, update_postimage, delete; update
preimages are left out), ``_commit_version``, ``_commit_timestamp``.

The cursor is the upstream's commit version (``_commit_version``), stored in ``_dlt_pipeline_state``
like any cursor. The range a load reads, always as versions ``[start, end)``:

- from the stored cursor (outside Airflow, a manual run without conf, ``allow_external_schedulers=False``):
  from the last loaded version + 1 (or after ``initial_value``) to the upstream's current version;
- ``end_value``: the versions after ``initial_value`` and before ``end_value``;
- a window of the run (an Airflow data interval, a schedule period, a task's window, conf bounds): the
  versions committed within ``[window start, window end)`` by commit timestamp, so consecutive windows
  read each commit once and a re-run of a window reads the same versions again.

An empty range loads nothing and keeps the cursor. ``start_after_version`` beside the upstream in the
source spec starts every range after that version, whatever the stored cursor or the window says: the
way past versions whose changes cannot be read (the feed off, the log or the files cleaned up), which
each refusal names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import ConfigError
from .incremental import Incremental, as_incremental, to_utc
from .sources import CHANGE_FEED, START_AFTER
from .window import END_VALUE_RANGE, MANUAL_FROM_CURSOR, STATEFUL_INCREMENTAL, Window, resolve_window

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
FEED_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
DELETE = "delete"
PREIMAGE = "update_preimage"  # the row before an update: left out, the postimage carries the update
CDF_PROPERTY = "delta.enableChangeDataFeed"
ARGUMENT = "source.delta_changes"
_VERSION_RULES = (
    STATEFUL_INCREMENTAL,
    MANUAL_FROM_CURSOR,
    END_VALUE_RANGE,
)  # rules whose bounds are versions


def feed_incremental(value: Any) -> dict[str, Any]:
    """The incremental of a change feed load, as its dict form: ``Incremental("_commit_version",
    range_start="open")`` when none is given; a given one must be that cursor, open at its start (the
    stored value is the last version loaded) and ascending."""
    given = as_incremental(value)
    if given is None:
        return Incremental(COMMIT_VERSION, range_start="open").to_dict()
    if given.cursor_path != COMMIT_VERSION:
        raise ConfigError(
            "incremental",
            f"a change feed's cursor is the upstream's commit version; cursor_path must be "
            f"{COMMIT_VERSION!r}, not {given.cursor_path!r} (or leave incremental out)",
        )
    if given.range_start != "open" or given.last_value_func != "max":
        raise ConfigError(
            "incremental",
            "a change feed reads the versions after the last one loaded: give range_start='open' and "
            "last_value_func='max' (initial_value is then the last version not to load), or leave "
            "incremental out to read from version 0",
        )
    for bound in ("initial_value", "end_value"):
        version = getattr(given, bound)
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise ConfigError(bound, f"{version!r} must be an upstream version number (a whole number)")
    return given.to_dict()


def check_feed_load(strategy: str | None, sequence_by: Any) -> None:
    """An upsert of a change feed orders its events: refused without `sequence_by`, where several
    changes of one key in a batch would be duplicate keys and arrival order would decide."""
    if strategy == "upsert" and not sequence_by:
        raise ConfigError(
            "sequence_by",
            f"an upsert from a change feed needs sequence_by to order each key's changes; pass "
            f"sequence_by={COMMIT_VERSION!r} (the upstream's commit version orders them)",
        )


@dataclass(frozen=True)
class Commit:
    """One version of the upstream table as its log keeps it."""

    version: int
    timestamp: datetime  # aware, UTC


def version_window(
    incremental: Incremental,
    *,
    data_interval: Any,
    run_context: Any,
    stored_state: dict | None,
    now: datetime,
    commits: list[Commit],
    current_version: int,
    after: int | None = None,
) -> Window:
    """The versions ``[start, end)`` this load reads (see the module docstring), as a window of the
    ``int`` cursor ``_commit_version`` with the rule that chose it. `commits`: the upstream's commits
    its log still holds, oldest first; `current_version`: its newest version; `after`: the source's
    ``start_after_version``, below which no window starts, whatever the stored cursor says."""
    arguments = {"data_interval": data_interval, "run_context": run_context, "stored_state": stored_state}
    by_version = resolve_window(incremental, cursor_type="int", now=now, **arguments)
    top = current_version + 1
    if by_version.rule in _VERSION_RULES:
        start = _first_after(incremental.initial_value, by_version.start, by_version.start_closed)
        end = top if by_version.end is None or by_version.rule == MANUAL_FROM_CURSOR else by_version.end
        end = min(end + (1 if by_version.end_closed and end < top else 0), top)
        return _versions(start, end, by_version, after)
    timeless = dataclasses.replace(incremental, initial_value=None)
    by_time = resolve_window(timeless, cursor_type="timestamp", now=now, **arguments)
    start = _first_at(commits, by_time.start, top, 0)
    if _log_lost_some(commits, by_time.start):
        start = 0  # versions the log no longer holds may belong to the window: range_problem says so
    end = _first_at(commits, by_time.end, top, top)
    if incremental.initial_value is not None:
        start = max(start, incremental.initial_value + 1)
    return _versions(start, end, by_time, after)


def _log_lost_some(commits: list[Commit], start: datetime | None) -> bool:
    """Whether versions older than the log's oldest (removed by log cleanup) may be committed at or
    after `start`: the oldest version the log holds is not 0 and was committed at or after it."""
    if not commits or commits[0].version == 0:
        return False
    return start is None or commits[0].timestamp >= to_utc(start)


def _first_after(initial: Any, start: Any, closed: bool) -> int:
    if start is None:
        return 0 if initial is None else initial + 1
    return start if closed else start + 1


def _first_at(commits: list[Commit], instant: datetime | None, top: int, unbounded: int) -> int:
    """The first version committed at or after `instant` (`top` when none is yet)."""
    if instant is None:
        return unbounded
    instant = to_utc(instant)
    return next((c.version for c in commits if c.timestamp >= instant), top)


def _versions(start: int, end: int, window: Window, after: int | None) -> Window:
    """Versions ``[start, end)``, none at or before `after`."""
    start = start if after is None else max(start, after + 1)
    end = max(end, start)
    return Window(
        start=start,
        end=end,
        start_closed=True,
        end_closed=False,
        stateful=window.stateful,
        boundary_dedup=False,
        rule=window.rule,
        cursor_type="int",
    )


def range_problem(
    start: int, end: int, oldest: int | None, disabled: list[int], uri: str, current: int
) -> str | None:
    """Why versions ``[start, end)`` of the upstream at `uri` cannot be read, or None: `oldest` is the
    oldest version the log still holds, `disabled` the versions of the range the change data feed was
    off at, `current` the upstream's newest version. Each says the way on (`way_past`)."""
    if start >= end:
        return None
    if oldest is not None and start < oldest:
        return (
            f"versions {start} to {oldest - 1} are no longer in its log (log cleanup removed them after "
            "delta.logRetentionDuration), so their changes cannot be read. " + reload_advice(uri, current)
        )
    if disabled:
        first, last = disabled[0], disabled[-1]
        return (
            f"its change data feed was off at version(s) {first}"
            + (f" to {last}" if last != first else "")
            + f", so their changes were not recorded. Turn it on ({CDF_PROPERTY}=true, e.g. "
            f"table_properties={{{CDF_PROPERTY!r}: True}} on the loads that write it) and read the "
            f"versions after it, with the source {way_past(uri, last)}"
        )
    return None


def reload_advice(uri: str, current: int | None) -> str:
    """What to do where versions' changes are lost: reload, then read only the versions after."""
    at = "" if current is None else f" (version {current})"
    return (
        f"Reload the target from the upstream's current rows{at}, then go on after that version with "
        f"the source {way_past(uri, current)}"
    )


def way_past(uri: str, version: int | None) -> str:
    """The source spec that reads only the versions after `version` (None: the one to name),
    whatever the stored cursor says."""
    if version is None:
        return f"{{{CHANGE_FEED!r}: {uri!r}, {START_AFTER!r}: <that version>}}"
    return repr({CHANGE_FEED: uri, START_AFTER: version})
