"""Expectations on the batch in Spark (model/expectations.py): each row flagged with the expectations it
fails, the rows a `drop`, `quarantine` or `fail` expectation sets aside left out, and the counts observed
on staging's own pass over the batch (spark/profile.py), so checking adds no pass over the source.

The counts are read after staging's pass (`Checks.counts`); where that pass did not see every row
(a batch Spark optimised to nothing, or one every row of which was set aside), or Spark Connect with
PySpark 3.5 observes nothing, they are one job over the flagged batch instead. Where staging's pass
collects every row to the driver as it is (load/staged_arrow.py), the rows go there with their flags and
the driver counts them and sets them aside (spark/arrow_expectations.py): nothing observed, nothing
filtered in Spark. Otherwise the rows to quarantine are those staging's pass set aside, even from a
source that would answer a second read differently: of a small batch, carried out of that pass
(spark/observed_rows.py); of a larger one, or on Spark Connect, read from Spark's cache, where the
flagged batch is held for the load (spark/held.py) and filled by that pass. Where the counts are a job of
their own, so are the rows to quarantine (none where the counts found none)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..model.expectations import ACTIONS, Expectation, quarantines
from ..model.naming import backticked, spark_string
from ..model.row_condition import check_row_condition
from . import arrow_expectations, held, observed_rows, profile
from .cdc import check_condition
from .frames import INPUT_ORDER

FAILED = "__dq_failed"  # the names of the expectations a row fails (array of text), on the rows set aside
_FLAG = "__dq_holds_{}"  # expectation {index}'s condition for the row: true, false or null (fails)
_DROPPED = "dq:dropped"
_QUARANTINED = "dq:quarantined"
_FAILING = "dq:failing"  # rows failing a `fail` expectation
_ROW = "__dq_row"  # a set-aside row as one struct


@dataclass(frozen=True)
class Counts:
    rows: int  # every row checked
    failed: dict[str, int]  # expectation name -> rows failing it
    dropped: int
    quarantined: int
    failing: int  # rows failing a `fail` expectation: the load then fails
    in_pass: bool = False  # counted by staging's pass (not a job of their own)


@dataclass
class OnDriver:
    """Expectations decided on the driver from the rows staging collects: the batch's own columns, which
    the rows set aside keep, and the split of the collected rows once staging has collected them."""

    own: list[str]
    split: arrow_expectations.Split | None = None


@dataclass(frozen=True)
class Checks:
    """The batch's expectations in Spark: `flagged`, every row with a flag per expectation; `kept`, the
    rows that go on to staging (observed); `counts(rows_staged)` once staging's pass has run."""

    expectations: tuple[Expectation, ...]
    flagged: DataFrame
    kept: DataFrame
    observed: Callable[[], profile.Profile] | None
    carried: observed_rows.Carried | None = None  # the rows to quarantine, out of staging's pass
    on_driver: OnDriver | None = None  # decided on the driver, from the rows staging collects

    def collecting(self, collect: Callable[[DataFrame], pa.Table]) -> Callable[[DataFrame], pa.Table]:
        """Staging's collection, decided on the driver: the collected rows (with their flags) split into
        those kept, returned, and those set aside, counted (`counts`). A collection without the flags
        (staging collected the kept batch) is returned as it is, and counted by a job of its own."""

        def split_collection(staged: DataFrame) -> pa.Table:
            collected = collect(staged)
            flags = _flags(self.expectations)
            if self.on_driver is None or not set(flags) <= set(collected.column_names):
                return collected
            own = self.on_driver.own
            self.on_driver.split = arrow_expectations.split(collected, self.expectations, flags, own, FAILED)
            return self.on_driver.split.kept

        return split_collection

    def counts(self, rows_reaching_staging: int) -> Counts:
        """The counts; those the driver made of the collected rows, or those staging's pass observed where
        it saw every kept row (`rows_reaching_staging` of them), else one job over the flagged batch."""
        split = self._split()
        if split is not None:
            aside = split.set_aside
            return Counts(split.rows, split.failed, aside["drop"], aside["quarantine"], aside["fail"], True)
        found = self._observed(rows_reaching_staging)
        in_pass = found is not None
        if found is None:
            found = profile.aggregated(self.flagged, _aggregates(self.expectations))
        failed = {e.name: int(found.get(f"dq:{i}")) for i, e in enumerate(self.expectations)}
        return Counts(
            found.rows,
            failed,
            int(found.get(_DROPPED)),
            int(found.get(_QUARANTINED)),
            int(found.get(_FAILING)),
            in_pass,
        )

    def _split(self) -> arrow_expectations.Split | None:
        """The driver's split of the collected rows, once staging collected them; else None."""
        return self.on_driver.split if self.on_driver is not None else None

    def _observed(self, rows_reaching_staging: int) -> profile.Profile | None:
        """The counts staging's pass observed, where it ran (it may not have where no row reached it) and
        saw every kept row; else None."""
        ran = rows_reaching_staging > 0 or (self.carried is not None and self.carried.ran())
        found = self.observed() if self.observed is not None and ran else None
        if found is None:
            return None
        set_aside = found.get(_DROPPED) + found.get(_QUARANTINED) + found.get(_FAILING)
        return found if found.rows - set_aside == rows_reaching_staging else None  # else it saw part

    def rows_failing(self, action: str, limit: int) -> list[dict]:
        """Up to `limit` rows whose strictest failed action is `action`, with FAILED (those collected, or
        a job of its own)."""
        split = self._split()
        if split is not None and action == "fail":
            return split.failing.slice(0, limit).to_pylist()
        rows = self.flagged.filter(_strictest(self.expectations, action)).limit(limit)
        named = rows.select(F.expr(_set_aside_row(rows, self.expectations)).alias(_ROW))
        return [r[_ROW].asDict(recursive=True) for r in named.collect()]

    def quarantined(self, counts: Counts | None = None) -> DataFrame | pa.Table:
        """The rows to quarantine, with FAILED: those failing a `quarantine` expectation and no `fail` one;
        those the driver set aside (Arrow), or those staging's pass carried where `counts` are that pass's,
        else a job of their own when read (none, reading nothing, where `counts` found none)."""
        split = self._split()
        if split is not None:
            return split.quarantined
        carried = None
        if self.carried is not None and counts is not None and counts.in_pass and counts.quarantined:
            carried = self.carried.rows(counts.quarantined)
        if carried is not None:
            return carried
        rows = self.flagged.filter(_strictest(self.expectations, "quarantine"))
        row = F.expr(_set_aside_row(self.flagged, self.expectations)).alias(_ROW)
        named = rows.select(row).select(f"{_ROW}.*")
        return named.limit(0) if counts is not None and not counts.quarantined else named


