"""Python rows (a list of dicts) to Arrow, the way a data engineer expects them typed."""

from __future__ import annotations

import pyarrow as pa

from .errors import SourceError


def rows_to_arrow(rows: list[dict]) -> pa.Table:
    """Columns are the union of the rows' keys in order of first appearance; a missing key is null.

    Naive datetimes are read as UTC (as dlt does); a column whose values Arrow cannot type as one kind
    (say ints and strings) fails with the column's name.
    """
    columns: dict[str, None] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise SourceError(
                f"row {i} is a {type(row).__name__}, not a dict; pass a list of dicts or a DataFrame"
            )
        columns.update(dict.fromkeys(row))
    arrays = {}
    for name in columns:
        values = [row.get(name) for row in rows]
        try:
            array = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SourceError(
                f"column {name!r} mixes value types that cannot share one column: {exc}"
            ) from exc
        arrays[name] = _utc_if_naive(array)
    return pa.table(arrays) if arrays else pa.table({})


def _utc_if_naive(array: pa.Array) -> pa.Array:
    if pa.types.is_timestamp(array.type) and array.type.tz is None:
        return array.cast(pa.timestamp(array.type.unit, tz="UTC"))
    return array
