"""A small batch's one query runs with less code generation, where the session leaves it unset.

Spark compiles each query's stages into Java classes (Janino) before it runs them. In a fresh JVM, as
every Airflow task's local session is, that compiler runs cold itself: it took about 0.25 s of a first
job collecting ten rows, and about 0.15 s of a fresh task's upsert of 40k rows (benchmarks/, the cold
regime). A Spark Connect server compiles again for every new client session, as each session has its
own class loader, which keys Spark's cache of compiled classes: three classes, about 0.1 s, of each
fresh client's upsert of 40k rows. So:

- every batch staging collects to the driver (Spark estimates it at 64 MiB or less) is planned without
  whole-stage code generation: interpreted stages run as fast once the JVM is warm (a collection of
  100k rows and one of 1M rows each took 2% longer in a warm session);
- so is a load's checkpoint of a batch Spark estimates at SMALL_BATCH_BYTES or less (`sized_codegen`:
  staging's checkpoint of a batch its plan reads back, as a delete-insert does; the cursor step's),
  its expressions still compiled: a fresh task's delete-insert of 100k rows (1.4 MiB) took about
  0.3 s less, and in a warm session a deduplicating checkpoint of 100k rows took 0.29 s against 0.35 s
  compiled, of 2M rows (17 MiB) 3.18 s against 3.46 s;
- a batch Spark estimates at INTERPRET_ESTIMATE_BYTES or less also has its expressions interpreted
  (`spark.sql.codegen.factoryMode=NO_CODEGEN`, Spark's own interpreted path, the one it falls back to
  where a generated class fails to compile): nothing is compiled for it. Measured on 2 cores: a fresh
  task's upsert of 40k rows (estimated at 1.1 MiB) 2.10 -> 1.91 s, a fresh Connect client's
  0.64 -> 0.58 s; at 100k rows (2.9 MiB) a fresh task gained nothing, and in a warm session the
  interpreted expressions took 16% longer for 100k rows and 44% longer for 1M, so larger batches
  compile.

The settings are the session's, read as the query is planned: set for the one query and removed after
it. Where the session sets either itself, to any value, its settings stand and neither is changed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

log = logging.getLogger(__name__)

WHOLE_STAGE = "spark.sql.codegen.wholeStage"
FACTORY_MODE = "spark.sql.codegen.factoryMode"
INTERPRET_ESTIMATE_BYTES = 2 * 2**20
SMALL_BATCH_BYTES = 64 * 2**20  # as a batch staging collects to the driver (spark/profile.py)


@contextlib.contextmanager
def small_batch_codegen(spark, what: str, estimated_bytes: int, interpret: bool = True) -> Iterator[None]:
    """Queries run inside without whole-stage code generation, and with interpreted expressions if
    `interpret` and `estimated_bytes` is at most INTERPRET_ESTIMATE_BYTES, unless the session set either
    setting; `what` names them in the log."""
    if any(spark.conf.get(key, None) is not None for key in (WHOLE_STAGE, FACTORY_MODE)):
        yield
        return
    settings = {WHOLE_STAGE: "false"}
    how = "without whole-stage code generation"
    if interpret and estimated_bytes <= INTERPRET_ESTIMATE_BYTES:
        settings[FACTORY_MODE] = "NO_CODEGEN"
        how += ", its expressions interpreted"
    log.info("%s: planned %s (a small batch; %s unset)", what, how, " and ".join(settings))
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in settings:
            spark.conf.unset(key)


@contextlib.contextmanager
def sized_codegen(spark, what: str, estimated_bytes: int | None) -> Iterator[None]:
    """Queries run inside without whole-stage code generation where Spark estimates the batch at
    SMALL_BATCH_BYTES or less (their expressions still compiled); else with the session's own settings
    (a larger batch, or one of unknown size)."""
    if estimated_bytes is None or estimated_bytes > SMALL_BATCH_BYTES:
        yield
        return
    with small_batch_codegen(spark, what, estimated_bytes, interpret=False):
        yield
