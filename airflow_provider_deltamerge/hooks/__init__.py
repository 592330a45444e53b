"""Airflow hooks of the deltamerge provider."""

from __future__ import annotations

from .deltamerge import DeltaMergeHook

__all__ = ["DeltaMergeHook"]
