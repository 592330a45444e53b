"""plan/reruns.py against a small reference model of Airflow attempts, checked on every short sequence.

The model: a table of (load id, row) and the `_dlt_loads` rows. An attempt of a run either succeeds
(commits and records), stops after its commit (recorded from the commit by the next attempt of any run,
as recovery does), or stops before its commit. What must hold after any sequence: every run's rows in
the table are the batch of exactly one of its attempts, the latest that committed, never two batches,
and every committed load is recorded once.
"""

from __future__ import annotations

import itertools

import pytest

from airflow_provider_deltamerge.delta.datafusion import DataFusionDialect
from airflow_provider_deltamerge.delta.spark_sql import render_spark
from airflow_provider_deltamerge.model.options import WriteDisposition
from airflow_provider_deltamerge.model.run import RunContext
from airflow_provider_deltamerge.plan import reruns
from airflow_provider_deltamerge.plan.expressions import Cmp, Col, Lit, render

APPEND = WriteDisposition.parse("append")
OUTCOMES = ("succeeds", "stops_after_commit", "stops_before_commit")
RUNS = (("r1", None), ("r2", None), ("r1", 0), ("r1", 1))


class Model:
    def __init__(self):
        self.table: list[tuple[str, str]] = []  # (load id, row)
        self.loads: list[dict] = []
        self.unrecorded: list[dict] = []  # commits whose attempt stopped before its record
        self.tries: dict[tuple, int] = {}
        self.next_id = 0

    def attempt(self, run_id: str, map_index, outcome: str) -> None:
        for row in self.unrecorded:  # recovery: every load records commits that landed unrecorded
            self.loads.append({**row, "metrics": {**row["metrics"], reruns.RECORDED_FROM_COMMIT: True}})
        self.unrecorded = []
        key = (run_id, map_index)
        self.tries[key] = self.tries.get(key, 0) + 1
        run = RunContext(
            dag_id="d", task_id="t", run_id=run_id, map_index=map_index, try_number=self.tries[key]
        )
        earlier = reruns.earlier_loads_of_run(run, self.loads)
        finished = reruns.load_to_finish(APPEND, earlier, None)
        if finished is not None:  # the retry returns the load and marks it finished
            finished["metrics"].pop(reruns.RECORDED_FROM_COMMIT, None)
            return
        if outcome == "stops_before_commit":
            return
        row = self.commit(run, earlier, f"{run_id}/{map_index}/try{self.tries[key]}")
        (self.loads if outcome == "succeeds" else self.unrecorded).append(row)

    def commit(self, run: RunContext, earlier: list[dict], batch: str) -> dict:
        """An append of `batch` (two rows) replacing the loads it supersedes; its `_dlt_loads` row."""
        self.next_id += 1
        load_id = f"{self.next_id}.000000"
        superseded = reruns.superseded_load_ids(APPEND, earlier, None)
        self.table = [(i, r) for i, r in self.table if i not in superseded] + [(load_id, batch)] * 2
        return {
            "load_id": load_id,
            "dag_id": "d",
            "task_id": "t",
            "run_id": run.run_id,
            "try_number": run.try_number,
            "window_start": None,
            "window_end": None,
            "metrics": reruns.map_index_metrics(run),
        }


@pytest.mark.parametrize("length", [1, 2, 3, 4])
def test_every_run_keeps_one_batch_whatever_the_attempts(length):
    steps = list(itertools.product(RUNS, OUTCOMES))
    for sequence in itertools.product(steps, repeat=length):
        model = Model()
        committed: dict[tuple, str] = {}
        for (run_id, map_index), outcome in sequence:
            before = {i for i, _ in model.table}
            model.attempt(run_id, map_index, outcome)
            new = {i for i, _ in model.table} - before
            if new:
                (load_id,) = new
                committed[(run_id, map_index)] = next(r for i, r in model.table if i == load_id)
        for key, batch in committed.items():
            prefix = f"{key[0]}/{key[1]}/"
            mine = [r for _, r in model.table if r.startswith(prefix)]
            assert mine == [batch, batch], sequence  # one batch, the latest committed, once
        recorded = [r["load_id"] for r in model.loads + model.unrecorded]
        assert len(recorded) == len(set(recorded)), sequence


def test_loads_of_the_same_attempt_are_not_earlier_loads_of_its_run():
    row = {"load_id": "1", "dag_id": "d", "task_id": "t", "run_id": "r", "try_number": 1, "metrics": {}}
    attempt = {"dag_id": "d", "task_id": "t", "run_id": "r"}
    assert reruns.earlier_loads_of_run(RunContext(**attempt, try_number=1), [row]) == []
    assert reruns.earlier_loads_of_run(RunContext(**attempt, try_number=2), [row]) == [row]
    assert reruns.earlier_loads_of_run(RunContext(**attempt), [row]) == []


