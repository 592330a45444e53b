"""How change events arrive in the property tests: some sent twice, in a random order, cut into
batches, some loads stopped at a step and retried. The tests assert the table depends on none of it."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

from tests.faults import FAIL_AT, InjectedFault


def arrival_batches(events: list, batches: int, seed: int, *, replay: bool = False) -> list[list]:
    """The events (up to two of them twice, by the seed) shuffled and cut into up to `batches` batches;
    with `replay`, one of the batches sent again at the end."""
    draw = random.Random(seed)
    sent = events + draw.sample(events, k=min(seed % 3, len(events)))
    draw.shuffle(sent)
    cuts = sorted(draw.sample(range(1, len(sent)), k=min(batches - 1, len(sent) - 1)))
    loaded = [sent[start:end] for start, end in zip([0, *cuts], [*cuts, len(sent)], strict=True)]
    return loaded + [draw.choice(loaded)] if replay else loaded


# The steps a load of change events can be stopped at (tests/faults.py), with None for no stop.
FAULT_STEPS = (
    None,
    None,
    "plan",
    "after_tombstones",
    "after_events",
    "commit",
    "after_commit",
    "after_state_row",
)


def delivered(load: Callable[[list], Any], batches: list[list], seed: int) -> None:
    """Each batch loaded with `load`; some, by the seed, first stopped at a step of their load as a killed
    task is, and then loaded again as its retry is. A step the load does not reach stops nothing."""
    draw = random.Random(seed + 1_000_003)
    for batch in batches:
        step = draw.choice(FAULT_STEPS)
        if step is not None:
            os.environ[FAIL_AT] = step
            try:
                load(batch)
            except Exception as exc:  # noqa: BLE001 - only the injected fault, possibly wrapped, is expected
                if not _injected(exc):
                    raise
            finally:
                del os.environ[FAIL_AT]
        load(batch)


def _injected(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, InjectedFault):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
