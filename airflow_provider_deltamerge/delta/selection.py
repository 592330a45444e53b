"""Which Delta writer a load gets: delta-spark where Delta's JVM classes load, else delta-rs."""

from __future__ import annotations

import logging

from ..errors import ConfigError
from ..model.checks import choice
from ..model.options import BACKENDS
from ..model.storage import unsafe_commits
from .delta_rs import DeltaRsWriter
from .delta_spark import DeltaSparkWriter, delta_spark_status

log = logging.getLogger(__name__)


def select_writer(backend: str, spark, storage_options: dict[str, str] | None = None):
    """The writer for `backend`; "auto" takes delta-spark when Delta's JVM classes load, else delta-rs.
    `storage_options` go to delta-rs; delta-spark reaches object stores through Spark's Hadoop settings."""
    choice("backend", backend, BACKENDS)
    if unsafe_commits(storage_options):
        log.warning(
            "the storage options turn S3's commit coordination off (unsafe rename, or conditional put "
            "disabled): concurrent loads of one table can overwrite each other's commits"
        )
    if backend == "delta-rs":
        return DeltaRsWriter(storage_options)
    available, why = delta_spark_status(spark)
    if backend == "delta-spark" and not available:
        raise ConfigError(
            "backend",
            f"'delta-spark' needs Delta Lake's JVM classes in the Spark session, but {why}. Provide local "
            "jars when the session is built: default_session(delta_jars=[...delta-spark and delta-storage "
            "jars...]), or spark.jars / spark-submit --jars, with "
            "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension and "
            "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog; "
            "or use backend='delta-rs' or 'auto'",
        )
    if available:
        log.info("writer delta-spark (backend %r): %s", backend, why)
        return DeltaSparkWriter(spark)
    log.info("writer delta-rs (backend 'auto'): %s", why)
    return DeltaRsWriter(storage_options)
