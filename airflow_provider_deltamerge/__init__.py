"""airflow-provider-deltamerge: dlt's loading semantics on Apache Spark and Delta Lake, from Airflow.

The public API, all of it: `run_load` and what it returns, `Incremental`, `LoadRequest`,
`default_session`, `backfill_windows`, `maintain_table`, and every error class. The operators and
the hook are in `airflow_provider_deltamerge.operators` and `.hooks`, where Airflow providers keep
them; the `deltamerge` command in `.cli`.
"""

from __future__ import annotations

from .errors import (
    BatchTooLargeError,
    CastError,
    CatalogError,
    ChangeFeedError,
    ColumnNameError,
    ConfigError,
    ConflictError,
    ContractError,
    CursorColumnMissingError,
    CursorValueMissingError,
    DeltaMergeError,
    DuplicateKeyError,
    ExpectationError,
    InvalidColumnNameError,
    JobFailedError,
    LoadNotRecordedError,
    MissingKeyColumnError,
    NullKeyError,
    NullValueError,
    PartitionValueError,
    RowIdError,
    SchemaError,
    SequenceError,
    SourceError,
    StoreError,
    TableRecreatedError,
    TruncationWarning,
)

__version__ = "0.1.0"

# Loaded on first use, so that importing the package (as DAG files and Airflow's provider discovery
# do) does not pull in Spark, Arrow or delta-rs.
_LAZY = {
    "run_load": "load",
    "LoadInfo": "load.load_info",
    "LoadRequest": "model.request",
    "Incremental": "model.incremental",
    "backfill_windows": "model.backfill",
    "default_session": "spark.session",
    "maintain_table": "load.catalog_maintenance",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BatchTooLargeError",
    "CastError",
    "CatalogError",
    "ChangeFeedError",
    "ColumnNameError",
    "ConfigError",
    "ConflictError",
    "ContractError",
    "ExpectationError",
    "CursorColumnMissingError",
    "CursorValueMissingError",
    "DeltaMergeError",
    "DuplicateKeyError",
    "Incremental",
    "InvalidColumnNameError",
    "JobFailedError",
    "LoadInfo",
    "LoadNotRecordedError",
    "LoadRequest",
    "MissingKeyColumnError",
    "NullKeyError",
    "NullValueError",
    "PartitionValueError",
    "RowIdError",
    "SchemaError",
    "SequenceError",
    "SourceError",
    "StoreError",
    "TableRecreatedError",
    "TruncationWarning",
    "__version__",
    "backfill_windows",
    "default_session",
    "maintain_table",
    "run_load",
]
