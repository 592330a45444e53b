"""Object store credentials for Spark's own reads and writes (Hadoop's s3a and abfs file systems)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

log = logging.getLogger(__name__)


def set_hadoop_settings(spark, settings: Mapping[str, str]) -> None:
    """Set Hadoop configuration keys (``fs.s3a.*``, ``fs.azure.*``) in the running session, where Spark's
    own reads and the delta-spark writer find them. A Spark Connect session has no handle on its server's
    Hadoop configuration: there the server is configured on its own side. Values are never logged."""
    if not settings:
        return
    context = getattr(spark, "sparkContext", None) if not _is_connect(spark) else None
    if context is None:
        log.info("Spark Connect: the server's own Hadoop settings reach the object store, not this load's")
        return
    configuration = context._jsc.hadoopConfiguration()
    for key, value in settings.items():
        configuration.set(key, value)
    log.info("Hadoop settings for the dataset's object store: %s", ", ".join(sorted(settings)))


def _is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")
