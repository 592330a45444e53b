"""Every error of the package round-trips through pickle with its message and fields: Airflow and
multiprocessing pickle exceptions across processes."""

from __future__ import annotations

import inspect
import pickle

import pytest

import airflow_provider_deltamerge
from airflow_provider_deltamerge import errors

EXAMPLES = {
    errors.DeltaMergeError: lambda: errors.DeltaMergeError("something went wrong"),
    errors.ConfigError: lambda: errors.ConfigError("primary_key", "123 is not a column name"),
    errors.ColumnNameError: lambda: errors.ColumnNameError("orders", ("ID", "id"), "in the batch"),
    errors.InvalidColumnNameError: lambda: errors.InvalidColumnNameError("orders", "order id"),
    errors.SourceError: lambda: errors.SourceError("row 3 is a str, not a dict"),
    errors.MissingKeyColumnError: lambda: errors.MissingKeyColumnError("id", "primary_key", ["a", "b"], 7),
    errors.NullKeyError: lambda: errors.NullKeyError("id", "merge_key", 2),
    errors.DuplicateKeyError: lambda: errors.DuplicateKeyError(("id", "day"), "upsert", [(1, "mon")], 3),
    errors.CursorColumnMissingError: lambda: errors.CursorColumnMissingError("ts", ["id", "name"]),
    errors.CursorValueMissingError: lambda: errors.CursorValueMissingError("ts", 2, 10),
    errors.CastError: lambda: errors.CastError("price", "ten", "decimal(10,2)", {"id": 3}),
    errors.NullValueError: lambda: errors.NullValueError("price", {"id": 3}, 2),
    errors.RowIdError: lambda: errors.RowIdError("_dlt_id", 1, ["a1"], 2),
    errors.PartitionValueError: lambda: errors.PartitionValueError("day", 304, 255),
    errors.SequenceError: lambda: errors.SequenceError(
        ("lsn",), "key(s) with two different events at one sequence", [((1,), (7,))], 1
    ),
    errors.ChangeFeedError: lambda: errors.ChangeFeedError("/lake/bronze/orders", 3, 5, "its feed was off"),
    errors.ContractError: lambda: errors.ContractError("events", "columns", "note"),
    errors.ExpectationError: lambda: errors.ExpectationError("orders", {"has_id": 2}, [{"id": None}]),
    errors.SchemaError: lambda: errors.SchemaError("events", "id", "bigint", "string"),
    errors.ConflictError: lambda: errors.ConflictError("another writer changed table /lake/events"),
    errors.StoreError: lambda: errors.StoreError("/lake/_dlt_loads", "it is a file, not a Delta table"),
    errors.LoadNotRecordedError: lambda: errors.LoadNotRecordedError(
        "/lake/_dlt_loads", "1717171717.123456", "/lake/events", 4, "permission denied"
    ),
    errors.TableRecreatedError: lambda: errors.TableRecreatedError(
        "/lake/events", "events", "shop", "there is no table there now"
    ),
    errors.BatchTooLargeError: lambda: errors.BatchTooLargeError("/lake/events", 3 * 2**30, 2**30, "1g"),
    errors.CatalogError: lambda: errors.CatalogError("sales.orders", "AWS Glue holds a view under this name"),
    errors.JobFailedError: lambda: errors.JobFailedError("spark job failed", "Traceback ...\nValueError"),
}


def error_classes() -> list[type]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.DeltaMergeError) and cls.__module__ == errors.__name__
    ]


def test_every_error_class_has_an_example_here():
    assert set(error_classes()) == set(EXAMPLES)


@pytest.mark.parametrize("cls", error_classes(), ids=lambda cls: cls.__name__)
def test_an_error_round_trips_through_pickle_with_its_message_and_fields(cls):
    error = EXAMPLES[cls]()
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert str(copy) == str(error) and copy.args == error.args
    assert vars(copy) == vars(error)
    assert vars(error) or cls in (errors.DeltaMergeError, errors.SourceError, errors.ConflictError)


def test_every_error_class_is_part_of_the_public_api():
    exported = {getattr(airflow_provider_deltamerge, name) for name in airflow_provider_deltamerge.__all__}
    assert set(error_classes()) <= exported


def test_the_public_api_names_what_it_exports():
    for name in airflow_provider_deltamerge.__all__:
        assert getattr(airflow_provider_deltamerge, name) is not None
