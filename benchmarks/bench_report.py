"""The benchmark's table and its P1-P6 ratios against the targets, PASS or FAIL."""

from __future__ import annotations

RUN_LOAD, RUN_LOAD_SPARK, FLOOR, SPARK_MERGE, DLT = (
    "run_load delta-rs",
    "run_load delta-spark",
    "floor",
    "spark merge",
    "dlt",
)
MIB = 2**20


def _median(size: dict, side: str) -> float | None:
    found = size["sides"].get(side)
    return found["median"] if found else None


def _largest(sizes: list[dict], kind: str) -> dict | None:
    of_kind = [s for s in sizes if s["kind"] == kind]
    return max(of_kind, key=lambda s: (s["target_rows"], s["changed_rows"])) if of_kind else None


def _check(name: str, comparison: str, bound: float, value: float | None, note: str) -> dict:
    """One target: `value` against `bound` by `comparison` ("<=" or ">="), PASS, FAIL or n/a."""
    target = f"{comparison} {bound}"
    if value is None:
        return {"name": name, "target": target, "value": None, "verdict": "n/a", "note": note}
    passes = value <= bound if comparison == "<=" else value >= bound
    return {
        "name": name,
        "target": target,
        "value": value,
        "verdict": "PASS" if passes else "FAIL",
        "note": note,
    }


def ratios(sizes: list[dict]) -> list[dict]:
    uniform, clustered = _largest(sizes, "uniform"), _largest(sizes, "clustered")
    smallest_uniform = min(
        (s for s in sizes if s["kind"] == "uniform"), key=lambda s: s["target_rows"], default=None
    )
    checks = []
    if smallest_uniform:
        ours, floor = _median(smallest_uniform, RUN_LOAD), _median(smallest_uniform, FLOOR)
        checks.append(
            _check(
                "P1 run_load / embedded floor",
                "<=",
                1.2,
                ours / floor if floor else None,
                smallest_uniform["size"],
            )
        )
    if clustered:
        ours, dlt = _median(clustered, RUN_LOAD), _median(clustered, DLT)
        checks.append(
            _check(
                "P2 dlt / run_load, clustered",
                ">=",
                3,
                dlt / ours if dlt else None,
                clustered["size"],
            )
        )
    if uniform:
        ours, dlt = _median(uniform, RUN_LOAD), _median(uniform, DLT)
        checks.append(
            _check(
                "P2 run_load / dlt, uniform",
                "<=",
                1.0,
                ours / dlt if dlt else None,
                uniform["size"],
            )
        )
    if clustered:
        removed = clustered["sides"][RUN_LOAD]["last"]["files_removed"]
        minimal = clustered["minimal_files"]
        checks.append(
            _check(
                "P3 files rewritten / minimal, clustered",
                "<=",
                1.5,
                removed / minimal if minimal and removed is not None else None,
                f"{clustered['size']}: {removed} removed, {minimal} minimal, "
                f"of {clustered['target_files']} files",
            )
        )
    probed = [s for s in sizes if _growth_per_batch_byte(s) is not None]
    worst = max(probed, key=_growth_per_batch_byte, default=None)
    value, note = None, "no size measured (memory_probe.py)"
    if worst is not None:
        batch = worst["sides"][FLOOR]["last"]["arrow_bytes"]
        growth = worst["driver_memory"]["driver_growth"]
        value = growth / batch
        note = f"worst size {worst['size']}: +{growth / MIB:,.0f} MiB for a {batch / MIB:,.0f} MiB batch"
    checks.append(_check("P4 driver peak growth / batch Arrow size", "<=", 2, value, note))
    pair = _doubling_pair(sizes)
    if pair:
        small, large = pair
        checks.append(
            _check(
                "P5 same change, table x2: time ratio",
                "<=",
                1.3,
                _median(large, RUN_LOAD) / _median(small, RUN_LOAD),
                f"{large['size']} vs {small['size']}",
            )
        )
    spark_sizes = [s for s in sizes if SPARK_MERGE in s["sides"]]
    value = None
    if spark_sizes:
        value = max(_median(s, RUN_LOAD_SPARK) / _median(s, SPARK_MERGE) for s in spark_sizes)
    checks.append(
        _check(
            "P6 run_load delta-spark / hand-written Spark MERGE",
            "<=",
            1.2,
            value,
            "needs Delta's jars (--delta-jars)" if value is None else "worst size",
        )
    )
    return checks


def _growth_per_batch_byte(size: dict) -> float | None:
    """run_load's driver growth (fresh process) per byte of the batch as Arrow (the floor's batch)."""
    batch = size["sides"].get(FLOOR, {}).get("last", {}).get("arrow_bytes")
    growth = (size.get("driver_memory") or {}).get("driver_growth")
    return growth / batch if batch and growth is not None else None


def _doubling_pair(sizes: list[dict]) -> tuple[dict, dict] | None:
    for small in sizes:
        for large in sizes:
            same_change = (small["changed_rows"], small["kind"]) == (large["changed_rows"], large["kind"])
            if same_change and large["target_rows"] == 2 * small["target_rows"]:
                return small, large
    return None


def _shown_growth(size: dict) -> str:
    memory = size.get("driver_memory") or {}
    growth, floor = memory.get("driver_growth"), memory.get("floor_growth")
    if growth is None:
        return "-"
    return f"+{growth / MIB:,.0f} MiB" + ("" if floor is None else f", floor's +{floor / MIB:,.0f} MiB")


def _shown_warmups(size: dict) -> str:
    return ", ".join(
        f"{side} {' '.join(f'{seconds:.2f}' for seconds in result['warmup'])} s"
        for side, result in size["sides"].items()
        if result.get("warmup")
    )


def render(report: dict) -> str:
    lines = [
        "",
        "WARM: every side in this one process, after one untimed run of each (--warmup)",
        "size                     side                   median s   min s   max s  peak tree MB"
        "  files +/-   verified",
    ]
    for size in report["sizes"]:
        for side, result in size["sides"].items():
            last = result["last"]
            files = f"{last.get('files_added')}/{last.get('files_removed')}"
            lines.append(
                f"{size['size']:<24} {side:<22} {result['median']:8.2f} {result['min']:7.2f} "
                f"{result['max']:7.2f}"
                f"  {last['peak_rss_tree'] / MIB:12,.0f}  {files:>9}   {size['verified']}"
            )
        lines.append(
            f"{'':<24} (initial load by run_load: {size['initial_load_seconds']:.2f} s, "
            f"{size['target_files']} files; minimal files for the change: {size['minimal_files']})"
        )
        lines.append(f"{'':<24} (driver growth, a fresh process each: run_load {_shown_growth(size)})")
        if warmups := _shown_warmups(size):
            lines.append(f"{'':<24} (untimed first runs: {warmups})")
    return "\n".join(lines + checks_table("target check", report["ratios"]))


def checks_table(title: str, checks: list[dict]) -> list[str]:
    """The targets' lines: name, value, target, verdict and note."""
    lines = ["", f"{title:<50}   value     target   verdict"]
    for check in checks:
        value = "-" if check["value"] is None else f"{check['value']:.2f}"
        lines.append(
            f"{check['name']:<50} {value:>7}   {check['target']:<8} {check['verdict']:<5}  {check['note']}"
        )
    return lines
