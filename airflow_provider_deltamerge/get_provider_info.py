"""Provider metadata for Airflow's ``apache_airflow_provider`` entry point.

Airflow imports this module in every process to discover providers, so it imports nothing heavy.
"""

from __future__ import annotations

from importlib import metadata

PACKAGE_NAME = "airflow-provider-deltamerge"
INTEGRATION = "Delta Lake merge loading"


def _version() -> str:
    try:
        return metadata.version(PACKAGE_NAME)
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0"


def get_provider_info() -> dict:
    return {
        "package-name": PACKAGE_NAME,
        "name": "Delta Merge",
        "description": (
            "dlt's loading semantics (write dispositions, merge strategies, scd2, incremental windows, "
            "load ids and state) on Apache Spark and Delta Lake."
        ),
        "versions": [_version()],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://delta.io/",
                "tags": ["apache", "software"],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_provider_deltamerge.operators.merge",
                    "airflow_provider_deltamerge.operators.backfill",
                    "airflow_provider_deltamerge.operators.maintenance",
                ],
            }
        ],
        "hooks": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_provider_deltamerge.hooks.deltamerge"],
            }
        ],
        "connection-types": [
            {
                "connection-type": "deltamerge",
                "hook-class-name": "airflow_provider_deltamerge.hooks.deltamerge.DeltaMergeHook",
                "hook-name": "Delta Merge (in-process Spark)",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "login", "password", "port"],
                    "relabeling": {"host": "Spark master"},
                    "placeholders": {"host": "local[*]"},
                },
                "conn-fields": {
                    "spark_conf": {
                        "label": "Spark configuration",
                        "description": "Spark properties for the in-process session, as a JSON object.",
                        "schema": {"type": ["object", "null"]},
                    },
                },
            }
        ],
    }
