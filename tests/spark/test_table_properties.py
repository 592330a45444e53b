"""table_properties=: set when a load creates the table, set by one metadata commit when they differ
later, left alone when they match, and a load they would break refused before anything is written."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import ConfigError, run_load
from airflow_provider_deltamerge.delta.store import read_loads
from tests.helpers import read_rows, table_version

ROWS = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
CHANGED = [{"id": 2, "v": "B"}, {"id": 3, "v": "c"}]


def load(spark, dataset, rows, **arguments):
    arguments.setdefault("write_disposition", {"disposition": "merge", "strategy": "upsert"})
    arguments.setdefault("primary_key", "id")
    return run_load(rows, spark=spark, dataset=dataset, table_name="items", **arguments)


def configuration(path: str) -> dict[str, str]:
    return dict(DeltaTable(path).metadata().configuration or {})


def test_a_created_table_has_the_properties_and_one_commit(spark, dataset):
    wanted = {
        "delta.checkpointInterval": 5,
        "delta.logRetentionDuration": "interval 14 days",
    }
    info = load(spark, dataset, ROWS, table_properties=wanted)

    expected = {"delta.checkpointInterval": "5", "delta.logRetentionDuration": "interval 14 days"}
    assert configuration(info.table_path).items() >= expected.items()
    assert table_version(info.table_path) == 0 == info.table_version
    assert read_rows(info.table_path) == ROWS


def test_changed_properties_are_set_by_one_metadata_commit_before_the_load(spark, dataset):
    first = load(
        spark,
        dataset,
        ROWS,
        table_properties={"delta.checkpointInterval": 5, "delta.logRetentionDuration": "interval 14 days"},
    )
    second = load(spark, dataset, CHANGED, table_properties={"delta.checkpointInterval": 20})

    expected = {"delta.checkpointInterval": "20", "delta.logRetentionDuration": "interval 14 days"}
    assert configuration(second.table_path).items() >= expected.items()
    assert second.table_version == first.table_version + 2  # the properties' commit, then the load's
    history = DeltaTable(second.table_path).history()
    assert [h["version"] for h in history[:2]] == [second.table_version, second.table_version - 1]
    assert read_rows(second.table_path) == [{"id": 1, "v": "a"}, {"id": 2, "v": "B"}, {"id": 3, "v": "c"}]
    loads = read_loads(dataset)
    assert sorted(r["table_version"] for r in loads) == [first.table_version, second.table_version]


def test_properties_the_table_has_already_make_no_commit(spark, dataset):
    properties = {"delta.appendOnly": False, "delta.deletedFileRetentionDuration": "INTERVAL 30 DAYS"}
    first = load(spark, dataset, ROWS, table_properties=properties)
    second = load(spark, dataset, CHANGED, table_properties=properties)

    assert second.table_version == first.table_version + 1
    assert configuration(second.table_path)["delta.deletedFileRetentionDuration"] == "INTERVAL 30 DAYS"


def test_change_data_feed_records_the_merge(spark, dataset):
    first = load(spark, dataset, ROWS, table_properties={"delta.enableChangeDataFeed": True})
    second = load(spark, dataset, CHANGED, table_properties={"delta.enableChangeDataFeed": True})

    changes = DeltaTable(second.table_path).load_cdf(starting_version=second.table_version).read_all()
    ids, kinds = changes.column("id").to_pylist(), changes.column("_change_type").to_pylist()
    kinds = sorted(zip(ids, kinds, strict=True))
    assert kinds == [(2, "update_postimage"), (2, "update_preimage"), (3, "insert")]
    assert first.table_version == 0


@pytest.mark.parametrize(
    "disposition",
    [
        "replace",
        {"disposition": "merge", "strategy": "upsert"},
        {"disposition": "merge", "strategy": "delete-insert"},
    ],
)
def test_append_only_with_a_disposition_that_rewrites_rows_is_refused_at_once(spark, dataset, disposition):
    with pytest.raises(ConfigError, match=r"delta.appendOnly=true on table 'items' forbids"):
        load(spark, dataset, ROWS, write_disposition=disposition, table_properties={"delta.appendOnly": True})
    assert not (DeltaTable.is_deltatable(f"{dataset}/items"))


def test_a_table_made_append_only_elsewhere_refuses_a_merge_and_stays_as_it_was(spark, dataset):
    first = load(spark, dataset, ROWS)
    DeltaTable(first.table_path).alter.set_table_properties({"delta.appendOnly": "true"})
    version = table_version(first.table_path)

    with pytest.raises(ConfigError, match="forbids updating and deleting rows"):
        load(spark, dataset, CHANGED)
    assert table_version(first.table_path) == version
    assert read_rows(first.table_path) == ROWS
    assert len(read_loads(dataset)) == 1


def test_an_append_only_table_takes_appends(spark, dataset):
    first = load(
        spark, dataset, ROWS, write_disposition="append", table_properties={"delta.appendOnly": True}
    )
    second = load(
        spark, dataset, CHANGED, write_disposition="append", table_properties={"delta.appendOnly": True}
    )

    assert configuration(second.table_path)["delta.appendOnly"] == "true"
    assert second.table_version == first.table_version + 1
    assert len(read_rows(second.table_path)) == 4


def test_an_append_that_replaces_its_window_is_refused_on_an_append_only_table(spark, dataset):
    arguments = {
        "write_disposition": "append",
        "incremental": {"cursor_path": "day"},
        "data_interval": ("2024-01-01", "2024-01-02"),
        "table_properties": {"delta.appendOnly": True},
    }
    with pytest.raises(ConfigError, match="window_overwrite=False"):
        load(spark, dataset, [{"id": 1, "day": "2024-01-01"}], **arguments)
    assert not DeltaTable.is_deltatable(f"{dataset}/items")

    info = load(spark, dataset, [{"id": 1, "day": "2024-01-01"}], window_overwrite=False, **arguments)
    assert read_rows(info.table_path) == [{"id": 1, "day": "2024-01-01"}]


def test_a_table_a_load_creates_has_no_property_open_source_delta_refuses(spark, dataset):
    """The delta-spark writer alters tables either writer made; Delta refuses unknown `delta.` keys."""
    from airflow_provider_deltamerge.model.table_properties import DATABRICKS_ONLY

    info = load(spark, dataset, ROWS)
    assert not set(configuration(info.table_path)) & set(DATABRICKS_ONLY)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("delta.logRetentionDuration", "interval 0 seconds"),
        ("delta.logRetentionDuration", "interval 6 days"),
        ("delta.setTransactionRetentionDuration", "interval 1 hour"),
        ("delta.deletedFileRetentionDuration", "interval 0 seconds"),
        ("delta.targetFileSize", 1_000_000),
        ("delta.tuneFileSizesForRewrites", True),
    ],
)
def test_properties_that_would_destroy_what_loads_and_readers_need_are_refused(spark, dataset, name, value):
    with pytest.raises(ConfigError, match=name) as refused:
        load(spark, dataset, ROWS, table_properties={name: value, "delta.checkpointInterval": 1})
    assert refused.value.argument == "table_properties"
    assert not DeltaTable.is_deltatable(f"{dataset}/items")
