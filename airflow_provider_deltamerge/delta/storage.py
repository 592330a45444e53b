"""Errors of object stores: a store that refuses a read, or fails a write after its client's own retries,
says so in one readable StoreError naming the table, without secrets."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import StoreError
from ..model.secrets import credential_values, redact_text

_ANSWER_LINES = 6  # delta-rs nests the store's answer over several lines; the first ones say what failed
_TERMINAL_COLOURS = re.compile(r"\x1b\[[0-9;]*m")
LOAD_UNCHANGED = "Nothing was loaded."


def _answer(exc: Exception, storage_options: dict[str, str] | None) -> str:
    """The first lines of a store's answer, as one line, credentials removed."""
    text = _TERMINAL_COLOURS.sub("", str(exc))
    lines = [line.strip().lstrip("\u21b3 ") for line in text.splitlines() if line.strip()]
    return redact_text(" / ".join(lines[:_ANSWER_LINES]), credential_values(storage_options or {}))


def unreadable_store(
    path: str, exc: Exception, storage_options: dict[str, str] | None, outcome: str = LOAD_UNCHANGED
) -> StoreError:
    """A StoreError saying that the store refused to read `path`, with the first lines of its answer
    (credentials removed): wrong or missing credentials, an unknown bucket or container, no network.
    `outcome` says what the refusal left undone."""
    return StoreError(
        path,
        f"could not be read from its object store ({type(exc).__name__}: {_answer(exc, storage_options)}). "
        f"{outcome} Check the dataset's credentials (storage_options, or the storage connection) and that "
        "its bucket or container exists.",
    )


# How the object store client (Rust's object_store, under delta-rs) words a request that failed after its
# own retries: a connection reset, a throttled or refused request (503 SlowDown), a timeout.
_STORE_FAILURE = re.compile(
    r"Generic (?:S3|MicrosoftAzure|GCS|HTTP) error|Error performing (?:GET|PUT|POST|DELETE|HEAD)"
)
COMMIT_UNCERTAIN = (
    "This load's commit did not land, unless the store took it and only its answer was lost. Retry the "
    "load (the same Airflow task run, or the same load_id outside Airflow): a commit that landed is found "
    "and recorded, never applied twice."
)


def is_store_failure(exc: BaseException) -> bool:
    """Whether a deltalake error is the object store's failure (an OSError, or a DeltaError quoting the
    store client's answer), not the table's or the data's; a commit conflict is never one."""
    from deltalake.exceptions import CommitFailedError, DeltaError

    if isinstance(exc, CommitFailedError):
        return False
    return isinstance(exc, OSError) or (isinstance(exc, DeltaError) and bool(_STORE_FAILURE.search(str(exc))))


def unwritable_store(
    path: str, exc: Exception, storage_options: dict[str, str] | None, outcome: str = COMMIT_UNCERTAIN
) -> StoreError:
    """A StoreError saying that the store failed a write to the table at `path` (after the store
    client's own retries), with the first lines of its answer, credentials removed."""
    return StoreError(
        path,
        f"could not be written to its object store ({type(exc).__name__}: {_answer(exc, storage_options)}). "
        f"{outcome}",
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


@contextmanager
def store_write_errors(
    path: str, storage_options: dict[str, str] | None, outcome: str = COMMIT_UNCERTAIN
) -> Iterator[None]:
    """Inside the block, the object store failing a write of the table at `path` (`is_store_failure`)
    becomes one StoreError naming the table (`unwritable_store`, saying `outcome`); every other error
    passes as it is, and so does every error of a local path."""
    from .locking import local_path

    try:
        yield
    except Exception as exc:
        if local_path(path) is not None or not is_store_failure(exc):
            raise
        raise unwritable_store(path, exc, storage_options, outcome) from None
