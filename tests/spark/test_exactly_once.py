"""Exactly once across failures and retries: a load that fails at any step (tests/faults.py), or whose
process is killed right after its commit, and is then retried as Airflow retries a task (same run,
try_number + 1), leaves the table, `_dlt_loads` and the cursor state exactly as one clean run does,
and no batch is ever applied twice.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import Incremental, run_load
from airflow_provider_deltamerge.delta import store
from tests.faults import STEPS, InjectedFault, killed_child

pytestmark = pytest.mark.spark

UTC = timezone.utc
REPO_ROOT = Path(__file__).resolve().parents[2]
TABLE = "events"
# Loads that are not idempotent by nature: a stateful append. Applied twice, rows would be duplicated.
STATEFUL = Incremental("ts", initial_value="2024-01-01T00:00:00Z", allow_external_schedulers=False)
# Metrics that do not depend on timing.
STABLE_METRICS = (
    "numSourceRows",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsDeleted",
    "numTargetFilesAdded",
    "rows_extracted",
    "rows_staged",
    "table",
    "table_version",
    "window_start",
    "window_end",
    "writer",
)


def rows_between(first: int, last: int) -> list[dict]:
    return [
        {"id": n, "ts": datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=6 * n)}
        for n in range(first, last + 1)
    ]


def run_context(run_id: str, try_number: int = 1, run_type: str = "manual") -> dict:
    return {
        "dag_id": "events",
        "task_id": "load",
        "run_id": run_id,
        "try_number": try_number,
        "run_type": run_type,
    }


def stateful_load(spark, dataset, rows, try_number=1):
    return run_load(
        rows,
        spark=spark,
        dataset=dataset,
        table_name=TABLE,
        incremental=STATEFUL,
        run_context=run_context("manual__second", try_number),
    )


def snapshot(dataset: str) -> dict:
    """Everything a load leaves behind, with load ids replaced by their position among the loads.

    Also checks the invariant that makes a load exactly once: the table's commits carry exactly the
    recorded load ids, in order, each once, and every cursor state row belongs to a recorded load.
    """
    table = DeltaTable(f"{dataset}/{TABLE}")
    loads = store.read_loads(dataset)
    position = {r["load_id"]: i for i, r in enumerate(loads)}
    commits = sorted(store.read_commits(f"{dataset}/{TABLE}"), key=lambda c: c.version)
    assert [c.load_id for c in commits] == [r["load_id"] for r in loads], (
        "a commit was applied twice or left unrecorded"
    )
    assert [c.version for c in commits] == [r["table_version"] for r in loads]
    state_rows = DeltaTable(f"{dataset}/{store.STATE_TABLE}").to_pyarrow_table().to_pylist()
    assert {r["_dlt_load_id"] for r in state_rows} <= set(position), "a state row of an unrecorded load"
    return {
        "rows": sorted(
            (position[r["_dlt_load_id"]], r["id"], r["ts"]) for r in table.to_pyarrow_table().to_pylist()
        ),
        "loads": [
            {
                **{
                    k: r[k]
                    for k in ("status", "table_name", "window_start", "window_end", "table_version", "run_id")
                },
                "metrics": {k: r["metrics"].get(k) for k in STABLE_METRICS},
            }
            for r in loads
        ],
        "state_rows": sorted((position[r["_dlt_load_id"]], r["state"]) for r in state_rows),
        "state": store.latest_state(dataset, "deltamerge", TABLE),
    }


def copy_of(source: str, target: Path) -> str:
    shutil.copytree(source, target)
    return str(target)


@pytest.fixture(scope="module")
def baselines() -> dict:
    return {}


@pytest.fixture
def baseline(spark, baselines, tmp_path_factory, each_writer) -> tuple[str, dict]:
    """(dataset after the first load, snapshot after a clean second load), once per writer."""
    if each_writer not in baselines:
        first = str(tmp_path_factory.mktemp("first") / "lake")
        run_load(
            rows_between(1, 4),
            spark=spark,
            dataset=first,
            table_name=TABLE,
            incremental=STATEFUL,
            run_context=run_context("manual__first"),
        )
        clean = copy_of(first, tmp_path_factory.mktemp("clean") / "lake")
        stateful_load(spark, clean, rows_between(3, 8))
        result = snapshot(clean)
        # rows 1..4 come from the first load; 4 is its boundary row, so the second loads 5..8
        assert [(n, load) for load, n, _ in result["rows"]] == [(n, 0 if n <= 4 else 1) for n in range(1, 9)]
        baselines[each_writer] = (first, result)
    return baselines[each_writer]


@pytest.mark.parametrize("step", STEPS)
def test_a_load_failing_at_any_step_and_retried_equals_one_clean_run(
    spark, baseline, tmp_path, monkeypatch, step
):
    after_first_load, clean_run = baseline
    dataset = copy_of(after_first_load, tmp_path / "lake")
    monkeypatch.setenv("DELTAMERGE_FAIL_AT", step)
    with pytest.raises(InjectedFault, match=f"fault injected at step '{step}'"):
        stateful_load(spark, dataset, rows_between(3, 8), try_number=1)
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")

    committed = step in ("after_commit", "after_state_row")
    assert DeltaTable(f"{dataset}/{TABLE}").version() == (1 if committed else 0)
    assert len(store.read_loads(dataset)) == 1  # the failed attempt's load is not recorded yet

    retry = stateful_load(spark, dataset, rows_between(3, 8), try_number=2)

    assert retry.loaded and retry.table_version == 1
    assert snapshot(dataset) == clean_run
    recorded = store.read_loads(dataset)[-1]
    assert recorded["load_id"] == retry.load_id
    # A load that had landed is finished by the retry, not applied again: it keeps the first try's number
    assert recorded["try_number"] == (1 if committed else 2)


# -- a real kill ------------------------------------------------------------------------------------------

WEEK_ONE = ("2024-01-01T00:00:00+00:00", "2024-01-08T00:00:00+00:00")
WEEK_TWO = ("2024-01-08T00:00:00+00:00", "2024-01-15T00:00:00+00:00")
WINDOWED = Incremental("ts", initial_value="2024-01-01T00:00:00Z")
CHILD = """
import json, sys
from datetime import datetime
from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.spark.session import default_session
from airflow_provider_deltamerge.model.delta_jars import delta_jars_from_env
from tests import faults

