"""Another load committed between a load's planning and its commit.

`load.checkpoint` is called at each step of a load; at the step "commit" the load has read the table
and planned its change. The racing load runs there once, through the whole of its own load (its own
steps pass through the same hook, which no longer fires), so it commits first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from airflow_provider_deltamerge import load as load_module


@contextmanager
def another_load_commits_first(monkeypatch, racing_load: Callable[[], Any]) -> Iterator[dict]:
    """Within the block, the first load to reach its commit lets `racing_load` run and commit first;
    the yielded dict holds the racing load's result under "load" once it ran."""
    original = load_module.checkpoint
    raced: dict = {}

    def between_plan_and_commit(step: str) -> None:
        original(step)
        if step == "commit" and not raced:
            raced["started"] = True  # set first: the racing load's own commit passes through here
            raced["load"] = racing_load()

    monkeypatch.setattr(load_module, "checkpoint", between_plan_and_commit)
    try:
        yield raced
    finally:
        monkeypatch.setattr(load_module, "checkpoint", original)
    assert "load" in raced, "the racing load never ran: no load reached its commit inside the block"
