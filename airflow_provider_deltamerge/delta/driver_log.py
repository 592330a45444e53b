"""A delta-spark table's commits read from the driver, where this process reads the table's log itself.

Delta's history command is a Spark job of its own: about 0.14 s in a warm session, and a delta-spark
load reads the history twice (before it plans, for recovery and the version it plans on; after it
commits, for its commit's version and metrics). Where the table is a path on this machine's file system
and this process is Spark's driver (not a Spark Connect client, whose server may see another disk),
delta-rs reads the same commits from the log in milliseconds, each entry as Delta's history shows it
(`writer.logged_commit` reads either), steadily while other writers commit (the caller reads them with
`rs_history`). Elsewhere, or where delta-rs cannot open the table (a reader feature it lacks), the
caller asks Delta's history.
"""

from __future__ import annotations

import logging

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from .locking import local_path

log = logging.getLogger(__name__)


def log_table(spark, location: str) -> DeltaTable | None:
    """delta-rs's view of the table at `location` (a path, not a metastore name), where the driver reads
    its log (see the module); None where it does not, or where there is no table there yet."""
    if type(spark).__module__.startswith("pyspark.sql.connect") or local_path(location) is None:
        return None
    try:
        return DeltaTable(location)
    except (DeltaError, OSError) as exc:  # no table yet, or a log delta-rs cannot read: Delta's history
        log.debug("the Delta log of %s is read by Spark (%s)", location, exc)
        return None
