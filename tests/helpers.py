"""Helpers for tests that read Delta tables back with delta-rs."""

from __future__ import annotations

from deltalake import DeltaTable


def read_rows(path: str, order_by=None, drop=("_dlt_load_id", "_dlt_id")) -> list[dict]:
    """A Delta table's rows read with delta-rs, system columns dropped, sorted for comparison."""
    rows = [
        {k: v for k, v in r.items() if k not in drop} for r in DeltaTable(path).to_pyarrow_table().to_pylist()
    ]
    if order_by is None:
        return ordered(rows)
    key = order_by if callable(order_by) else (lambda r: tuple(r[k] for k in order_by))
    return sorted(rows, key=key)


def ordered(rows: list[dict]) -> list[dict]:
    """Rows in read_rows' default order, for writing expected tables."""
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in sorted(r)))


def table_version(path: str) -> int:
    return DeltaTable(path).version()
