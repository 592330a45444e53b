"""The benchmark command works: a tiny run of every side available here verifies its result tables,
prints its table and ratios, and writes its JSON. No timing is asserted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.writer_independent]

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_a_tiny_benchmark_run_verifies_every_table_and_reports_every_target(spark, tmp_path, capsys):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench
    finally:
        sys.path.remove(str(BENCHMARKS))
    out = tmp_path / "bench.json"
    sizes = ["3000:300:uniform", "3000:300:clustered", "6000:300:clustered"]
    bench.main(["--sizes", *sizes, "--repeat", "1", "--memory-probe", "largest", "--out", str(out)])

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
    assert printed.count("(untimed first runs: run_load delta-rs ") == 3
