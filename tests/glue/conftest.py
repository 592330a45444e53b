"""moto's AWS server on 127.0.0.1 for the Glue catalog's tests, one per session, checking credentials
as AWS does; each test gets a schema (Glue database) of its own."""

from __future__ import annotations

import itertools

import pytest

from tests.storage.servers import moto_running

_names = itertools.count()


@pytest.fixture(scope="session")
def aws_server(tmp_path_factory):
    with moto_running(tmp_path_factory.mktemp("moto-glue")) as server:
        yield server


@pytest.fixture
def glue_options(aws_server) -> dict[str, str]:
    """Storage options as a storage connection gives them for S3 on moto, with Glue's endpoint too."""
    return {**aws_server.storage_options(), "AWS_ENDPOINT_URL_GLUE": aws_server.endpoint}


@pytest.fixture
def catalog(glue_options):
    from airflow_provider_deltamerge.delta.glue_catalog import GlueCatalog

    return GlueCatalog(glue_options)


@pytest.fixture
def schema(catalog) -> str:
    """A fresh schema of the test's own, located on S3."""
    name = f"sales_{next(_names)}"
    catalog.create_schema(name, f"s3://lake/{name}")
    return name
