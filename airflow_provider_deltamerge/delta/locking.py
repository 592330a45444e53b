"""Serialise the creation of a Delta table on a local file system.

Two writers creating the same table at the same moment can both write its first commit file, and one of
them silently replaces the other (seen with delta-rs 1.6 on local disk). After the first version exists,
Delta's own conflict checks take over, so only creation needs the lock. Object stores are left alone:
their first commit goes through the store's conditional put.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

from ..model.naming import LOCK_SUFFIX


def local_path(uri: str) -> str | None:
    """The file system path of a local table location, None for a remote URI."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme == "file" else uri
    if len(parsed.scheme) == 1:  # a Windows drive letter, not a scheme
        return uri
    return None


@contextmanager
def creation_lock(table_uri: str) -> Iterator[None]:
    """Hold an exclusive lock named after the table while it is created (a no-op for remote tables)."""
    path = local_path(table_uri)
    if path is None:
        yield
        return
    parent, name = os.path.split(os.path.abspath(path.rstrip("/")))
    os.makedirs(parent, exist_ok=True)
    with open(os.path.join(parent, f".{name}{LOCK_SUFFIX}"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
