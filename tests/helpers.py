"""Helpers for tests that read Delta tables back with delta-rs."""

from __future__ import annotations

from deltalake import DeltaTable


def read_rows(path: str, order_by=None, drop=("_dlt_load_id", "_dlt_id")) -> list[dict]:
    """A Delta table's rows read with delta-rs, system columns dropped, sorted for comparison."""
    rows = [
        {k: v for k, v in r.items() if k not in drop} for r in DeltaTable(path).to_pyarrow_table().to_pylist()
    ]
    key = order_by or (lambda r: tuple(str(r[k]) for k in sorted(r)))
    return sorted(rows, key=key if callable(key) else (lambda r: tuple(r[k] for k in key)))


def table_version(path: str) -> int:
    return DeltaTable(path).version()
