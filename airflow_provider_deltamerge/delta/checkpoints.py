"""Checkpoints every INTERVAL commits of the tables a load writes with delta-rs, as Delta on Spark makes them.

Opening a Delta table reads its newest checkpoint and then every commit after it, and a load opens its
tables several times (the store's two tables, the target, their recent history). Delta's writer on
Spark checkpoints every 10 commits (`delta.checkpointInterval`'s default); delta-rs only every 100.
So with delta-rs a load's fixed cost grew with the commits since the last checkpoint: 300 loads of 5
rows into one table, each in the same process, went from 0.26 s to 0.37 s a load before each hundredth
commit and back (benchmarks/, P8); with a checkpoint every 10 commits they stayed level.

After its commits to a table, a load makes the checkpoint where they passed a multiple of INTERVAL
and the table sets no interval of its own (delta-rs then checkpoints as the table says). A checkpoint
adds no commit and changes no row: one that fails is logged, the load goes on, and a later one makes it.
"""

from __future__ import annotations

import logging

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from . import hadoop_checksums

log = logging.getLogger(__name__)

INTERVAL = 10  # Delta's default delta.checkpointInterval (delta-rs's is 100)
TABLE_SETTING = "delta.checkpointInterval"


def after_commits(table: DeltaTable, read_version: int) -> None:
    """A checkpoint of `table` where the commits after `read_version` (-1: it was created) reached a
    multiple of INTERVAL. `table` is as its caller's last commit left it: every caller's commit, or its
    check that the commit landed, brings it up to date already, so no further read of the log is made.
    On a local disk, the checksum Spark kept of `_last_checkpoint`, which a checkpoint of delta-rs (its
    own at the table's interval, or this one) rewrites, is removed (`hadoop_checksums`)."""
    version = table.version()
    _checkpoint(table, read_version, version)
    hadoop_checksums.drop_rewritten(table.table_uri)


def _checkpoint(table: DeltaTable, read_version: int, version: int) -> None:
    try:
        if version // INTERVAL <= max(read_version, 0) // INTERVAL:
            return
        if TABLE_SETTING in table.metadata().configuration:
            return
        table.create_checkpoint()
    except (DeltaError, OSError) as exc:
        log.info("no checkpoint of %s made now, left for a later load (%s)", table.table_uri, exc)
        return
    log.info("checkpoint of %s at version %d", table.table_uri, version)
