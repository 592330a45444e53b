"""The `deltamerge` command and table maintenance on datasets in object stores (moto's S3, Azurite), with
the storage options given as --storage-option and as maintain_table's argument."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from deltalake import DeltaTable

from airflow_provider_deltamerge import run_load
from airflow_provider_deltamerge.delta.maintenance import maintain_table

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("jvm_class_archive")]

TABLE = "events"
CLI = [sys.executable, "-m", "airflow_provider_deltamerge.cli"]


@pytest.fixture(params=["s3", "azure"])
def loaded(request, spark):
    """A dataset on one object store with three appends to `events`; (dataset, options, load ids)."""
    if request.param == "s3":
        dataset = request.getfixturevalue("s3_dataset")
        options = request.getfixturevalue("s3_server").storage_options()
    else:
        dataset = request.getfixturevalue("azure_dataset")
        options = request.getfixturevalue("azure_server").storage_options()
    infos = [
        run_load(
            [{"id": n, "batch": b} for n in range(b * 3, b * 3 + 3)],
            spark=spark,
            dataset=dataset,
            table_name=TABLE,
            pipeline_name="tools",
            backend="delta-rs",
            storage_options=options,
        )
        for b in range(3)
    ]
    return dataset, options, [info.load_id for info in infos]


def deltamerge(*args: str, options: dict) -> object:
    flags = [part for key, value in options.items() for part in ("--storage-option", f"{key}={value}")]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [*CLI, *args, *flags, "--json"], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_the_command_reads_loads_state_history_and_tables_from_the_store(loaded):
    dataset, options, load_ids = loaded
    loads = deltamerge("loads", dataset, options=options)
    assert [row["load_id"] for row in loads] == list(reversed(load_ids))
    assert [row["table_version"] for row in loads] == [2, 1, 0]

    state = deltamerge("state", dataset, options=options)
    assert [(row["pipeline"], row["table"], row["last_load_id"]) for row in state] == [
        ("tools", TABLE, load_ids[-1])
    ]

    history = deltamerge("history", dataset, TABLE, options=options)
    assert [(c["version"], c["load_id"], c["recorded"]) for c in history] == [
        (2, load_ids[2], True),
        (1, load_ids[1], True),
        (0, load_ids[0], True),
    ]

    tables = {t["table"]: t for t in deltamerge("tables", dataset, options=options)}
    assert set(tables) == {TABLE, "_dlt_loads"}  # appends without a cursor keep no pipeline state
    assert (tables[TABLE]["rows"], tables[TABLE]["files"]) == (9, 3)


def test_maintenance_compacts_vacuums_and_checkpoints_a_table_in_the_store(loaded):
    dataset, options, _ = loaded
    metrics = maintain_table(
        dataset,
        TABLE,
        optimize=True,
        vacuum=True,
        retention_hours=0,
        force=True,
        checkpoint=True,
        backend="delta-rs",
        storage_options=options,
    )

    assert metrics["operations"] == ["compaction", "vacuum", "checkpoint"]
    assert (metrics["numRemovedFiles"], metrics["numAddedFiles"]) == (3, 1)
    assert metrics["numDeletedFiles"] == 3
    table = DeltaTable(f"{dataset}/{TABLE}", storage_options=options)
    assert metrics["checkpointVersion"] == metrics["table_version"] == table.version()
    assert sorted(r["id"] for r in table.to_pyarrow_table(columns=["id"]).to_pylist()) == list(range(9))
    assert len(table.file_uris()) == 1
