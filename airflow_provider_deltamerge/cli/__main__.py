"""``python -m airflow_provider_deltamerge.cli``: the `deltamerge` command."""

from .main import run

run()
