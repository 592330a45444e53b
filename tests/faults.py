"""Fault points for the crash tests, injected from here: nothing of this ships in the package.

A load calls `load.checkpoint(step)` at each of its steps, a no-op. `install()` replaces it with
`checkpoint` below, which fails at the step named by DELTAMERGE_FAIL_AT: it raises InjectedFault, or
with DELTAMERGE_FAIL_MODE=kill ends the process abruptly, as a killed task would. The test session
installs it (tests/conftest.py); child processes install it through `tests/job_with_faults.py` or
their own call to `install()`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

STEPS = ("extract", "stage", "plan", "commit", "after_commit", "after_state_row")
FAIL_AT = "DELTAMERGE_FAIL_AT"
FAIL_MODE = "DELTAMERGE_FAIL_MODE"


class InjectedFault(RuntimeError):
    """Raised at the step named by DELTAMERGE_FAIL_AT."""


def checkpoint(step: str) -> None:
    if os.environ.get(FAIL_AT) != step:
        return
    if os.environ.get(FAIL_MODE) == "kill":
        os._exit(137)
    raise InjectedFault(f"fault injected at step {step!r}")


def install() -> None:
    """Make this process's loads fail where DELTAMERGE_FAIL_AT says."""
    from airflow_provider_deltamerge import load

    load.checkpoint = checkpoint


def killed_child(code: str, arguments: dict, step: str) -> subprocess.CompletedProcess:
    """Run `code` (Python that installs these fault points and loads with the JSON `arguments` it is
    given as its one argument) in a child process from the repository, killed at `step`."""
    root = Path(__file__).resolve().parents[1]
    environment = {
        **os.environ,
        FAIL_AT: step,
        FAIL_MODE: "kill",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-c", code, json.dumps(arguments)],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
