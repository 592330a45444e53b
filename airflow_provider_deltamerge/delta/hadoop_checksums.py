"""Hadoop's checksum of a local table's `_last_checkpoint`, removed where delta-rs rewrote the file.

Spark writes a table on a local disk (a `file:` path) through Hadoop's checksummed local file system: a
hidden `.<name>.crc` beside each file it writes, checked on every later read of that file. delta-rs
neither writes nor reads them, and of the files of a log it rewrites one at a path Spark wrote first:
`_last_checkpoint`, at every checkpoint it makes (its own at the table's `delta.checkpointInterval`,
`delta/checkpoints.py`'s, maintenance's) after one of Spark's. The checksum left beside it no longer
matches: each new reader of the table on Spark then retries the file for three seconds, with warnings,
before listing the log instead. Hadoop reads a file that has no checksum without checking it, so after
delta-rs writes to a local table that checksum is removed. Object stores keep none. (delta-rs writes no
checkpoint where one of that version exists, and every other file of the log has a name of its own.)
"""

from __future__ import annotations

import logging
import os
from urllib.parse import unquote

from .locking import local_path

log = logging.getLogger(__name__)

LAST_CHECKPOINT = "_last_checkpoint"


def drop_rewritten(table_uri: str) -> None:
    """Remove the Hadoop checksum of `_last_checkpoint`, which delta-rs may just have rewritten, from the
    log of the local table at `table_uri`; nothing for a remote one."""
    folder = local_path(table_uri)
    if folder is None:
        return
    if table_uri.startswith("file:"):
        folder = unquote(folder)  # delta-rs spells a table's location as a URL
    checksum = os.path.join(folder, "_delta_log", f".{LAST_CHECKPOINT}.crc")
    try:
        os.remove(checksum)
    except FileNotFoundError:
        pass
    except OSError as exc:  # the file itself is right; Spark's readers only take longer to read the log
        log.warning("could not remove %s, which Spark may find stale (%s)", checksum, exc)
