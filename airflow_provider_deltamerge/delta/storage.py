"""Errors of object stores: a store that refuses a read says so in one readable line, without secrets."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import StoreError
from ..spec.secrets import credential_values, redact_text

_ANSWER_LINES = 6  # delta-rs nests the store's answer over several lines; the first ones say what failed
_TERMINAL_COLOURS = re.compile(r"\x1b\[[0-9;]*m")
LOAD_UNCHANGED = "Nothing was loaded."


def unreadable_store(
    path: str, exc: Exception, storage_options: dict[str, str] | None, outcome: str = LOAD_UNCHANGED
) -> StoreError:
    """A StoreError saying that the store refused to read `path`, with the first lines of its answer
    (credentials removed): wrong or missing credentials, an unknown bucket or container, no network.
    `outcome` says what the refusal left undone."""
    text = _TERMINAL_COLOURS.sub("", str(exc))
    lines = [line.strip().lstrip("\u21b3 ") for line in text.splitlines() if line.strip()]
    answer = redact_text(" / ".join(lines[:_ANSWER_LINES]), credential_values(storage_options or {}))
    return StoreError(
        path,
        f"could not be read from its object store ({type(exc).__name__}: {answer}). {outcome} "
        "Check the dataset's credentials (storage_options, or the storage connection) and that its "
        "bucket or container exists.",
    )


@contextmanager
def store_errors(path: str, storage_options: dict[str, str] | None, outcome: str) -> Iterator[None]:
    """Inside the block, an object store's refusal (an OSError or a deltalake error other than a commit
    conflict) becomes one StoreError, as `unreadable_store` words it; errors of a local path pass as
    they are."""
    from deltalake.exceptions import CommitFailedError, DeltaError

    from .locking import local_path

    try:
        yield
    except (DeltaError, OSError) as exc:
        if local_path(path) is not None or isinstance(exc, CommitFailedError):
            raise
        raise unreadable_store(path, exc, storage_options, outcome) from None
