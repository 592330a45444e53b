"""Real object stores for the storage tests: moto's S3 server and Azurite, on 127.0.0.1, one per session;
each test gets its own bucket or container."""

from __future__ import annotations

import itertools

import pytest

from .servers import AZURITE, azurite_command, start_azurite, start_moto, stop

_names = itertools.count()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    process, s3 = start_moto(tmp_path_factory.mktemp("moto"))
    yield s3
    stop(process)


@pytest.fixture(scope="session")
def azure_server(tmp_path_factory):
    command = azurite_command()
    if command is None:
        pytest.skip("node is not installed, so Azurite (the Azure Blob emulator) cannot run")
    if not AZURITE.exists():
        pytest.fail(f"Azurite is not installed at {AZURITE}: run scripts/setup.sh")
    process, azure = start_azurite(command, tmp_path_factory.mktemp("azurite"))
    yield azure
    stop(process)


@pytest.fixture
def s3_dataset(s3_server):
    """A fresh bucket; the dataset is a folder in it."""
    return s3_server.create_bucket(f"lake-{next(_names)}") + "/shop"


@pytest.fixture
def azure_dataset(azure_server):
    """A fresh container; the dataset is a folder in it."""
    return azure_server.create_container(f"lake-{next(_names)}") + "/shop"
