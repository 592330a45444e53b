"""Named points in a load where a test can make it fail, to prove that nothing is half-applied.

Set DELTAMERGE_FAIL_AT to a step name (see STEPS) to raise InjectedFault there; add
DELTAMERGE_FAIL_MODE=kill to end the process abruptly instead, as a killed task would.
"""

from __future__ import annotations

import os

STEPS = ("extract", "stage", "plan", "commit", "after_commit", "after_state_row")


class InjectedFault(RuntimeError):
    """Raised at the step named by DELTAMERGE_FAIL_AT."""


def reached(step: str) -> None:
    if os.environ.get("DELTAMERGE_FAIL_AT") != step:
        return
    if os.environ.get("DELTAMERGE_FAIL_MODE") == "kill":
        os._exit(137)
    raise InjectedFault(f"fault injected at step {step!r}")
