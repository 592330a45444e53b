"""SQL parameters (``spark.sql(query, args=...)``) in a session that lists Delta's SQL extension.

Spark 4.1 and later bind a query's ``:name`` / ``?`` markers while parsing it, through the parser's
``parsePlanWithParameters``. Delta's parser extension (``DeltaSqlParser``) does not forward that call,
so in a session with Delta's extension the arguments are dropped and the query fails with
UNBOUND_SQL_PARAMETER, whichever writer the load then uses. Spark's constants-only substitution binds
the same markers in the analyzer instead, which works through any parser: a load turns it on before
its source runs, so a ``{"sql": ...}`` source's window bounds and a callable's own ``args`` stay bound.
"""

from __future__ import annotations

import logging
from typing import Any

from ..model.delta_jars import DELTA_EXTENSION

log = logging.getLogger(__name__)

ANALYZER_BINDING = "spark.sql.legacy.parameterSubstitution.constantsOnly"


def bind_parameters_in_analyzer(spark: Any) -> None:
    """Where the session lists Delta's SQL extension, have Spark bind SQL parameters in the analyzer."""
    if DELTA_EXTENSION not in (spark.conf.get("spark.sql.extensions", None) or ""):
        return
    if (spark.conf.get(ANALYZER_BINDING, None) or "").lower() == "true":
        return
    spark.conf.set(ANALYZER_BINDING, "true")
    log.info(
        "set %s=true: Delta's SQL extension drops parameters Spark binds while parsing; "
        "the analyzer binds them instead",
        ANALYZER_BINDING,
    )