faults.install()

arguments = json.loads(sys.argv[1])
rows = [{"id": r["id"], "ts": datetime.fromisoformat(r["ts"])} for r in arguments.pop("rows")]
spark = default_session("local[1]", {"spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "1"},
                        delta_jars=delta_jars_from_env())
run_load(rows, spark=spark, **arguments)
print("the load returned: the fault did not fire", flush=True)
"""


def backfill_week(dataset: str, week: tuple[str, str], try_number: int = 1) -> dict:
    """run_load's arguments for one week of a weekly backfill, JSON-safe so a child process can take them."""
    return {
        "dataset": dataset,
        "table_name": TABLE,
        "incremental": WINDOWED.to_dict(),
        "data_interval": list(week),
        "run_context": run_context(f"backfill__{week[1]}", try_number, run_type="backfill"),
    }


@pytest.mark.usefixtures("jvm_class_archive")
def test_a_killed_process_after_its_commit_is_finished_by_the_retry(spark, tmp_path, each_writer):
    source = rows_between(0, 60)  # 2024-01-01 .. 2024-01-16: both weeks and a bit
    clean = str(tmp_path / "clean")
    killed = str(tmp_path / "killed")
    for dataset in (clean, killed):
        run_load(source, spark=spark, **backfill_week(dataset, WEEK_ONE))
    run_load(source, spark=spark, **backfill_week(clean, WEEK_TWO))

    arguments = {
        **backfill_week(killed, WEEK_TWO),
        "backend": each_writer,  # the writer this test runs with
        "rows": [{**r, "ts": r["ts"].isoformat()} for r in source],
    }
    child = killed_child(CHILD, arguments, "after_commit")
    assert child.returncode == 137, child.stdout[-2000:] + child.stderr[-4000:]
    assert DeltaTable(f"{killed}/{TABLE}").version() == 1  # the commit landed ...
    assert len(store.read_loads(killed)) == 1  # ... and the process died before recording it
    committed_load_id = store.read_commits(f"{killed}/{TABLE}", 1)[0].load_id

    retry = run_load(source, spark=spark, **backfill_week(killed, WEEK_TWO, try_number=2))

    assert retry.load_id == committed_load_id and retry.table_version == 1
    assert DeltaTable(f"{killed}/{TABLE}").version() == 1  # nothing applied again
    assert snapshot(killed) == snapshot(clean)
    assert [r["try_number"] for r in store.read_loads(killed)] == [1, 1]


@pytest.mark.parametrize("step", ["after_commit", "after_state_row"])
def test_a_task_loading_several_batches_retried_after_its_first_keeps_every_batch_once(
    spark, tmp_path, monkeypatch, step
):
    """A task that appends two batches into one table (no window): its first attempt stops after the
    first batch's commit (unrecorded, or recorded). The retry loads both batches again, as the task does:
    the first batch's call finishes or replaces the earlier attempt's load, and the second batch's call
    must not take that load away. The table then holds each batch once."""
    dataset = str(tmp_path / "lake")
    first, second = rows_between(1, 3), rows_between(4, 6)

    def load(rows, try_number):
        return run_load(
            rows,
            spark=spark,
            dataset=dataset,
            table_name=TABLE,
            run_context=run_context("manual__batches", try_number),
        )

    monkeypatch.setenv("DELTAMERGE_FAIL_AT", step)
    with pytest.raises(InjectedFault):
        load(first, 1)
    monkeypatch.delenv("DELTAMERGE_FAIL_AT")
    load(first, 2)
    load(second, 2)

    stored = sorted(r["id"] for r in DeltaTable(f"{dataset}/{TABLE}").to_pyarrow_table().to_pylist())
    assert stored == [1, 2, 3, 4, 5, 6]
