"""The batch from Spark to delta-rs as Arrow record batches, never more of it at once than needed.

- `record_batches`: the DataFrame's Arrow batches as Spark delivers them to the driver (on a classic
  session, over the socket its Arrow collection serves, one batch at a time; elsewhere from
  `toArrow()`), every column nullable, timestamps in UTC;
- `Progress`: a task-log line at most every PROGRESS_SECONDS with the batches, rows and bytes so far;
- `collected`: the whole batch on the driver as one Arrow table, refused once it outgrows the driver's
  budget (staging's own pass, where the writer takes the batch whole);
- `Transfer`: one batch on its way, whole or streamed by its size (or already on the driver); a batch
  sorted in Spark on the way, or in partitions too large for the driver, comes in pieces of about
  PIECE_BYTES; a batch beyond the driver's budget (driver_budget.py) is refused before any of it moves.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Iterable, Iterator

import pyarrow as pa

from ..errors import BatchTooLargeError
from ..model.naming import backticked
from .driver_budget import DriverBudget, out_of_heap

log = logging.getLogger(__name__)

PROGRESS_SECONDS = 5.0  # the longest quiet spell in the task log while a batch moves
IN_MEMORY_BYTES = (
    256 * 2**20
)  # a batch up to this size is merged whole (file skipping), a larger one streamed
PIECE_BYTES = 32 * 2**20  # a partition cut on the way: Spark hands each to the driver whole
PIECE_LIMIT_BYTES = 128 * 2**20  # a larger partition (or one over a quarter of the budget) is cut


def arrow_schema(df, not_null: tuple[str, ...] = ()) -> pa.Schema:
    """The DataFrame's schema as Arrow: timestamps in UTC, every column nullable but those in `not_null`
    (Spark marks some columns non-nullable; tables created so would refuse the helper rows of later
    merges; a column declared NOT NULL must come so, or delta-rs makes the table's column nullable)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        schema = to_arrow_schema(df.schema, timezone="UTC")
    except TypeError:  # PySpark 3.5 takes no time zone: its timestamps are UTC already
        schema = to_arrow_schema(df.schema)
    return pa.schema([f.with_nullable(f.name not in not_null) for f in schema])


def record_batches(df, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The DataFrame's rows as Arrow batches of `schema`, in the order Spark finishes them."""
    if hasattr(df, "_jdf") and hasattr(df._jdf, "collectAsArrowToPython"):
        batches = _served_batches(df)
    else:  # Spark Connect: its toArrow() is the one Arrow path
        batches = iter(df.toArrow().to_batches())
    for batch in batches:
        yield _conformed(batch, schema)


def _served_batches(df) -> Iterator[pa.RecordBatch]:
    """Batches read one by one from the socket Spark serves its Arrow collection on (what `toArrow()`
    drains whole). Spark's error, if the job fails, is raised once the socket is done."""
    from pyspark.sql.pandas.serializers import ArrowCollectSerializer

    port, secret, server = df._jdf.collectAsArrowToPython()
    read_to_the_end = False
    try:
        with _socket_stream((port, secret), ArrowCollectSerializer()) as stream:
            for item in stream:  # batches, then the list of their partition order
                if isinstance(item, pa.RecordBatch):
                    yield item
        read_to_the_end = True
    finally:
        if read_to_the_end:
            with _spark_errors_unwrapped():
                server.getResult()
        else:  # the reader stopped early: Spark's job fails on the closed socket, which is expected
            with contextlib.suppress(Exception):
                server.getResult()


def _socket_stream(sock_info, serializer):
    """The stream of Spark's local socket, as a context manager: PySpark 4's reader is one; 3.5's returns
    the stream itself (from pyspark.rdd), closed when it is collected."""
    try:
        from pyspark.util import _load_from_socket
    except ImportError:
        from pyspark.rdd import _load_from_socket

        return contextlib.nullcontext(_load_from_socket(sock_info, serializer))
    return _load_from_socket(sock_info, serializer)


def _spark_errors_unwrapped():
    """Spark's own exception types for a failed job, where this PySpark offers the unwrapping."""
    try:
        from pyspark.errors.exceptions.captured import unwrap_spark_exception
    except ImportError:
        return contextlib.nullcontext()
    return unwrap_spark_exception()


def _conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    if batch.schema.types == schema.types:  # only nullability or metadata differ
        return pa.RecordBatch.from_arrays(batch.columns, schema=schema)
    return pa.Table.from_batches([batch]).cast(schema).combine_chunks().to_batches()[0]


class Progress:
    """Counts what passes and logs it at most every `every` seconds (and once at the end)."""

    def __init__(self, what: str, every: float | None = None):
        self.what, self.every = what, PROGRESS_SECONDS if every is None else every
        self.batches = self.rows = self.bytes = 0
        self._started = self._logged = time.monotonic()

    def counted(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            self.batches += 1
            self.rows += batch.num_rows
            self.bytes += batch.nbytes
            now = time.monotonic()
            if now - self._logged >= self.every:
                self._logged = now
                self._log("so far")
            yield batch

    def done(self) -> None:
        self._log("in all")

    def _log(self, when: str) -> None:
        log.info(
            "%s: %s batches, %s rows, %.1f MiB %s (%.1f s)",
            self.what,
            f"{self.batches:,}",
            f"{self.rows:,}",
            self.bytes / 2**20,
            when,
            time.monotonic() - self._started,
        )


def collected(spark, table: str, df) -> pa.Table:
    """The DataFrame's rows as one Arrow table on the driver (every column nullable, timestamps in UTC),
    read batch by batch with progress lines. Once more has arrived than the driver may take, reading
    stops and the batch is refused with BatchTooLargeError, before anything is committed."""
    schema = arrow_schema(df)
    budget = DriverBudget.of(spark)
    progress = Progress(f"transfer to {table}")
    batches = record_batches(df, schema)
    kept = []
    try:
        for batch in progress.counted(batches):
            kept.append(batch)
            if progress.bytes > budget.bytes:
                raise budget.refusal(table, progress.bytes, " (at least; reading stopped)")
    finally:
        batches.close()
    progress.done()
    return pa.Table.from_batches(kept, schema=schema)


def _partitions_counted_without_a_job(df) -> int | None:
    """The DataFrame's partitions where Spark tells them without running anything: None on Spark
    Connect, and for a plan with a shuffle (an adaptive plan runs its shuffle stages to count them, and
    coalesces them to its advisory size anyway)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    try:
        if "Exchange" in jdf.queryExecution().executedPlan().toString():
            return None
        return int(jdf.rdd().getNumPartitions())
    except Exception:  # a plan Spark cannot tell this of
        return None


def piece_limit(budget: DriverBudget) -> int:
    """The largest partition the driver takes whole: PIECE_LIMIT_BYTES, at most a quarter of its budget
    (two tasks' results in flight at once, each in Spark's block manager and fetched from it)."""
    return min(PIECE_LIMIT_BYTES, budget.bytes // 4)


def pieces_for(estimated_bytes: int | None) -> int | None:
    """How many partitions keep each of a batch at most PIECE_BYTES; None if unsized."""
    if estimated_bytes is None:
        return None
    return max(1, -(-estimated_bytes // PIECE_BYTES))


class Transfer:
    """One batch on its way from Spark to delta-rs: whole in memory when small enough, else streamed
    while delta-rs consumes it; its progress logged; Spark's own error kept when delta-rs reports it
    through the Arrow stream; a batch too big for the driver refused before any of it moves.

    `source` is a DataFrame, or an Arrow table already on the driver (`collected` in staging's pass).
    """

    def __init__(
        self, spark, table: str, source, estimated_bytes: int | None, not_null: tuple[str, ...] = ()
    ):
        self.spark, self.table_uri = spark, table
        self.on_driver = isinstance(source, pa.Table)
        self._error: BaseException | None = None
        if self.on_driver:
            self.estimated_bytes = source.nbytes
            self.schema = pa.schema([f.with_nullable(f.name not in not_null) for f in source.schema])
            self._progress = None  # counted while it was collected
            self._batches = (_conformed(b, self.schema) for b in source.to_batches())
            return
        if estimated_bytes is not None and estimated_bytes > self.budget.bytes:
            raise self.budget.refusal(table, estimated_bytes)
        self.estimated_bytes = estimated_bytes
        self.schema = arrow_schema(source, not_null)
        self._progress = Progress(f"transfer to {table}")
        self._batches = self._from(source)

    @functools.cached_property
    def budget(self) -> DriverBudget:
        """The driver's budget, read from the session's conf when first needed: a batch already on the
        driver (staging's collection, the common path) needs it only to report a failure."""
        return DriverBudget.of(self.spark)

    def _from(self, source):
        return self._kept_errors(self._progress.counted(self._record_batches(source)))

    def _record_batches(self, source) -> Iterator[pa.RecordBatch]:
        """The source's batches, its partitions checked once the first batch is asked for."""
        yield from record_batches(self._in_bounded_pieces(source), self.schema)

    def _in_bounded_pieces(self, source):
        """`source`, repartitioned where Spark would hand the driver pieces over the piece limit: its
        Arrow collection takes each partition whole into the driver's JVM, and an 842 MiB batch in two
        partitions ran a 2500m driver out of heap, a 180 MiB one in two a local 1g driver. A batch
        already in small pieces is left as it is."""
        limit = piece_limit(self.budget)
        if self.estimated_bytes is None or self.estimated_bytes <= limit:
            return source  # no partition of it can be larger: Spark's plan is not asked
        present = _partitions_counted_without_a_job(source)
        if not present or self.estimated_bytes / present <= limit:
            return source
        wanted = pieces_for(self.estimated_bytes)
        log.info(
            "batch for %s: %d partitions of about %.0f MiB each would reach the driver whole: "
            "repartitioned into %d",
            self.table_uri,
            present,
            self.estimated_bytes / present / 2**20,
            wanted,
        )
        return source.repartition(wanted)

    def sorted_in_spark(self, source, columns: tuple[str, ...]) -> None:
        """Transfer `source` globally sorted by `columns` (range-partitioned by Spark), for a batch too
        big to sort on the driver: each Arrow batch then holds one stretch of keys. Before any batch moves.

        Spark's Arrow collection takes each partition whole into the driver's JVM, beside the sort itself
        (the same JVM on a local session), so the batch is cut into partitions of about
        PIECE_BYTES. Sorted into the session's shuffle partitions, a 10M-row batch came in
        210 MiB pieces where they were four, and ran a 4g driver out of heap."""
        partitions = pieces_for(self.estimated_bytes)
        if partitions is None:  # a size nobody knows: the session's own shuffle partitions
            self._batches = self._from(source.orderBy(*(backticked(c) for c in columns)))
            return
        log.info(
            "batch for %s: sorted by %s in Spark, in %d partitions of about %.0f MiB each",
            self.table_uri,
            ", ".join(columns),
            partitions,
            self.estimated_bytes / partitions / 2**20,
        )
        quoted = [backticked(c) for c in columns]
        self._batches = self._from(
            source.repartitionByRange(partitions, *quoted).sortWithinPartitions(*quoted)
        )

    def fits_in_memory(self) -> bool:
        """Merged in memory (delta-rs then skips files by the condition's bounds) when the batch is
        known to be at most IN_MEMORY_BYTES; streamed otherwise. The choice and its reason are logged."""
        size = self.estimated_bytes
        fits = size is not None and size <= IN_MEMORY_BYTES
        shown = "unknown size" if size is None else f"about {size / 2**20:,.1f} MiB"
        limit = f"{IN_MEMORY_BYTES / 2**20:,.0f} MiB"
        if self.on_driver:
            how = "merged whole: files outside its key ranges are skipped" if fits else "merged streamed"
            log.info("batch for %s: %s on the driver since staging, %s", self.table_uri, shown, how)
        elif fits:
            log.info(
                "batch for %s: %s <= %s, taken whole: files outside its key ranges are skipped",
                self.table_uri,
                shown,
                limit,
            )
        else:
            log.info(
                "batch for %s: %s, more than %s or unknown: streamed while delta-rs consumes it",
                self.table_uri,
                shown,
                limit,
            )
        return fits

    def table(self) -> pa.Table:
        with self.out_of_heap_refused():
            return pa.Table.from_batches(list(self._batches), schema=self.schema)

    @contextlib.contextmanager
    def out_of_heap_refused(self):
        """Spark work over the batch (its transfer whole, its key check) that runs the driver's heap out
        refuses the batch as too large, with Spark's reason, instead of failing with Spark's error."""
        try:
            yield
        except Exception as exc:
            oversized = self._oversized(exc)
            if oversized is None:
                raise
            raise oversized from exc

    def reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.schema, self._batches)

    def run(self, operation):
        """Run the delta-rs operation that consumes the batch; a Spark failure during the transfer is
        raised as itself (delta-rs would wrap it in an Arrow stream error)."""
        try:
            result = operation()
        except Exception as exc:
            if self._error is not None:
                raise self._oversized(self._error) or self._error from exc
            raise
        if self._progress is not None:
            self._progress.done()
        return result

    def _kept_errors(self, batches):
        try:
            yield from batches
        except BaseException as exc:
            self._error = exc
            raise

    def _oversized(self, error: BaseException) -> BatchTooLargeError | None:
        reason = out_of_heap(error)
        if reason is None:
            return None
        size = self.estimated_bytes or self._progress.bytes
        return self.budget.refusal(self.table_uri, size, f" (Spark: {reason})")
