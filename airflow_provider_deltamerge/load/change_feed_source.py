"""A load whose source is an upstream Delta table's change data feed (``{"delta_changes": ...}``): its
window in upstream versions, and the batch of those versions' changes as a Spark DataFrame.

A step of the load, not in `spark/` or `delta/`: the upstream is read with delta-rs
(`delta.change_feed`) and its changes handed to Spark (`spark.extract.arrow_to_spark`), whichever
writer commits the load. The rules are pure, in `model.change_feed`.
"""

from __future__ import annotations

from datetime import datetime, timezone

from ..delta.change_feed import Upstream, check_readable, open_upstream, read_changes
from ..model.change_feed import version_window
from ..model.sources import CHANGE_FEED, START_AFTER
from ..model.storage import delta_rs_options
from ..spark.extract import arrow_to_spark
from ..spark.window_steps import WindowContext


class FeedReader:
    """The ``(spark, window) -> DataFrame`` reader of one load's change feed. The upstream is opened
    once, when the window is chosen: the window's versions and the changes read are of one snapshot."""

    def __init__(self, request):
        self.request = request
        self.uri = request.source[CHANGE_FEED]
        self._upstream: Upstream | None = None

    @property
    def upstream(self) -> Upstream:
        if self._upstream is None:
            self._upstream = open_upstream(self.uri, delta_rs_options(self.uri, self.request.storage_options))
        return self._upstream

    def open_window(self, stored_state: dict | None) -> WindowContext:
        """The versions this load reads (`model.change_feed.version_window`), refused where the upstream
        cannot give them."""
        now = datetime.now(timezone.utc)
        upstream = self.upstream
        window = version_window(
            self.request.cursor,
            data_interval=self.request.interval,
            run_context=self.request.run,
            stored_state=stored_state,
            now=now,
            commits=upstream.commits,
            current_version=upstream.current_version,
            after=self.request.source.get(START_AFTER),
        )
        check_readable(upstream, window.start, window.end)
        return WindowContext(self.request.cursor, stored_state, window, now)

    def __call__(self, spark, window):
        keys = self.request.hints.primary_key
        return arrow_to_spark(spark, read_changes(self.upstream, window.start, window.end, keys))
