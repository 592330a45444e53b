"""Delta writers: one interface, two implementations (delta-rs from the driver, delta-spark on the cluster)."""

from __future__ import annotations

import logging

from ..errors import ConfigError
from ..specs import BACKENDS, choice

log = logging.getLogger(__name__)


def select_writer(backend: str, spark):
    """The writer for `backend`; "auto" takes delta-spark when Delta's JVM classes load, else delta-rs."""
    choice("backend", backend, BACKENDS)
    if backend == "delta-spark":
        raise ConfigError(
            "backend",
            "the delta-spark writer is not available in this release yet; use backend='delta-rs' or 'auto'",
        )
    from .delta_rs import DeltaRsWriter

    return DeltaRsWriter()
