"""Row ids hashed on the driver, for a small batch staging collects there.

An upsert's or insert-only's `_dlt_id` is the SHA-256 of its primary key as JSON (spark/frames.py).
In a fresh JVM, as every Airflow task's local session is, Spark evaluates that hash cold, row by row:
about 0.3 s of a fresh task's upsert of 40k rows (benchmarks/, the cold regime), where Python's
hashlib takes 0.03 s for the same rows. So where staging collects a small batch to the driver
(load/staged_arrow.py), Spark still spells each key as JSON, as it always does, and the driver hashes that
text: the ids are the same bytes as Spark's, for every key type, in every load and writer.

Spark Connect keeps the hash on its server, whose JVM is warm, and a batch above SMALL_BATCH_BYTES
keeps it in Spark, where it costs less per row than Python once the JVM has compiled it.
"""

from __future__ import annotations

import base64
import hashlib

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..model.naming import HELPER_PREFIX, ROW_ID
from .codegen import INTERPRET_ESTIMATE_BYTES
from .frames import ID_LENGTH, row_id_text
from .profile import is_connect

ROW_ID_TEXT = HELPER_PREFIX + "row_id_text"  # the text a row id hashes, until the driver hashes it
SMALL_BATCH_BYTES = INTERPRET_ESTIMATE_BYTES  # the batches whose expressions Spark interprets anyway


def hashes_on_driver(df: DataFrame, estimated_bytes: int) -> bool:
    """Whether a collected batch of this estimated size has its row ids hashed on the driver."""
    return not is_connect(df) and estimated_bytes <= SMALL_BATCH_BYTES


def with_row_id_text(df: DataFrame, primary_key: tuple[str, ...]) -> DataFrame:
    """The batch with `_dlt_id` left empty (Spark then drops its hash from the plan) and the text it
    hashes in ROW_ID_TEXT, for `filled` to hash once collected."""
    return df.withColumns({ROW_ID: F.lit(None).cast("string"), ROW_ID_TEXT: row_id_text(primary_key)})


def filled(collected: pa.Table) -> pa.Table:
    """The collected batch with `_dlt_id` hashed from ROW_ID_TEXT, in its place and type, the text dropped."""
    texts = collected[ROW_ID_TEXT].cast(pa.binary()).to_pylist()
    position = collected.schema.get_field_index(ROW_ID)
    field = collected.schema.field(position)
    row_ids = pa.array(short_hashes(texts), pa.string()).cast(field.type)
    return collected.set_column(position, field, row_ids).drop_columns([ROW_ID_TEXT])


def short_hashes(texts: list[bytes], length: int = ID_LENGTH) -> list[str]:
    """The first `length` base64 characters of each text's SHA-256: frames.short_hash, in Python."""
    sha256, encoded = hashlib.sha256, base64.b64encode
    return [encoded(sha256(text).digest())[:length].decode("ascii") for text in texts]
