"""LoadInfo: what a load did, as run_load returns it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LoadInfo:
    """What a load did. `load_id` is None when there was nothing to load (no commit, no load record)."""

    load_id: str | None
    table_path: str
    table_name: str
    table_version: int | None
    metrics: dict[str, Any] = field(default_factory=dict)
    window: dict[str, Any] | None = None

    @property
    def loaded(self) -> bool:
        return self.load_id is not None
