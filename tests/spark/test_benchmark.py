"""The benchmark command works in both regimes: a tiny run of every side available here verifies its
result tables, prints its tables and ratios, and writes its JSON. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def imported_bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench
    finally:
        sys.path.remove(str(BENCHMARKS))
    return bench


def test_a_tiny_benchmark_run_verifies_every_table_and_reports_every_target(spark, tmp_path, capsys):
    out = tmp_path / "bench.json"
    sizes = ["3000:300:uniform", "3000:300:clustered", "6000:300:clustered"]
    imported_bench().main(
        ["--warm", "--sizes", *sizes, "--repeat", "1", "--memory-probe", "largest", "--out", str(out)]
    )

    report = json.loads(out.read_text())
    assert [s["size"] for s in report["sizes"]] == ["3k/300 uniform", "3k/300 clustered", "6k/300 clustered"]
    assert all(s["verified"] for s in report["sizes"])
    assert all({"run_load delta-rs", "floor"} <= set(s["sides"]) for s in report["sizes"])
    warmed = {side: len(result.get("warmup", [])) for side, result in report["sizes"][0]["sides"].items()}
    assert warmed["run_load delta-rs"] == warmed["floor"] == 1 and warmed.get("dlt", 0) == 0
    probed = [s["driver_memory"] for s in report["sizes"]]
    assert probed[:2] == [None, None] and probed[2]["driver_growth"] > 0 < probed[2]["floor_growth"]
    names = [c["name"].split()[0] for c in report["ratios"]]
    assert names == ["P1", "P2", "P2", "P3", "P4", "P5", "P6"]
    assert all(c["verdict"] in ("PASS", "FAIL", "n/a") for c in report["ratios"])
    printed = capsys.readouterr().out
    assert "P1 run_load / embedded floor" in printed and "verified" in printed
    assert "WARM: every side in this one process" in printed and "COLD:" not in printed
    assert printed.count("(untimed first runs: run_load delta-rs ") == 3


def test_a_tiny_cold_run_loads_in_fresh_processes_and_reports_the_cold_targets(
    tmp_path, capsys, jvm_class_archive
):
    out = tmp_path / "cold.json"
    sizes = ["--p1", "3000:300:uniform", "--p2", "6000:120:clustered", "--small-loads", "4"]
    imported_bench().main(["--cold", *sizes, "--repeat", "1", "--connect-warmups", "2", "--out", str(out)])

    report = json.loads(out.read_text())
    assert "sizes" not in report  # --cold: no warm run
    # the run's own archive is in place, so the benchmark starts from it rather than making one
    assert report["cold"]["jvm_archive"] == {**jvm_class_archive, "seconds": None}
    cases = {case["case"]: case for case in report["cold"]["cases"]}
    assert list(cases) == [
        "P1 upsert",
        "P7 initial load",
        "task wall time",
        "P2 upsert",
        "CDC events",
        "P8 small loads",
    ]
    assert set(cases["CDC events"]["sides"]) == {"cdc", "cdc_upsert"}
    cdc = cases["CDC events"]["sides"]["cdc"][0]
    assert cdc["verified"] is True and cdc["jobs"] >= 1
    c1 = "run_load, C1 only"  # run_load in a JVM compiling with C1 alone, beside the default
    assert set(cases["P1 upsert"]["sides"]) == {"run_load", "run_load, no JVM archive", c1, "floor"}
    assert set(cases["P7 initial load"]["sides"]) == {"run_load", c1, "floor"}
    assert cases["P7 initial load"]["sides"]["floor"][0]["sort_seconds"] > 0
    assert set(cases["P2 upsert"]["sides"]) == {"run_load", c1, "connect"}
    runs = [r for case in cases.values() for side in case["sides"].values() for r in side]
    assert all(r.get("verified") is not False for r in runs)
    assert all(r["session_seconds"] > 0 for r in runs if "session_seconds" in r)
    # every side's input is defined before its timer, and timed apart; the operator's is in its execute
    defined = {
        side for case in cases.values() for side, rs in case["sides"].items() if "define_seconds" in rs[0]
    }
    floors = {"floor", "floor session + merge"}  # the task wall's floor is P1's floor runs
    assert defined == {"run_load", "run_load, no JVM archive", c1, *floors, "connect", "cdc", "cdc_upsert"}
    assert all(r["define_seconds"] > 0 for r in runs if "define_seconds" in r)
    assert "define_seconds" not in cases["task wall time"]["sides"]["operator execute"][0]
    task_floor = cases["task wall time"]["sides"]["floor session + merge"][0]  # a task defines its input too
    parts = task_floor["session_seconds"] + task_floor["define_seconds"] + task_floor["seconds"]
    assert task_floor["task_seconds"] == pytest.approx(parts)
    started_from_archive = {
        side: [r["jvm_archive"] for r in runs] for side, runs in cases["P1 upsert"]["sides"].items()
    }
    archived = {"run_load": [True], "run_load, no JVM archive": [False], c1: [True], "floor": [True]}
    assert started_from_archive == archived
    compiled_by_c1_alone = {
        case: {side: [r.get("c1_only") for r in runs] for side, runs in cases[case]["sides"].items()}
        for case in ("P1 upsert", "P7 initial load", "P2 upsert")
    }
    assert compiled_by_c1_alone == {
        "P1 upsert": {"run_load": [False], "run_load, no JVM archive": [False], c1: [True], "floor": [False]},
        "P7 initial load": {"run_load": [False], c1: [True], "floor": [False]},
        "P2 upsert": {"run_load": [False], c1: [True], "connect": [None]},  # a Connect client starts no JVM
    }
    # each fresh process counts its load's Spark work; a small load runs the floor's one job
    assert cases["P1 upsert"]["sides"]["run_load"][0]["jobs"] == 1
    assert cases["P2 upsert"]["sides"]["connect"][0]["jobs"] is None  # counted in the server, not here
    warmups = cases["P2 upsert"]["base"]["connect_warmup"]  # untimed, before the timed runs
    assert [run["verified"] for run in warmups] == [True, True]
    assert len(cases["P8 small loads"]["sides"]["run_load"][0]["loads"]) == 4
    names = [c["name"].split()[0] for c in report["cold"]["ratios"]]
    assert names == ["P1", "P2", "P2", "P2", "P7", "CDC", "P8", "task", "P1", "P2", "P7"]
    printed = capsys.readouterr().out
    assert "COLD: each timed load in a fresh process" in printed and "WARM:" not in printed
    assert "JVM class archive (deltamerge jvm-archive): the one in place" in printed
    assert "P1 cold run_load / embedded floor" in printed
    assert "P1 C1 only: run_load / run_load" in printed and "P2 C1 only: run_load / dlt" in printed
    assert "the Connect server warmed by 2 untimed client loads: " in printed


@pytest.fixture(scope="module")
def dlt_python() -> str:
    """dlt's own virtualenv, where `bench.py --dlt-venv .venv-dlt` keeps it (created pinned when missing)."""
    imported_bench()
    return sys.modules["bench_sides"].dlt_virtualenv(ROOT / ".venv-dlt")


