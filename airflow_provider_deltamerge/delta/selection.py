"""Which Delta writer a load gets: delta-spark where Delta's JVM classes load, else delta-rs; with both,
backend "auto" takes delta-rs for a batch Spark sizes as small, where merging it from the driver is faster
than Delta's MERGE on the cluster, and delta-spark for a larger one, or one Spark cannot size."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from ..errors import ConfigError
from ..model.checks import choice
from ..model.options import BACKENDS
from ..model.storage import unsafe_commits
from .delta_rs import DeltaRsWriter
from .delta_spark import DeltaSparkWriter
from .delta_spark_status import delta_spark_status
from .spark_file_systems import missing_file_system_advice, path_scheme, spark_reaches

log = logging.getLogger(__name__)

# The batch (Spark's estimate of its bytes) up to which "auto" takes delta-rs where both writers are
# available; measured by benchmarks/scale_path.py (docs/PERFORMANCE.md). The environment variable,
# a number of MiB, overrides it in every process that reads it (0: delta-spark wherever it is available).
AUTO_DELTA_RS_MAX_ENV = "DELTAMERGE_AUTO_DELTA_RS_MAX_MB"
AUTO_DELTA_RS_MAX_MB = 64.0  # staging collects a batch whole up to 64 MiB (load/staged_arrow.py)


def select_writer(
    backend: str,
    spark,
    storage_options: dict[str, str] | None = None,
    batch_bytes: Callable[[], int | None] | None = None,
    table_path: str | None = None,
):
    """The writer for `backend`; "auto" takes delta-spark when Delta's JVM classes load (and, given the
    `table_path`, Spark's Hadoop has a file system for it), else delta-rs.
    Given `batch_bytes` (Spark's estimate of the batch, asked only where needed), "auto" with both writers
    takes delta-rs for a batch of at most `auto_delta_rs_max_bytes()` (`by_batch_size`).
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
    if available and table_path is not None:
        available, why = _reaches_table(backend, spark, table_path, why)
    if available and backend == "auto" and batch_bytes is not None:
        return by_batch_size(spark, storage_options, batch_bytes)
    if available:
        log.info("writer delta-spark (backend %r): %s", backend, why)
        return DeltaSparkWriter(spark)
    log.info("writer delta-rs (backend 'auto'): %s", why)
    return DeltaRsWriter(storage_options)


def _reaches_table(backend: str, spark, table_path: str, classes_why: str) -> tuple[bool, str]:
    """(available, why) for delta-spark once Delta's classes load: whether Spark's Hadoop reaches the
    table's path. "delta-spark" where it does not is refused before anything is read or committed."""
    reaches, why = spark_reaches(spark, table_path)
    if reaches:
        return True, classes_why
    scheme = path_scheme(table_path)
    needs = missing_file_system_advice(scheme)
    if backend == "delta-spark":
        raise ConfigError(
            "backend",
            f"'delta-spark' writes {scheme}:// tables through the Spark session's Hadoop file systems, but "
            f"{why}. Give the session {needs}; or use backend='delta-rs' (or 'auto', which then takes "
            "delta-rs). Nothing was read or committed",
        )
    return False, f"Delta's classes load, but {why}: delta-rs reaches it ({needs} would let delta-spark)"


def by_batch_size(spark, storage_options: dict[str, str] | None, batch_bytes: Callable[[], int | None]):
    """Where both writers are available: delta-rs for a batch Spark estimates at most the threshold, else
    (larger, or of a size Spark cannot tell) delta-spark, whose MERGE runs on the executors. Logged, why."""
    limit = auto_delta_rs_max_bytes()
    estimate = batch_bytes() if limit > 0 else None
    threshold = f"{limit / 2**20:g} MiB ({AUTO_DELTA_RS_MAX_ENV} sets it)"
    if estimate is not None and estimate <= limit:
        log.info(
            "writer delta-rs for this batch (backend 'auto'): Spark estimates it at %s, at most %s: "
            "delta-rs merging it from the driver is faster than Delta's MERGE on the cluster",
            _mib(estimate),
            threshold,
        )
        return DeltaRsWriter(storage_options)
    if limit == 0:
        why = f"{AUTO_DELTA_RS_MAX_ENV} is 0: Delta's MERGE wherever Delta is available"
    elif estimate is None:
        why = f"Spark cannot size it (threshold {threshold}): Delta's MERGE runs it on the cluster"
    else:
        why = f"Spark estimates it at {_mib(estimate)}, over {threshold}: Delta's MERGE runs it there"
    log.info("writer delta-spark for this batch (backend 'auto'): %s, the driver never holding it", why)
    return DeltaSparkWriter(spark)


def _mib(size: int) -> str:
    return f"{size / 2**20:,.2f} MiB"


def auto_delta_rs_max_bytes() -> int:
    """The largest batch "auto" gives delta-rs where delta-spark is available: AUTO_DELTA_RS_MAX_MB, or
    the MiB the environment's DELTAMERGE_AUTO_DELTA_RS_MAX_MB says; ConfigError where it is no number."""
    text = os.environ.get(AUTO_DELTA_RS_MAX_ENV, "").strip()
    try:
        mib = float(text) if text else AUTO_DELTA_RS_MAX_MB
    except ValueError:
        mib = -1.0
    if not mib >= 0 or mib == float("inf"):
        raise ConfigError(
            AUTO_DELTA_RS_MAX_ENV,
            f"{text!r} is not a number of MiB; set it to 0 or more (0: delta-spark wherever available), "
            "or unset it",
        )
    return int(mib * 2**20)
