"""How many generated examples a property test runs (marker `property`).

Each example of the CDC and retry properties is several real Spark loads, some stopped and retried, so
the suite runs a few per test, within its time budget. DELTAMERGE_PROPERTY_SCALE multiplies them for a
longer search, e.g. DELTAMERGE_PROPERTY_SCALE=5 before a release or after changing the semantics.
"""

from __future__ import annotations

import os

SCALE = "DELTAMERGE_PROPERTY_SCALE"


def examples(default: int) -> int:
    """`default` times the scale (1 unless set), at least one."""
    return max(1, round(default * float(os.environ.get(SCALE, "1"))))
