"""The cold regime: every timed load in a fresh process (cold_run.py), as an Airflow task runs it.

Session start is timed and reported apart from the load, and so is the definition of its input
DataFrame (the change set's py4j calls and Spark's analysis of them: nothing is computed until the load,
which computes the rows; dlt's rows are built before its timer too); each load's Spark jobs and SQL
executions are counted (they do not depend on how busy the machine is). Cases:
- P1: the upsert of `p1` (default 1M/100k uniform): run_load beside the embedded floor, both fresh;
- P7: the first load of P1's target: run_load beside dlt's first load, and the floor writing the same
  rows unsorted, its sort by the key timed apart (the key-ordered layout's cost);
- P2: the upsert of `p2` (default 2M/40k clustered): run_load fresh beside dlt, and from fresh client
  processes through one warm Spark Connect server on loopback;
- dlt's upserts (P1, P2) run as every other side's: in a fresh process, after its first load's process
  built the table (`dlt`); `dlt, after first load` times the upsert in its first load's own process, as
  this regime did before, reported beside it;
- in P1, P7 and P2, run_load also in a JVM compiling with C1 alone (`, C1 only`: the option a DAG sets
  in its spark_conf), reported beside the default's deferred C2: faster for short loads, slower for long;
- task wall time: DeltaMergeOperator.execute of P1's change set (read from parquet) in a fresh process,
  session start included, beside P1's floor: its session start, its change set's definition and merge;
- CDC: P1's change set as change events (cdc_work.py: 10% out of order, 5% deletes) applied with
  sequence_by and apply_as_deletes, beside a plain upsert of the same rows, both fresh;
- P8: `small_loads` upserts of 5 rows each into one table in one process, beside dlt's.
Every result table is verified (bench_sides.verify).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench_sides import verify
from cdc_work import expected_rows as cdc_expected_rows
from cold_run import C1_ONLY, MARK, NO_ARCHIVE, RUN_LOAD_C1
from deltalake import DeltaTable
from workload import Size

from airflow_provider_deltamerge.spark.class_archive import ENV as ARCHIVE_ENV

HERE = Path(__file__).parent
P1, P2, SMALL_LOADS, SMALL_TARGET = "1000000:100000:uniform", "2000000:40000:clustered", 300, 1000
DLT_AFTER_FIRST_LOAD = "dlt, after first load"  # dlt's upsert timed in its first load's own process
DLT_SIDES = ("dlt", DLT_AFTER_FIRST_LOAD)


# untimed client loads before the timed ones: a server keeps speeding up over its first ten or so (its
# JIT), as a deployment's has long since done; P2 names a warm server
CONNECT_WARMUPS = 10


class ColdRuns:
    def __init__(self, work: Path, dlt_python: str | None, driver_memory: str, repeat: int, conf=None):
        self.work, self.dlt_python, self.repeat = work / "cold", dlt_python, repeat
        self.job = {"driver_memory": driver_memory, "conf": conf or {}}
        self.runs = 0
        self.archive_off = False  # True: every side's session starts without the JVM class archive

    # ---- processes ----

    def child(self, side: str, size: Size, path: Path, **extra) -> dict:
        job = {**self.job, "side": side, "path": str(path), "target_rows": size.target_rows}
        job.update(changed_rows=size.changed_rows, kind=size.kind, **extra)
        off = self.archive_off or side == NO_ARCHIVE
        env = {**os.environ, **({ARCHIVE_ENV: "off"} if off else {})}
        done = subprocess.run(
            [sys.executable, str(HERE / "cold_run.py"), json.dumps(job)],
            capture_output=True,
            text=True,
            env=env,
        )
        if done.returncode != 0:
            raise RuntimeError(f"cold_run.py {side} failed:\n{done.stderr[-4000:]}")
        line = next(line for line in done.stdout.splitlines() if line.startswith(MARK))
        return json.loads(line[len(MARK) :])

    def dlt(self, script: str, *args) -> dict:
        done = subprocess.run(
            [self.dlt_python, str(HERE / script), *map(str, args)], check=True, capture_output=True, text=True
        )
        return json.loads(done.stdout.strip().splitlines()[-1])

    def fresh(self, name: str, base: Path | None = None) -> Path:
        """A new dataset folder (a copy of `base`'s), and the path of its table `items`."""
        self.runs += 1
        dataset = self.work / f"{name}-{self.runs}"
        shutil.rmtree(dataset, ignore_errors=True)
        if base is not None:
            shutil.copytree(base.parent, dataset)
        else:
            dataset.mkdir(parents=True)
        return dataset / "items"

    # ---- cases ----

    def timed(self, side: str, size: Size, base: Path | None, keep=False, **extra) -> dict:
        """One fresh process's load into a fresh dataset (a copy of `base`'s), verified; the dataset is
        removed after unless kept (its table's path is then in the result)."""
        path = self.fresh(side, base)
        result = self.child(side, size, path, **extra)
        result["verified"] = verified(side, str(path), size)
        if keep:
            result["path"] = str(path)
        else:
            shutil.rmtree(path.parent, ignore_errors=True)
        return result

    def upsert_case(
        self, name: str, size: Size, sides: tuple[str, ...], setup=None, initial="initial"
    ) -> dict:
        """The upsert of `size` by each side, interleaved, `repeat` times, each on a fresh copy of one
        target (built by run_load's first load in a fresh process, the side `initial`, itself timed;
        `setup`: what else that process writes, untimed)."""
        setup = setup or {}
        built = self.timed(initial, Size(size.target_rows, 0, size.kind), None, keep=True, **setup)
        base = Path(built.pop("path"))
        runs: dict[str, list[dict]] = {side: [] for side in sides}
        for _ in range(self.repeat):
            for side in sides:
                if side in DLT_SIDES:
                    runs[side].append(self._dlt_upsert(size, fresh=side == "dlt"))
                else:
                    runs[side].append(self.timed(side, size, base))
        return {"case": name, "size": size.label, "base": built, "base_path": str(base), "sides": runs}

    def connect_side(self, case: dict, size: Size, remote: str, warmups: int) -> None:
        """The case's upsert from fresh client processes through the Connect server at `remote`, on
        copies of the case's target, added to the case: the server warmed first by `warmups` untimed
        clients' loads (P2 names a warm server, as a deployment's is once it has served a dozen tasks: on
        a 2-core machine its loads went 0.9, 0.8, 0.6 s, then about 0.5 s from the tenth). Run apart from the
        fresh-process sides, which an idle server's JVM would otherwise share the machine with."""
        base = Path(case["base_path"])
        case["base"]["connect_warmup"] = [
            self.timed("connect", size, base, remote=remote) for _ in range(warmups)
        ]
        runs = [self.timed("connect", size, base, remote=remote) for _ in range(self.repeat)]
        case["sides"]["connect"] = runs

    def _dlt_upsert(self, size: Size, fresh: bool) -> dict:
        """dlt's upsert of `size` into a table of its own, built by its first load (timed too): `fresh`,
        in a new process after that load's (an Airflow task's, as every other side here); else in that
        load's own process, after it."""
        work = self.fresh("dlt").parent
        args = (work, size.target_rows, size.changed_rows, size.kind)
        if fresh:
            first = self.dlt("dlt_upsert.py", *args, "--phase", "initial")
            result = self.dlt("dlt_upsert.py", *args, "--phase", "upsert")
            result["initial_seconds"] = first["initial_seconds"]
        else:
            result = self.dlt("dlt_upsert.py", *args)
        result["verified"] = verify(result.pop("path"), size)
        shutil.rmtree(work, ignore_errors=True)
        return result

    def initial_case(self, size: Size, built: dict, dlt_runs: list[dict]) -> dict:
        """P7: run_load's first load of the target (`built`: P1's, then more) beside the floor's write of
        the same rows (fresh processes; its sort by the key timed apart), and dlt's first loads (timed by
        its P1 runs)."""
        target = Size(size.target_rows, 0, size.kind)
        runs = {"run_load": [built], RUN_LOAD_C1: [], "floor": []}
        for repetition in range(self.repeat):
            if repetition:
                runs["run_load"].append(self.timed("initial", target, None))
            runs[RUN_LOAD_C1].append(self.timed("initial" + C1_ONLY, target, None))
            runs["floor"].append(self.timed("initial_floor", target, None))
        if dlt_runs:
            runs["dlt"] = [{"seconds": r["initial_seconds"]} for r in dlt_runs]
        return {"case": "P7 initial load", "size": f"{target.label.split('/')[0]} rows", "sides": runs}

    def task_case(self, size: Size, base: Path, parquet: Path, floor_runs: list[dict]) -> dict:
        """Task wall time: the operator's execute of the parquet change set (session start and its source's
        definition included), on a fresh copy of the target, beside P1's floor runs: session start, the
        change set's definition and the merge."""
        runs = {"operator execute": [], "floor session + merge": []}
        for _ in range(self.repeat):
            runs["operator execute"].append(self.timed("operator", size, base, parquet=str(parquet)))
        for floor in floor_runs:
            runs["floor session + merge"].append(
                {
                    **floor,
                    "task_seconds": floor["session_seconds"] + floor["define_seconds"] + floor["seconds"],
                }
            )
        return {"case": "task wall time", "size": size.label, "sides": runs}

    def small_loads_case(self, loads: int) -> dict:
        size = Size(SMALL_TARGET, 0, "uniform")
        runs = {"run_load": [self.child("small_loads", size, self.fresh("small"), loads=loads)]}
        if self.dlt_python:
            runs["dlt"] = [
                self.dlt("dlt_small_loads.py", self.fresh("dlt-small").parent, SMALL_TARGET, loads)
            ]
        return {"case": "P8 small loads", "size": f"{loads} x 5 rows", "sides": runs}


def run(work: Path, args, dlt_python: str | None) -> dict:
    cold = ColdRuns(work, dlt_python, args.driver_memory, args.repeat, dict(args.session_conf or ()))
    p1, p2 = Size.parse(args.p1), Size.parse(args.p2)
    dlt = DLT_SIDES if dlt_python else ()
    parquet = cold.work / "changes.parquet"  # the operator's source: P1's change set
    setup = {"parquet": str(parquet), "parquet_changed_rows": p1.changed_rows, "parquet_kind": p1.kind}
    archive = _jvm_archive(args.jvm_archive)
    cold.archive_off = archive is None
    no_archive = (NO_ARCHIVE,) if archive else ()
    p1_sides = ("run_load", *no_archive, RUN_LOAD_C1, "floor", *dlt)
    cases = [cold.upsert_case("P1 upsert", p1, p1_sides, setup)]
    cases.append(cold.initial_case(p1, cases[0]["base"], cases[0]["sides"].get("dlt", [])))
    cases.append(cold.task_case(p1, Path(cases[0]["base_path"]), parquet, cases[0]["sides"]["floor"]))
    cases.append(cold.upsert_case("P2 upsert", p2, ("run_load", RUN_LOAD_C1, *dlt)))
    if args.connect:
        with _connect_server(work) as port:
            cold.connect_side(cases[-1], p2, f"sc://127.0.0.1:{port}", args.connect_warmups)
    cases.append(cold.upsert_case("CDC events", p1, ("cdc", "cdc_upsert"), initial="initial_cdc"))
    cases.append(cold.small_loads_case(args.small_loads))
    for case in cases:
        if "base_path" in case:
            shutil.rmtree(Path(case.pop("base_path")).parent, ignore_errors=True)
    return {"cases": cases, "jvm_archive": archive}


def verified(side: str, path: str, size: Size) -> bool:
    """The table a side left holds what it must (bench_sides.verify; the CDC events' by its row count)."""
    if side == "cdc":
        rows = DeltaTable(path).get_add_actions(flatten=True).column("num_records").to_pylist()
        return sum(rows) == cdc_expected_rows(size)
    return verify(path, size)


def _jvm_archive(wanted: bool) -> dict | None:
    """The JVM class archive the fresh processes start from: the one in place for this Java and these
    Spark jars, else made first (`deltamerge jvm-archive`); None where the run is asked to go without."""
    if not wanted:
        return None
    from airflow_provider_deltamerge.cli.jvm_archive import archive_of, make_archive

    path = archive_of()  # named by a new local session's conf: the jars DELTA_SPARK_JARS adds included
    if path is not None and path.is_file():
        return {"archive": str(path), "bytes": path.stat().st_size, "seconds": None}
    return make_archive()


def _connect_server(work: Path):
    """One Spark Connect server on loopback for the whole run (the test suite's way of starting one)."""
    sys.path.insert(0, str(HERE.parent))
    from tests.airflow.spark_servers import connect_server

    return connect_server(work / "connect")