def _set_aside_row(flagged: DataFrame, expectations: tuple[Expectation, ...]) -> str:
    """A set-aside row as a struct, in SQL: its own columns, then FAILED, instead of the flags. One
    expression, parsed by Spark in one call (a column at a time costs a call into the JVM each)."""
    names = (f"CASE WHEN {_flag(i)} THEN {spark_string(e.name)} END" for i, e in enumerate(expectations))
    fields = [f"{spark_string(c)}, {backticked(c)}" for c in _own_columns(flagged, expectations)]
    fields.append(f"{spark_string(FAILED)}, array_compact(array({', '.join(names)}))")
    return f"named_struct({', '.join(fields)})"


def check(
    df: DataFrame,
    expectations: tuple[Expectation, ...],
    argument: str = "expectations",
    counted_in_pass: bool = True,
    on_driver: bool = False,
) -> Checks:
    """The batch flagged and filtered, lazily; a condition that is not over its columns or not true/false
    refused (ConfigError naming the expectation under `argument`) before any job runs. Where the caller
    counts with a job of its own (not `counted_in_pass`), the rows to quarantine are read from the cache.
    `on_driver`: staging collects every row as it is, and the driver decides (`Checks.collecting`); the
    flagged batch is then what staging collects, and the kept one what it stages otherwise."""
    flagged = _flagged(df, expectations, argument)
    if on_driver:
        kept = flagged.filter(f"NOT ({_fails_any(expectations, _set_aside(expectations))})")
        own = OnDriver(_own_columns(flagged, expectations))
        return Checks(expectations, flagged, kept.drop(*_flags(expectations)), None, on_driver=own)
    carry = quarantines(expectations) and counted_in_pass and observed_rows.carries(flagged)
    if quarantines(expectations) and not carry:  # quarantined from the rows staging read
        flagged = held.hold(flagged)
    observed = carried = None
    source = flagged
    if carry:
        counts, picked = _aggregates(expectations)[1:], _strictest(expectations, "quarantine")
        row = _set_aside_row(flagged, expectations)
        source, carried = observed_rows.carried(flagged, counts, picked, row)
        observed = carried.profile
    elif profile.observes_in_pass(flagged):
        source, observed = profile.with_observed(flagged, _aggregates(expectations)[1:])
    aside = _set_aside(expectations)
    kept = source.filter(f"NOT ({_fails_any(expectations, aside)})") if aside else source
    return Checks(expectations, flagged, kept.drop(*_flags(expectations)), observed, carried)