def test_the_replace_predicate_keeps_siblings_and_matches_the_new_rows():
    window = Cmp(">=", Col("ts"), Lit("2024-01-08"))
    predicate = reruns.replace_predicate(window, "9.0", ("1.0",), ("5.0",))
    assert render(predicate, DataFusionDialect()) == (
        "((\"ts\" >= '2024-01-08') AND (NOT (\"_dlt_load_id\" IN ('5.0')))) OR "
        "(\"_dlt_load_id\" IN ('1.0', '9.0'))"
    )
    assert render_spark(predicate) == (
        "((`ts` >= '2024-01-08') AND (NOT (`_dlt_load_id` IN ('5.0')))) OR (`_dlt_load_id` IN ('1.0', '9.0'))"
    )
    assert reruns.replace_predicate(None, "9.0", ()) is None
    assert reruns.replace_predicate(window, "9.0", ()) == window


def test_siblings_are_other_map_indexes_of_the_same_run_only():
    run = RunContext(dag_id="d", task_id="t", run_id="r", map_index=0)
    loads = [
        {"load_id": "1", "dag_id": "d", "task_id": "t", "run_id": "r", "metrics": {"map_index": 1}},
        {"load_id": "2", "dag_id": "d", "task_id": "t", "run_id": "r", "metrics": {"map_index": 0}},
        {"load_id": "3", "dag_id": "d", "task_id": "t", "run_id": "other", "metrics": {"map_index": 1}},
        {"load_id": "4", "dag_id": "d", "task_id": "t", "run_id": "r", "metrics": {}},
    ]
    assert reruns.sibling_load_ids(run, loads, []) == ("1",)
    assert reruns.sibling_load_ids(RunContext(dag_id="d", task_id="t", run_id="r"), loads, []) == ()


BATCHES = 2  # a task that loads two batches into one table, in the same order in every attempt
STOPS = ("succeeds",) + tuple(
    f"stops_{when}_commit_of_{batch}" for batch in range(BATCHES) for when in ("before", "after")
)


class BatchesModel(Model):
    """The model of a task that loads BATCHES batches (no window) in each attempt, and an attempt that
    stops at one of them, before or after its commit. A finished load is marked as its finisher's, as
    load/earlier_loads.py's finish_earlier_attempt does."""

    def attempt(self, run_id: str, map_index, outcome: str) -> None:
        key = (run_id, map_index)
        self.tries[key] = self.tries.get(key, 0) + 1
        run = RunContext(
            dag_id="d", task_id="t", run_id=run_id, map_index=map_index, try_number=self.tries[key]
        )
        for batch in range(BATCHES):
            for row in self.unrecorded:  # recovery, at the start of every load
                self.loads.append({**row, "metrics": {**row["metrics"], reruns.RECORDED_FROM_COMMIT: True}})
            self.unrecorded = []
            earlier = reruns.earlier_loads_of_run(run, self.loads)
            finished = reruns.load_to_finish(APPEND, earlier, None)
            if finished is not None:
                finished["metrics"].pop(reruns.RECORDED_FROM_COMMIT, None)
                finished["metrics"][reruns.FINISHED_BY_TRY] = run.try_number
                continue
            if outcome == f"stops_before_commit_of_{batch}":
                return
            row = self.commit(run, earlier, f"{run_id}/{map_index}/b{batch}/try{self.tries[key]}")
            stops = outcome == f"stops_after_commit_of_{batch}"
            (self.unrecorded if stops else self.loads).append(row)
            if stops:
                return


@pytest.mark.parametrize("length", [1, 2, 3])
def test_a_task_of_several_batches_keeps_each_batch_once_whatever_the_attempts(length):
    """A retry's first batch may finish the load an interrupted attempt committed; the batches after it
    then must not replace that load. No batch is ever in the table twice, and a run whose latest attempt
    succeeded has every batch in it exactly once."""
    steps = list(itertools.product((("r1", None), ("r2", None)), STOPS))
    for sequence in itertools.product(steps, repeat=length):
        model = BatchesModel()
        last = {}
        for (run_id, map_index), outcome in sequence:
            model.attempt(run_id, map_index, outcome)
            last[f"{run_id}/{map_index}"] = outcome
        loads_of = {}
        for load_id, rows in model.table:
            loads_of.setdefault(rows.rsplit("/", 1)[0], set()).add(load_id)
        assert all(len(ids) == 1 for ids in loads_of.values()), (sequence, model.table)  # never twice
        for run, outcome in last.items():
            if outcome == "succeeds":
                assert all(f"{run}/b{b}" in loads_of for b in range(BATCHES)), (sequence, model.table)
