"""Retries and re-runs against a reference model: hypothesis generates short histories of Airflow
attempts into one table (runs interleaved, each attempt a small batch that lands, dies after its commit
and before its record, or dies before its commit; every attempt of a run is the try after the last) and
the real table and `_dlt_loads` must hold what the model in this file says (docs/INCREMENTAL.md,
"Retries and re-runs"):

- an attempt after one of its run that committed and stopped before recording returns that load and
  loads nothing (whatever it would have hit later does not happen);
- otherwise it loads: `append` replaces the rows of its run's earlier loads (with a window overwrite, every
  row of its window) and inserts its batch in one commit, `replace` holds the batch, a merge merges it;
- every commit that landed is recorded in `_dlt_loads` exactly once, by the next load of the table at the
  latest.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_deltamerge import Incremental, run_load
from airflow_provider_deltamerge.delta import store
from tests.budget import examples
from tests.faults import FAIL_AT, InjectedFault
from tests.helpers import read_rows

pytestmark = pytest.mark.spark

UTC = timezone.utc
TABLE = "events"
WEEKS = (datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 8, tzinfo=UTC))  # the windows runs load
INTERVAL = Incremental("ts", initial_value="2023-12-01T00:00:00Z")


def merge(strategy: str) -> dict:
    return {"write_disposition": {"disposition": "merge", "strategy": strategy}, "primary_key": "id"}


# name: run_load arguments, and whether a run loads a window (scheduled, its data interval)
DISPOSITIONS = {
    "append": ({}, False),
    "append-window": ({"incremental": INTERVAL}, True),
    "append-window-kept": ({"incremental": INTERVAL, "window_overwrite": False}, True),
    "replace": ({"write_disposition": "replace"}, False),
    "upsert": (merge("upsert"), False),
    "delete-insert": (merge("delete-insert"), False),
}
LANDS, DIES_AFTER_COMMIT, DIES_BEFORE_COMMIT = "lands", "dies after commit", "dies before commit"


@dataclass(frozen=True)
class Step:
    run: int  # run r<run>; its window is WEEKS[run % 2]
    outcome: str
    fault: str | None  # the checkpoint (tests/faults.py) the attempt dies at
    ids: tuple[int, ...]


steps = st.builds(
    Step,
    run=st.integers(0, 2),
    outcome=st.sampled_from((LANDS, DIES_AFTER_COMMIT, DIES_BEFORE_COMMIT)),
    fault=st.none(),
    ids=st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True).map(tuple),
).flatmap(
    lambda s: st.builds(
        Step,
        run=st.just(s.run),
        outcome=st.just(s.outcome),
        fault={
            LANDS: st.none(),
            DIES_AFTER_COMMIT: st.sampled_from(("after_commit", "after_state_row")),
            DIES_BEFORE_COMMIT: st.sampled_from(("extract", "commit")),
        }[s.outcome],
        ids=st.just(s.ids),
    )
)


# -- the reference model ---------------------------------------------------------------------------------


@dataclass
class Load:
    run: int
    window: int | None
    rows: list[tuple[int, str]]
    # "committed" (its attempt died: not recorded), "from_commit" (recorded by a later load), "done"
    state: str


@dataclass
class Model:
    disposition: str
    windowed: bool
    loads: list[Load] = field(default_factory=list)
    table: list[tuple[int, str, int]] = field(default_factory=list)  # id, value, index of its load

    def attempt(self, step: Step, value: str) -> bool:
        """Apply one attempt; whether it raises (the fault was reached)."""
        for load in self.loads:  # recovery: every load records what landed unrecorded
            if load.state == "committed":
                load.state = "from_commit"
        window = step.run % 2 if self.windowed else None
        earlier = [load for load in self.loads if load.run == step.run and load.window == window]
        if earlier and earlier[-1].state == "from_commit":  # a retry finishes that load
            earlier[-1].state = "done"
            return False
        if step.outcome == DIES_BEFORE_COMMIT:
            return True
        batch = [(n, value) for n in step.ids]
        index = len(self.loads)
        self.loads.append(Load(step.run, window, batch, "done" if step.outcome == LANDS else "committed"))
        self.table = self._apply(batch, index, window, earlier)
        return step.outcome == DIES_AFTER_COMMIT

    def _apply(self, batch, index, window, earlier) -> list[tuple[int, str, int]]:
        new = [(n, v, index) for n, v in batch]
        if self.disposition == "replace":
            return new
        if self.disposition in ("upsert", "delete-insert"):
            keys = {n for n, _ in batch}
            return [r for r in self.table if r[0] not in keys] + new
        replaced = {self.loads.index(load) for load in earlier}
        if self.disposition == "append-window":
            replaced |= {i for i, load in enumerate(self.loads) if load.window == window}
        return [r for r in self.table if r[2] not in replaced] + new

    def rows(self) -> list[tuple[int, str]]:
        return sorted((n, v) for n, v, _ in self.table)

    def recorded(self) -> int:
        return sum(load.state != "committed" for load in self.loads)


# -- the real table --------------------------------------------------------------------------------------


def attempt(spark, dataset: str, disposition: str, step: Step, try_number: int, value: str) -> bool:
    arguments, windowed = DISPOSITIONS[disposition]
    start = WEEKS[step.run % 2]
    rows = [{"id": n, "v": value, "ts": start + timedelta(days=1, hours=n)} for n in step.ids]
    run_context = {
        "dag_id": "events",
        "task_id": "load",
        "run_id": f"{'scheduled' if windowed else 'manual'}__r{step.run}",
        "try_number": try_number,
        "map_index": None,
        "run_type": "scheduled" if windowed else "manual",
    }
    if windowed:
        arguments = {**arguments, "data_interval": (start, start + timedelta(days=7))}
    if step.fault:
        os.environ[FAIL_AT] = step.fault
    try:
        run_load(rows, spark=spark, dataset=dataset, table_name=TABLE, run_context=run_context, **arguments)
    except InjectedFault:
        return True
    finally:
        os.environ.pop(FAIL_AT, None)
    return False


def table_rows(dataset: str) -> list[tuple[int, str]]:
    if not os.path.exists(f"{dataset}/{TABLE}"):  # no attempt committed yet
        return []
    return sorted((r["id"], r["v"]) for r in read_rows(f"{dataset}/{TABLE}"))


def recorded_loads(dataset: str) -> list[dict]:
    if not os.path.exists(f"{dataset}/{store.LOADS_TABLE}"):
        return []
    return store.read_loads(dataset, table_name=TABLE)


@pytest.mark.property
@pytest.mark.parametrize("disposition", sorted(DISPOSITIONS))
@settings(
    max_examples=examples(4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=st.lists(steps, min_size=2, max_size=5))
def test_retries_and_reruns_match_the_model(spark, tmp_path, disposition, history):
    model = Model(disposition, DISPOSITIONS[disposition][1])
    tries: dict[int, int] = {}
    dataset = tempfile.mkdtemp(dir=tmp_path)
    for n, step in enumerate(history):
        tries[step.run] = tries.get(step.run, 0) + 1
        value = f"r{step.run}.{tries[step.run]}"
        expect_fault = model.attempt(step, value)
        raised = attempt(spark, dataset, disposition, step, tries[step.run], value)
        assert raised == expect_fault, f"step {n}: {step}"
        assert table_rows(dataset) == model.rows(), f"after step {n}: {step}"
        load_ids = [r["load_id"] for r in recorded_loads(dataset)]
        assert len(load_ids) == len(set(load_ids)), f"a load recorded twice after step {n}"
        assert len(load_ids) == model.recorded(), f"after step {n}: {step}"
