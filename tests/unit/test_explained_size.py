"""A Spark Connect client's estimate of a batch: the size a cost explain shows (spark/profile.py)."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.spark.profile import _explained_size

PLAN = """== Optimized Logical Plan ==
Project [id#1L, concat(x, cast(id#1L as string)) AS s#2], Statistics(sizeInBytes={root})
+- Range (0, 1000, step=1, splits=Some(2)), Statistics(sizeInBytes=7.8 KiB, rowCount=1.00E+3)

== Physical Plan ==
*(1) Project [id#1L]
"""


@pytest.mark.parametrize(
    ("root", "size"),
    [("17.6 KiB", 18022), ("12.0 B", 12), ("4.6 MiB", int(4.6 * 2**20)), ("8.0 EiB", 2**63)],
)
def test_the_size_of_the_optimized_plans_root(root, size):
    assert _explained_size(PLAN.format(root=root)) == size


def test_a_plan_without_statistics_has_no_size():
    assert _explained_size("== Physical Plan ==\n*(1) Range (0, 10)") is None