def _flagged(df: DataFrame, expectations: tuple[Expectation, ...], argument: str) -> DataFrame:
    """`df` with each condition's value for the row as a flag; each condition over the batch's own
    columns and true/false, or refused: all of them analysed by Spark at once as the flags are added (one
    parsed expression a flag: few calls into the JVM), and where that finds a fault, one by one to name
    the expectation (spark/cdc.py's check_condition)."""
    data = [c for c in df.columns if c != INPUT_ORDER]
    for expectation in expectations:  # pure: no subquery, no function that runs code (model/row_condition.py)
        check_row_condition(_argument(argument, expectation), expectation.condition, data)
    conditions = {_FLAG.format(i): F.expr(f"({e.condition})") for i, e in enumerate(expectations)}
    try:
        flagged = df.withColumns(conditions)
        schema = flagged.schema
        if all(isinstance(schema[f].dataType, T.BooleanType) for f in conditions):
            return flagged
    except Exception:  # Spark's parse and analysis errors: named below
        pass
    for expectation in expectations:
        check_condition(df, _argument(argument, expectation), expectation.condition, "batch's rows")
    return df.withColumns(conditions)  # each analysed alone: what Spark says of them together


def _argument(argument: str, expectation: Expectation) -> str:
    return f"{argument}.{expectation.action}.{expectation.name}"


def _aggregates(expectations: tuple[Expectation, ...]) -> list[Column]:
    """rows, then per expectation (`dq:<index>`) the rows failing it, then the rows dropped,
    quarantined and failing (each row counted once, under its strictest action); each one parsed
    expression, as SQL text (few calls into the JVM)."""
    counted = [_flag(i) for i in range(len(expectations))]
    counted += [_strictest(expectations, action) for action in ("drop", "quarantine", "fail")]
    names = [f"dq:{i}" for i in range(len(expectations))] + [_DROPPED, _QUARANTINED, _FAILING]
    counts = [F.expr("count(1) AS rows")]
    return counts + [
        F.expr(f"sum(CASE WHEN {c} THEN 1 ELSE 0 END) AS `{n}`") for c, n in zip(counted, names, strict=True)
    ]


def _own_columns(flagged: DataFrame, expectations: tuple[Expectation, ...]) -> list[str]:
    """The batch's own columns, which a row set aside keeps: not the flags, not the input order."""
    return [c for c in flagged.columns if c not in (*_flags(expectations), INPUT_ORDER)]


def _set_aside(expectations: tuple[Expectation, ...]) -> list[Expectation]:
    return [e for e in expectations if e.action != "warn"]


def _flags(expectations) -> list[str]:
    return [_FLAG.format(i) for i in range(len(expectations))]


def _flag(index: int) -> str:
    """Whether the row fails expectation `index`, as SQL: its condition is not true."""
    return f"(NOT coalesce(`{_FLAG.format(index)}`, false))"


def _fails_any(expectations: tuple[Expectation, ...], some: list[Expectation]) -> str:
    """Whether the row fails any of `some` (of `expectations`), as SQL."""
    return " OR ".join(_flag(i) for i, e in enumerate(expectations) if e in some) or "false"


def _strictest(expectations: tuple[Expectation, ...], action: str) -> str:
    """Whether a row fails an expectation of `action` and none stricter, as SQL."""
    of = [e for e in expectations if e.action == action]
    stricter = [e for e in expectations if ACTIONS.index(e.action) > ACTIONS.index(action)]
    return f"({_fails_any(expectations, of)}) AND NOT ({_fails_any(expectations, stricter)})"
