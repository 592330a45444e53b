"""Shared fixtures: one real local SparkSession for the whole run, and a fresh dataset folder per test."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from airflow_provider_deltamerge.session import default_session

    session = default_session("local[2]", {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    yield session
    session.stop()


@pytest.fixture
def dataset(tmp_path):
    """A base location for a test's tables, as a plain path string."""
    return str(tmp_path / "lake")
