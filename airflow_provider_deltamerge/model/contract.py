"""dlt's schema contract (`schema_contract=`): how a table's schema may change in a load (pure).

A mode for everything ("evolve", "freeze", "discard_row", "discard_value") or a dict over the entities
`tables` (a table that does not exist yet), `columns` (a column the table lacks) and `data_type` (a value
that needs a variant column). Unnamed entities evolve; for `tables`, discard_value discards the
rows as discard_row does. The modes, from loosest to strictest:
evolve (change the schema), discard_value (drop the new values), discard_row (drop the rows carrying
them), freeze (refuse the load, naming what is new).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ConfigError
from .checks import choice

MODES = ("evolve", "discard_value", "discard_row", "freeze")  # loosest first
ENTITIES = ("tables", "columns", "data_type")


@dataclass(frozen=True)
class SchemaContract:
    tables: str = "evolve"
    columns: str = "evolve"
    data_type: str = "evolve"

    @classmethod
    def parse(cls, value: Any) -> SchemaContract:
        if value is None:
            return cls()
        if isinstance(value, SchemaContract):
            return value
        if isinstance(value, str):
            mode = choice("schema_contract", value, MODES)
            return cls(mode, mode, mode)
        if not isinstance(value, dict):
            raise ConfigError("schema_contract", f"{value!r} must be a mode or a dict over {list(ENTITIES)}")
        unknown = sorted(set(value) - set(ENTITIES))
        if unknown:
            raise ConfigError("schema_contract", f"unknown entities {unknown}; valid: {', '.join(ENTITIES)}")
        modes = {k: choice(f"schema_contract.{k}", v, MODES) for k, v in value.items() if v is not None}
        return cls(**modes)

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @property
    def is_default(self) -> bool:
        return self == SchemaContract()

    def at_least(self, other: SchemaContract) -> SchemaContract:
        """Per entity, the stricter of this contract and `other` (a run's conf may tighten, never loosen)."""
        return SchemaContract(
            **{e: max(getattr(self, e), getattr(other, e), key=MODES.index) for e in ENTITIES}
        )


def check_schema_contract(value: Any) -> dict[str, str] | None:
    """The canonical form of `schema_contract`: its dict, or None for the default (evolve everywhere)."""
    contract = SchemaContract.parse(value)
    return None if contract.is_default else contract.to_dict()


def tightened(declared: Any, override: Any) -> dict[str, str] | None:
    """The contract a run uses when its conf sets `schema_contract` over the task's own: the stricter
    mode per entity, so dag_run.conf can only tighten the contract."""
    merged = SchemaContract.parse(declared).at_least(SchemaContract.parse(override))
    return None if merged.is_default else merged.to_dict()
