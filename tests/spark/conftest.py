"""Every behaviour test in this folder runs once per Delta writer: the conformance suite."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def each_writer(writer_backend):
    return writer_backend
