"""Which deltalake errors are the object store's failures (delta/storage.py): those become a StoreError
naming the table, credentials removed; the table's or the data's errors pass as they are."""

from __future__ import annotations

import pytest
from deltalake.exceptions import CommitFailedError, DeltaError, SchemaMismatchError

from airflow_provider_deltamerge.delta.storage import is_store_failure, store_write_errors
from airflow_provider_deltamerge.errors import StoreError

SECRET = "c2VjcmV0LWtleS1mb3ItdGhlLXRlc3Q="
DATA_FILE_PUT = DeltaError(
    "Failed to parse parquet: External: Generic S3 error: Error performing PUT http://127.0.0.1:1/b/t/"
    "part-0.parquet in 99ms, after 1 retries - Server returned non-2xx status code: 503 Service Unavailable"
)
COMMIT_PUT = OSError(
    "Generic S3 error\n  \x1b[31m↳\x1b[0m Error performing PUT http://127.0.0.1:1/b/t/_delta_log/1.json\n"
    f"  \x1b[31m↳\x1b[0m Connection reset by peer (os error 104) {SECRET}\n"
)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (DATA_FILE_PUT, True),
        (COMMIT_PUT, True),
        (CommitFailedError("Version 3 already exists"), False),
        (SchemaMismatchError("Cannot cast schema"), False),
        (DeltaError("Generic DeltaTable error: Expected close delimiter"), False),
    ],
)
def test_the_store_failures_are_told_from_other_errors(error, expected):
    assert is_store_failure(error) is expected


def test_a_store_failure_of_a_remote_table_is_a_store_error_without_the_secret():
    with (
        pytest.raises(StoreError) as raised,
        store_write_errors("s3://b/shop/t", {"AWS_SECRET_ACCESS_KEY": SECRET}),
    ):
        raise COMMIT_PUT
    assert raised.value.path == "s3://b/shop/t"
    assert "Connection reset by peer" in str(raised.value) and SECRET not in str(raised.value)
    assert "\x1b" not in str(raised.value)


def test_other_errors_and_local_tables_pass_as_they_are(tmp_path):
    with pytest.raises(SchemaMismatchError), store_write_errors("s3://b/shop/t", None):
        raise SchemaMismatchError("Cannot cast schema")
    with pytest.raises(OSError), store_write_errors(str(tmp_path / "t"), None):
        raise COMMIT_PUT
