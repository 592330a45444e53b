"""How much Arrow the Spark driver may pass to delta-rs: a share of spark.driver.memory, a smaller share of
what Spark leaves of a local session's heap (its executors run in it), capped by maxResultSize; and which
Spark failures are the heap running out."""

from __future__ import annotations

import pickle

import pytest

from airflow_provider_deltamerge import BatchTooLargeError
from airflow_provider_deltamerge.delta.arrow_stream import PIECE_LIMIT_BYTES, piece_limit
from airflow_provider_deltamerge.delta.driver_budget import (
    DriverBudget,
    budget_bytes,
    out_of_heap,
    parse_bytes,
)

MiB = 2**20


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4g", 4096 * MiB), ("512m", 512 * MiB), ("2048k", 2 * MiB), ("1073741824", 2**30), (" 3G ", 3 * 2**30)],
)
def test_spark_size_notation_is_read_in_bytes(text, expected):
    assert parse_bytes(text, 0) == expected


@pytest.mark.parametrize("text", [None, "", "lots", "4 gigabytes"])
def test_an_unreadable_size_falls_back_to_the_default(text):
    assert parse_bytes(text, 7) == 7


def test_a_cluster_driver_may_take_its_share_of_the_heap_up_to_max_result_size():
    assert budget_bytes("4g", "0", local=False) == int(4096 * MiB * 0.4)  # 0: no cap
    assert budget_bytes("4g", "1g", local=False) == 1024 * MiB
    assert budget_bytes("1g", "1g", local=False) == int(1024 * MiB * 0.4)


def test_a_local_driver_may_take_a_smaller_share_of_what_spark_leaves_of_its_heap():
    assert budget_bytes("2g", "0", local=True) == int((2048 - 300) * MiB * 0.25)  # 437 MiB
    assert budget_bytes("1g", "1g", local=True) == int((1024 - 300) * MiB * 0.25)  # 181 MiB
    assert budget_bytes("1g", "1g", local=True) < budget_bytes("1g", "1g", local=False)
    assert budget_bytes("256m", "1g", local=True) == 0  # less heap than Spark reserves


def test_pieces_are_at_most_a_quarter_of_the_budget():
    small = DriverBudget(budget_bytes("1g", "1g", local=True), "1g", local=True)
    assert piece_limit(small) == small.bytes // 4 < PIECE_LIMIT_BYTES
    large = DriverBudget(budget_bytes("8g", "0", local=False), "8g", local=False)
    assert piece_limit(large) == PIECE_LIMIT_BYTES


def test_the_refusal_names_the_batch_the_budget_the_memory_and_a_local_session():
    error = DriverBudget(181 * MiB, "1g", local=True).refusal("/lake/items", 250 * MiB, " (at least)")

    assert isinstance(error, BatchTooLargeError)
    text = str(error)
    assert "/lake/items is about 250 MiB" in text and "more than the 181 MiB" in text
    assert (
        "spark.driver.memory=1g on a local session, whose executors share the driver's heap (at least)"
        in text
    )
    assert "Raise spark.driver.memory" in text
    assert str(pickle.loads(pickle.dumps(error))) == text
    assert "local session" not in str(DriverBudget(410 * MiB, "1g", local=False).refusal("/lake/items", 1))


SPARK_OUT_OF_HEAP = """An error occurred while calling o185.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 1.0 failed 1 times
Caused by: java.lang.OutOfMemoryError: Java heap space
\tat java.base/java.nio.HeapByteBuffer.<init>(HeapByteBuffer.java:64)"""


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (SPARK_OUT_OF_HEAP, "Caused by: java.lang.OutOfMemoryError: Java heap space"),
        (
            "Job aborted: Task 0 failed: TaskResultLost (result lost from block manager)",
            "Job aborted: Task 0",
        ),
        (
            "Total size of serialized results (1100 MiB) is bigger than spark.driver.maxResultSize",
            "Total size",
        ),
    ],
)
def test_spark_failures_of_the_driver_heap_are_told_with_the_line_that_says_so(message, reason):
    assert out_of_heap(RuntimeError(message)).startswith(reason)


def test_other_spark_failures_are_not_the_heap():
    assert out_of_heap(RuntimeError("Job aborted: [DIVIDE_BY_ZERO] Division by zero")) is None
