"""backend="auto" where both writers are available: the writer for the batch in hand, by the size Spark
estimates for it (delta/selection.py says where the line is, and logs why)."""

from __future__ import annotations

from ..delta.selection import select_writer
from ..model.request import LoadRequest
from ..spark.profile import estimated_bytes


def writer_for_batch(spark, request: LoadRequest, writer, table, batch):
    """backend "auto" with both writers: the one for this batch's size (delta/selection.py), and the table
    as it reads it where that is the other one."""
    if request.backend != "auto" or writer.name != "delta-spark":
        return writer, table  # a writer asked for by name, or delta-rs alone available
    chosen = select_writer(
        request.backend, spark, request.store_options, lambda: estimated_bytes(batch), request.table_path
    )
    if chosen.name == writer.name:
        return writer, table
    return chosen, chosen.snapshot(spark, request.table_path)
