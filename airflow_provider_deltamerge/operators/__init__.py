"""Airflow operators of the deltamerge provider."""

from __future__ import annotations

from .backfill import DeltaBackfillOperator
from .maintenance import DeltaMaintenanceOperator
from .merge import DeltaMergeOperator, DeltaScd2Operator

__all__ = ["DeltaBackfillOperator", "DeltaMaintenanceOperator", "DeltaMergeOperator", "DeltaScd2Operator"]
