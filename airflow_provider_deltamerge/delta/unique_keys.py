"""A merge source must hold each key once where the plan says so (upsert, insert-only): checked by the
writer on the source it commits, in Arrow where the batch is on the driver anyway (no Spark job), else
in Spark, always before anything is committed."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DuplicateKeyError
from ..model.naming import backticked
from ..plan.merge import MergePlan

EXAMPLES = 5


def check_arrow(data: pa.Table, plan: MergePlan) -> None:
    """Refuse an Arrow source whose unique key occurs more than once, naming some of its values."""
    check_arrow_key(data, plan.unique_key, plan.strategy)


def check_arrow_key(data: pa.Table, key: tuple[str, ...], strategy: str) -> None:
    """Refuse Arrow rows in which `key` occurs more than once, naming some of its values."""
    keys = list(key)
    if not keys or data.num_rows == 0:
        return
    data = by_value(data.select(keys))
    if _distinct_single_key(data, keys):
        return
    duplicated = duplicated_keys(data, keys)
    if duplicated.num_rows:
        rows = duplicated.slice(0, EXAMPLES).to_pylist()
        examples = sorted((tuple(r[c] for c in keys) for r in rows), key=repr)
        raise DuplicateKeyError(tuple(key), strategy, examples, duplicated.num_rows)


def by_value(data: pa.Table) -> pa.Table:
    """`data` with its float columns compared by value, as Spark and every merge compare them: -0.0 as
    0.0 and every NaN as one NaN (Arrow's grouping compares their bits)."""
    for position, field in enumerate(data.schema):
        if pa.types.is_floating(field.type):
            column = data.column(position)
            zero, nan = pa.scalar(0.0, field.type), pa.scalar(float("nan"), field.type)
            column = pc.if_else(pc.equal(column, zero), zero, column)
            data = data.set_column(position, field, pc.if_else(pc.is_nan(column), nan, column))
    return data


def duplicated_keys(data: pa.Table, keys: list[str]) -> pa.Table:
    """The values of `keys` that occur in more than one row of `data`, once each (the key columns only)."""
    counts = data.select(keys).group_by(keys).aggregate([([], "count_all")])
    return counts.filter(pc.greater(counts["count_all"], 1)).select(keys)


def _distinct_single_key(data: pa.Table, keys: list[str]) -> bool:
    """Whether a key of one column holds each value once, by a distinct count (nulls one value, as a
    grouping has them): the common case, in a fraction of a grouping's time in a fresh process. Where
    this says no, the grouping names the duplicates."""
    if len(keys) != 1 or pa.types.is_nested(data.schema.field(keys[0]).type):
        return False
    return pc.count_distinct(data[keys[0]], mode="all").as_py() == data.num_rows


def check_spark(source, plan: MergePlan) -> None:
    """The same check as a Spark job over the source (a DataFrame), for sources not on the driver."""
    keys = list(plan.unique_key)
    if not keys:
        return
    duplicated = source.groupBy(*(backticked(k) for k in keys)).count().filter("`count` > 1")
    found = duplicated.limit(EXAMPLES).collect()  # no sort: the common case has none to find
    if found:
        examples = sorted((tuple(r[c] for c in keys) for r in found), key=repr)
        raise DuplicateKeyError(plan.unique_key, plan.strategy, examples, duplicated.count())