def test_dlt_upserts_in_a_fresh_process_after_its_first_load_or_in_that_same_process(tmp_path, dlt_python):
    bench = imported_bench()
    cold = bench.bench_cold.ColdRuns(tmp_path, dlt_python, "1g", repeat=1)
    size = bench.Size(3000, 300, "clustered")
    fresh, after_first_load = cold._dlt_upsert(size, fresh=True), cold._dlt_upsert(size, fresh=False)
    for result in (fresh, after_first_load):  # each verified: the target's rows with the change set's
        assert result["verified"] is True and result["seconds"] > 0 < result["initial_seconds"]
        assert result["files_removed"] >= 1 and result["rows"] == 3000 + 30
    assert fresh["phase"] == "upsert" and after_first_load["phase"] == "both"  # the timed upsert's process

    # the fresh upsert takes the table a first load's process left, and refuses to run without one
    empty = tmp_path / "no-first-load"
    script = [dlt_python, str(BENCHMARKS / "dlt_upsert.py"), str(empty), "3000", "300", "clustered"]
    refused = subprocess.run([*script, "--phase", "upsert"], capture_output=True, text=True)
    assert refused.returncode != 0
    assert f"no pipeline in {empty}: run --phase initial there first" in refused.stderr
    assert not (empty / "lake").exists()


def test_the_cold_report_holds_p2_to_dlts_fresh_upsert_and_reports_the_earlier_measures_beside_it():
    imported_bench()
    report_module = sys.modules["bench_cold_report"]
    runs = lambda *seconds: [{"seconds": s} for s in seconds]  # noqa: E731
    loads = [{"seconds": s, "define_seconds": d} for s, d in ((2.0, 0.6), (2.1, 0.4), (2.2, 0.5))]
    sides = {"run_load": loads, "dlt": runs(2.2, 2.4, 2.6), "dlt, after first load": runs(2.0)}
    report = {"cases": [{"case": "P2 upsert", "size": "2M/40k clustered", "sides": sides}]}

    checks = {check["name"]: check for check in report_module.ratios(report)}
    target = checks["P2 cold run_load / dlt, clustered"]  # the load from its input in hand, as dlt's
    assert target["value"] == pytest.approx(2.1 / 2.4) and target["verdict"] == "PASS"
    defined_in_the_load = checks["P2 cold run_load with its input's definition / dlt"]  # the median sum
    assert (
        defined_in_the_load["value"] == pytest.approx(2.6 / 2.4) and defined_in_the_load["target"] == "report"
    )
    assert defined_in_the_load["note"] == "2M/40k clustered: its definition 0.50 s, here in the load"
    before = checks["P2 cold run_load / dlt after its first load"]
    assert before["value"] == pytest.approx(2.1 / 2.0) and before["target"] == "report"
    assert before["note"] == "2M/40k clustered: dlt 2.00 s there, 2.40 s fresh"
    without = {"cases": [{**report["cases"][0], "sides": {"run_load": runs(2.0), "dlt": runs(2.0)}}]}
    names = [check["name"] for check in report_module.ratios(without)]
    assert "P2 cold run_load / dlt, clustered" in names
    assert "P2 cold run_load / dlt after its first load" not in names
    assert "P2 cold run_load with its input's definition / dlt" not in names  # runs that timed it inside


@pytest.mark.parametrize(
    ("set_aside", "strategy"),
    [("quarantine", "delete-insert"), ("drop", "delete-insert"), ("quarantine", "upsert")],
)
def test_a_tiny_expectations_benchmark_verifies_both_sides_and_reports_their_ratio(
    spark, tmp_path, capsys, set_aside, strategy
):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_expectations
    finally:
        sys.path.remove(str(BENCHMARKS))
    out = tmp_path / "expectations.json"
    arguments = ["--rows", "600", "--repeat", "1", "--warm", "--set-aside", set_aside, "--out", str(out)]
    arguments += ["--strategy", strategy]
    report = bench_expectations.main(arguments)
    assert report == json.loads(out.read_text()) and "cold" not in report
    assert report["warm"]["verified"] and report["warm"]["ratio"] > 0
    assert (report["set_aside"], report["strategy"]) == (set_aside, strategy)
    assert f"merge ({strategy})" in capsys.readouterr().out
