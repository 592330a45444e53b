"""airflow-provider-deltamerge: dlt's loading semantics on Apache Spark and Delta Lake, from Airflow."""

from __future__ import annotations

from .errors import (
    ConfigError,
    ConflictError,
    DeltaMergeError,
    DuplicateKeyError,
    JobFailedError,
    MissingKeyColumnError,
    NullKeyError,
    SchemaError,
    SourceError,
)

__version__ = "0.1.0"

# Loaded on first use, so that importing the package (as DAG files and Airflow's provider discovery
# do) does not pull in Spark, Arrow or delta-rs.
_LAZY = {
    "run_load": "job",
    "LoadInfo": "job",
    "Incremental": "incremental",
    "backfill_windows": "incremental",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ConfigError",
    "ConflictError",
    "DeltaMergeError",
    "DuplicateKeyError",
    "JobFailedError",
    "Incremental",
    "LoadInfo",
    "MissingKeyColumnError",
    "NullKeyError",
    "SchemaError",
    "SourceError",
    "__version__",
    "backfill_windows",
    "run_load",
]
