"""An upstream Delta table's change data feed, read with delta-rs: its commits, the versions its feed
was off at, and the changes between two versions as Arrow (update preimages and the upstream's own
dlt system columns left out, types as Spark takes them)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from ..errors import ChangeFeedError
from ..model.change_feed import (
    CDF_PROPERTY,
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    DELETE,
    PREIMAGE,
    Commit,
    range_problem,
    reload_advice,
)
from ..model.naming import SYSTEM_PREFIX
from ..model.secrets import credential_values, redact_text
from .locking import local_path
from .storage import store_errors

log = logging.getLogger(__name__)
_READ = "Nothing was loaded."
# Operations whose commit may change the table's properties: the feed's setting is read again there.
_METADATA_WORDS = ("PROPERTIES", "CREATE", "REPLACE", "CONVERT", "RESTORE")


@dataclass
class Upstream:
    """The upstream table as of one snapshot: its location, its newest version and its commits."""

    uri: str
    options: dict[str, str] | None
    table: DeltaTable
    history: list[dict]  # newest first, as delta-rs gives it

    @property
    def current_version(self) -> int:
        return self.table.version()

    @property
    def commits(self) -> list[Commit]:
        """The commits the log still holds, oldest first, with their commit timestamps."""
        return [
            Commit(int(h["version"]), datetime.fromtimestamp(h["timestamp"] / 1000, timezone.utc))
            for h in reversed(self.history)
        ]


def open_upstream(uri: str, options: dict[str, str] | None) -> Upstream:
    """The upstream table as it is now, or ChangeFeedError where there is none or its log cannot be
    read."""
    with store_errors(uri, options, _READ):
        try:
            table = DeltaTable(uri, storage_options=options)
        except TableNotFoundError:
            raise ChangeFeedError(uri, None, None, "there is no Delta table at this location") from None
        except DeltaError as exc:
            if local_path(uri) is None:
                raise  # an object store's refusal: store_errors says so
            raise _unreadable(uri, options, None, None, None, exc) from None
        with _feed_errors(uri, options, None, None, table.version()):
            return Upstream(uri, options, table, table.history())


@contextmanager
def _feed_errors(uri: str, options, start: int | None, end: int | None, current: int) -> Iterator[None]:
    """Inside the block, any failure to read the upstream (its files or log entries gone, the table
    removed, a file Arrow cannot read) becomes one ChangeFeedError naming the versions and the way on."""
    try:
        yield
    except ChangeFeedError:
        raise
    except TableNotFoundError:
        raise ChangeFeedError(uri, start, end, "there is no Delta table at this location any more") from None
    except (DeltaError, pa.ArrowException, OSError) as exc:
        raise _unreadable(uri, options, start, end, current, exc) from None


def _unreadable(uri, options, start, end, current: int | None, exc: Exception) -> ChangeFeedError:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    detail = redact_text(lines[0][:400] if lines else type(exc).__name__, credential_values(options or {}))
    return ChangeFeedError(
        uri,
        start,
        end,
        f"its changes or its log cannot be read ({type(exc).__name__}: {detail}); a VACUUM removes "
        "the _change_data and data files of old versions, log cleanup their log entries. "
        + reload_advice(uri, current),
    )


def check_readable(upstream: Upstream, start: int, end: int) -> None:
    """Refuse versions ``[start, end)`` where the log lost some or the feed was off at some."""
    if start >= end:
        return
    oldest = min((int(h["version"]) for h in upstream.history), default=None)
    with _feed_errors(upstream.uri, upstream.options, start, end, upstream.current_version):
        disabled = [] if oldest is not None and start < oldest else _feed_off(upstream, start, end)
    problem = range_problem(start, end, oldest, disabled, upstream.uri, upstream.current_version)
    if problem is not None:
        raise ChangeFeedError(upstream.uri, start, end, problem)


def _feed_off(upstream: Upstream, start: int, end: int) -> list[int]:
    """The versions of ``[start, end)`` at which the table's properties had the feed off: read at the
    first one and at each commit that may change the properties, which hold until the next such."""
    changes = sorted(
        int(h["version"])
        for h in upstream.history
        if start < int(h["version"]) < end and _may_change_properties(h)
    )
    checked = [start, *changes]
    off: list[int] = []
    for version, until in zip(checked, [*checked[1:], end], strict=True):
        if not _feed_on(upstream, version):
            off.extend(range(version, until))
    return off


def _may_change_properties(entry: dict) -> bool:
    operation = str(entry.get("operation") or "").upper()
    mode = str((entry.get("operationParameters") or {}).get("mode") or "").lower()
    return any(word in operation for word in _METADATA_WORDS) or mode == "overwrite"


def _feed_on(upstream: Upstream, version: int) -> bool:
    if version == upstream.current_version:
        table = upstream.table
    else:
        with store_errors(upstream.uri, upstream.options, _READ):
            table = DeltaTable(upstream.uri, version=version, storage_options=upstream.options)
    return str(table.metadata().configuration.get(CDF_PROPERTY, "false")).lower() == "true"


def read_changes(upstream: Upstream, start: int, end: int, keys: tuple[str, ...] = ()) -> pa.Table:
    """The changes of versions ``[start, end)``: the upstream's columns but its dlt system columns, and
    `_change_type`, `_commit_version` (int64), `_commit_timestamp` (UTC microseconds); no preimages,
    and one change per key and commit where `keys` are given (`net_of_each_commit`)."""
    if start >= end:
        return _without_system_columns(_empty(upstream))
    with _feed_errors(upstream.uri, upstream.options, start, end, upstream.current_version):
        stream = upstream.table.load_cdf(starting_version=start, ending_version=end - 1)
        # delta-rs casts to the schema asked for as it streams (older pyarrow cannot cast views)
        changes = pa.RecordBatchReader.from_stream(stream, schema=_spark_schema(pa.schema(stream.schema)))
        changes = changes.read_all()
    changes = _without_system_columns(changes)
    kept = net_of_each_commit(changes.filter(pc.not_equal(changes[CHANGE_TYPE], PREIMAGE)), keys)
    log.info(
        "change data feed of %s, versions %d to %d: %d changes (%d preimages or rewritten keys' deletes)",
        upstream.uri,
        start,
        end - 1,
        kept.num_rows,
        changes.num_rows - kept.num_rows,
    )
    return kept


def net_of_each_commit(changes: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """A commit that deleted a key's row and wrote one for it (an overwrite, a delete-insert merge)
    changed that key's row: its delete is dropped and the row written kept, so each key has one change
    per commit and the commit version orders them. Without keys (or keys the feed lacks), as it is."""
    if not keys or not set(keys) <= set(changes.column_names):
        return changes
    deleted = pc.equal(changes[CHANGE_TYPE], DELETE)
    deletes, written = changes.filter(deleted), changes.filter(pc.invert(deleted))
    if not deletes.num_rows or not written.num_rows:
        return changes
    by = [*keys, COMMIT_VERSION]
    rewritten = written.select(by).group_by(by).aggregate([])
    kept = deletes.join(rewritten, keys=by, join_type="left anti").select(changes.column_names)
    return pa.concat_tables([written, kept])


def _empty(upstream: Upstream) -> pa.Table:
    schema = pa.schema(upstream.table.schema().to_arrow())
    feed = [pa.field(CHANGE_TYPE, pa.string()), pa.field(COMMIT_VERSION, pa.int64())]
    feed.append(pa.field(COMMIT_TIMESTAMP, pa.timestamp("ms")))
    return _spark_schema(pa.schema([*schema, *feed])).empty_table()


def _spark_schema(schema: pa.Schema) -> pa.Schema:
    """The feed's schema as Spark takes it: Arrow view types as plain ones, the commit version as
    int64 and its timestamp (UTC) as UTC microseconds."""
    fields = [pa.field(f.name, _plain(f.type), f.nullable) for f in schema]
    return pa.schema(
        [
            f.with_type(pa.int64())
            if f.name == COMMIT_VERSION
            else f.with_type(pa.timestamp("us", tz="UTC"))
            if f.name == COMMIT_TIMESTAMP
            else f
            for f in fields
        ]
    )


def _without_system_columns(table: pa.Table) -> pa.Table:
    """The upstream's own dlt system columns left out: the target gets its own."""
    return table.select([n for n in table.column_names if not n.startswith(SYSTEM_PREFIX + "_")])


def _plain(data_type: pa.DataType) -> pa.DataType:
    """The type with string and binary views as plain strings and binaries, inside nesting too."""
    if data_type == pa.string_view():
        return pa.string()
    if data_type == pa.binary_view():
        return pa.binary()
    if pa.types.is_struct(data_type):
        return pa.struct([f.with_type(_plain(f.type)) for f in data_type])
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        item = data_type.value_field.with_type(_plain(data_type.value_type))
        return pa.list_(item) if pa.types.is_list(data_type) else pa.large_list(item)
    if pa.types.is_map(data_type):
        return pa.map_(
            _plain(data_type.key_type), data_type.item_field.with_type(_plain(data_type.item_type))
        )
    return data_type
