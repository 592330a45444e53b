"""A spy on the store: how often a load reads each of the dataset's state tables in full."""

from __future__ import annotations

import json
import os
from collections import Counter

from airflow_provider_deltamerge.delta import store

COUNT_FILE = "DELTAMERGE_COUNT_READS"


class StoreReads:
    """Wraps `store.read_table`, counting its calls by table name (`_dlt_loads`, `_dlt_pipeline_state`)."""

    def __init__(self, read_table, file: str | None = None):
        self.read_table, self.file = read_table, file
        self.counts: Counter = Counter()

    def __call__(self, path: str, storage_options=None):
        self.counts[os.path.basename(path.rstrip("/"))] += 1
        return self.read_table(path, storage_options)

    def write(self) -> None:
        if self.file:
            with open(self.file, "w", encoding="utf-8") as handle:
                json.dump(self.counts, handle)


def count_reads(monkeypatch) -> StoreReads:
    """Count this process's reads for the rest of the test."""
    counter = StoreReads(store.read_table)
    monkeypatch.setattr(store, "read_table", counter)
    return counter


def count_into_file(file: str | None) -> StoreReads:
    """Count this process's reads (a job under spark-submit); `write()` saves them to `file` as JSON."""
    counter = StoreReads(store.read_table, file)
    store.read_table = counter
    return counter
