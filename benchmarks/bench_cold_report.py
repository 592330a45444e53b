"""The cold regime's table and its targets (P1 cold, P2 fresh and Connect, P7, P8, task wall time)."""

from __future__ import annotations

import statistics

from bench_cold import DLT_AFTER_FIRST_LOAD
from bench_report import _check, checks_table
from cold_run import RUN_LOAD_C1

EDGE = 20  # P8: the median of the first EDGE loads beside that of the last EDGE


def _median(runs: list[dict], key: str = "seconds") -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _case(report: dict, name: str) -> dict | None:
    return next((c for c in report["cases"] if c["case"] == name), None)


def _side(case: dict | None, side: str, key: str = "seconds") -> float | None:
    if case is None or side not in case["sides"]:
        return None
    return _median(case["sides"][side], key)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def edges(loads: list[float]) -> tuple[float, float, float]:
    """(median of the first EDGE loads, of the last EDGE, last / first); fewer loads: their halves."""
    edge = min(EDGE, max(1, len(loads) // 2))
    first, last = statistics.median(loads[:edge]), statistics.median(loads[-edge:])
    return first, last, last / first


def ratios(report: dict) -> list[dict]:
    p1, p2, p7 = _case(report, "P1 upsert"), _case(report, "P2 upsert"), _case(report, "P7 initial load")
    task, p8 = _case(report, "task wall time"), _case(report, "P8 small loads")
    cdc = _case(report, "CDC events")
    size = lambda case: case["size"] if case else "-"  # noqa: E731
    checks = [
        _check(
            "P1 cold run_load / embedded floor",
            "<=",
            1.2,
            _ratio(_side(p1, "run_load"), _side(p1, "floor")),
            f"{size(p1)}, loads only (session start apart)",
        ),
        _check(
            "P2 cold run_load / dlt, clustered",
            "<=",
            1.0,
            _ratio(_side(p2, "run_load"), _side(p2, "dlt")),
            f"{size(p2)}, fresh process",
        ),
        *_with_its_definition(p2),
        *_dlt_after_first_load(p2),
        _check(
            "P2 Connect dlt / run_load, clustered",
            ">=",
            3,
            _ratio(_side(p2, "dlt"), _side(p2, "connect")),
            f"{size(p2)}, fresh client, warm server",
        ),
        _check(
            "P7 initial load run_load / dlt",
            "<=",
            2,
            _ratio(_side(p7, "run_load"), _side(p7, "dlt")),
            f"{size(p7)}; the key-ordered layout's sort: {_seconds(_side(p7, 'floor', 'sort_seconds'))}",
        ),
    ]
    if cdc:
        checks.append(
            _check(
                "CDC events / plain upsert",
                "<=",
                1.5,
                _ratio(_side(cdc, "cdc"), _side(cdc, "cdc_upsert")),
                f"{size(cdc)}: 10% out of order, 5% deletes; sequence_by and apply_as_deletes",
            )
        )
    if p8 and p8["sides"].get("run_load"):
        first, last, growth = edges(p8["sides"]["run_load"][0]["loads"])
        dlt = p8["sides"].get("dlt")
        shown = ""
        if dlt:
            d_first, d_last, d_growth = edges(dlt[0]["loads"])
            shown = f"; dlt {d_first:.2f} -> {d_last:.2f} s ({d_growth:.2f})"
        note = f"{size(p8)}: median {first:.2f} -> {last:.2f} s{shown}"
        checks.append(_check("P8 per-load overhead, last / first", "<=", 1.2, growth, note))
    operator, floor = _side(task, "operator execute"), _side(task, "floor session + merge", "task_seconds")
    note = f"{size(task)}: execute {_seconds(operator)}, floor session + merge {_seconds(floor)}"
    checks.append(_reported("task wall: operator execute / floor", _ratio(operator, floor), note))
    return checks + c1_only_ratios(p1, p2, p7)


def _with_its_definition(p2: dict | None) -> list[dict]:
    """P2 with the change set's definition (py4j calls and Spark's analysis of the lazy DataFrame) timed
    in the load, as runs before the definition was timed apart did, beside dlt's fresh upsert: reported."""
    runs = p2["sides"].get("run_load", []) if p2 else []
    totals = [r["seconds"] + r["define_seconds"] for r in runs if "define_seconds" in r]
    if not totals:
        return []
    note = f"{p2['size']}: its definition {_seconds(_median(runs, 'define_seconds'))}, here in the load"
    ratio = _ratio(statistics.median(totals), _side(p2, "dlt"))
    return [_reported("P2 cold run_load with its input's definition / dlt", ratio, note)]


def _dlt_after_first_load(p2: dict | None) -> list[dict]:
    """P2 beside dlt's upsert timed in its first load's own process (the regime's measure before dlt's
    upsert ran fresh): reported, where that side ran."""
    after_first = _side(p2, DLT_AFTER_FIRST_LOAD)
    if after_first is None:
        return []
    note = f"{p2['size']}: dlt {_seconds(after_first)} there, {_seconds(_side(p2, 'dlt'))} fresh"
    ratio = _ratio(_side(p2, "run_load"), after_first)
    return [_reported("P2 cold run_load / dlt after its first load", ratio, note)]


def c1_only_ratios(p1: dict | None, p2: dict | None, p7: dict | None) -> list[dict]:
    """run_load in a JVM compiling with C1 alone, beside the default's (P1, P7) and dlt (P2, P7): reported,
    as it is an option a DAG chooses, not the default the targets hold to."""
    rows = []
    for case, against in ((p1, "run_load"), (p2, "dlt"), (p7, "dlt")):
        c1, other = _side(case, RUN_LOAD_C1), _side(case, against)
        if c1 is None:
            continue
        sessions = f"session {_seconds(_side(case, RUN_LOAD_C1, 'session_seconds'))}"
        if against == "run_load":
            sessions += f" against {_seconds(_side(case, 'run_load', 'session_seconds'))}"
        name = f"{case['case'].split()[0]} C1 only: run_load / {against}"
        rows.append(_reported(name, _ratio(c1, other), f"{case['size']}: {_seconds(c1)}, {sessions}"))
    return rows


def _reported(name: str, value: float | None, note: str) -> dict:
    return {"name": name, "target": "report", "value": value, "verdict": "-", "note": note}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _shown(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _archive_origin(archive: dict | None) -> str:
    if archive is None:
        return "none (--no-jvm-archive)"
    if archive["seconds"] is None:
        return "the one in place"
    return f"made first in {archive['seconds']} s"


def render(report: dict) -> str:
    archive = report.get("jvm_archive")
    made = _archive_origin(archive)
    lines = [
        "",
        "COLD: each timed load in a fresh process; session start and the definition of the load's input",
        "      DataFrame timed apart (not in 'load s'; dlt's rows, too, are built before its timer);",
        f"      JVM class archive (deltamerge jvm-archive): {made}; sessions start from it where one exists",
        "      cpu s: the load's CPU seconds, Python and the Spark JVM; py cpu s: Python's alone",
        "case              size                side                    load s  session s  define s   cpu s"
        "  py cpu s  jobs  sql  verified",
    ]
    for case in report["cases"]:
        if case["case"] == "P8 small loads":
            continue
        for side, runs in case["sides"].items():
            load = _median(runs, "task_seconds" if side == "floor session + merge" else "seconds")
            jobs = _median(runs, "jobs")
            sql = _median(runs, "sql_executions")
            verified = all(r.get("verified", True) is not False for r in runs)
            lines.append(
                f"{case['case']:<17} {case['size']:<19} {side:<22} {_shown(load, '7.2f'):>7}"
                f"  {_shown(_median(runs, 'session_seconds'), '9.2f'):>9}"
                f"  {_shown(_median(runs, 'define_seconds'), '8.2f'):>8}"
                f"  {_shown(_median(runs, 'cpu_seconds'), '6.2f'):>6}"
                f"  {_shown(_median(runs, 'python_cpu_seconds'), '8.2f'):>8}  {_shown(jobs, '4.0f'):>4}"
                f"  {_shown(sql, '3.0f'):>3}  {verified}"
            )
        base = case.get("base")
        if base:
            lines.append(
                f"{'':<17} (its target built by run_load in a fresh process: {base['seconds']:.2f} s, "
                f"{base.get('jobs')} jobs)"
            )
        if base and base.get("connect_warmup"):
            seconds = ", ".join(f"{run['seconds']:.2f}" for run in base["connect_warmup"])
            lines.append(
                f"{'':<17} (the Connect server warmed by {len(base['connect_warmup'])} untimed client "
                f"loads: {seconds} s)"
            )
    return "\n".join(lines + checks_table("cold target check", report["ratios"]))
