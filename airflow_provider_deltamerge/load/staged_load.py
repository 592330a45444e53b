"""A load between staging and its commit: what stays the same if the commit has to be planned again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..delta import store
from ..model.request import LoadRequest
from .step_log import StepLog


@dataclass(frozen=True)
class StagedLoad:
    """A load between staging and its commit: what stays the same if the commit has to be planned again."""

    request: LoadRequest
    load_id: str
    staged: Any  # spark.stage.StagedBatch
    window: Any  # model.window.Window or None
    new_state: dict | None
    stored: store.StoreSnapshot
    steps: StepLog
    schema: Any  # spark.schema_steps.SchemaStep
    nested: Any = None  # nested_tables.NestedBatch: the child tables, committed before this table
    superseded: tuple[str, ...] = ()  # loads whose rows this one replaces (plan/reruns.py)
    interrupted: tuple[str, ...] = ()  # attempts of this run that committed child tables only (nested_tables)
    expected: Any = None  # expectations.Outcome: the expectations' metrics and the rows to quarantine

    @property
    def window_dict(self) -> dict | None:
        return self.window.as_dict() if self.window is not None else None
