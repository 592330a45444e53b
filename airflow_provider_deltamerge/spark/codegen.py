"""A small batch's one query runs without whole-stage code generation, where the session leaves it unset.

Spark compiles each query's stages into Java classes (Janino) before it runs them. In a fresh JVM, as
every Airflow task's local session is, that compiler runs cold itself: it took about 0.25 s of a first
job collecting ten rows, and about 0.15 s of a fresh task's upsert of 40k rows (benchmarks/, the cold
regime). The batches staging collects to the driver are small (Spark estimates them at 64 MiB or less),
and interpreted they run as fast once the JVM is warm: a collection of 100k rows and one of 1M rows each
took 2% longer in a warm session.

The setting is the session's, read as the query is planned: set for the one query and removed after
it. Where the session sets `spark.sql.codegen.wholeStage` itself, either way, its setting stands.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

log = logging.getLogger(__name__)

WHOLE_STAGE = "spark.sql.codegen.wholeStage"


@contextlib.contextmanager
def without_whole_stage(spark, what: str) -> Iterator[None]:
    """Queries run inside run interpreted, unless the session set WHOLE_STAGE; `what` names them in the
    log."""
    if spark.conf.get(WHOLE_STAGE, None) is not None:
        yield
        return
    log.info("%s: planned without whole-stage code generation (a small batch; %s unset)", what, WHOLE_STAGE)
    spark.conf.set(WHOLE_STAGE, "false")
    try:
        yield
    finally:
        spark.conf.unset(WHOLE_STAGE)
