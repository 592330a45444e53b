"""The public API, listed: what users import, run and submit does not move when modules do."""

import importlib
import subprocess
import sys
import warnings

import pytest

import airflow_provider_deltamerge

PUBLIC_NAMES = [
    "BatchTooLargeError",
    "CastError",
    "CatalogError",
    "ChangeFeedError",
    "ColumnNameError",
    "ConfigError",
    "ConflictError",
    "ContractError",
    "CursorColumnMissingError",
    "CursorValueMissingError",
    "DeltaMergeError",
    "DuplicateKeyError",
    "ExpectationError",
    "Incremental",
    "InvalidColumnNameError",
    "JobFailedError",
    "LoadInfo",
    "LoadNotRecordedError",
    "LoadRequest",
    "MissingKeyColumnError",
    "NullKeyError",
    "NullValueError",
    "PartitionValueError",
    "RowIdError",
    "SchemaError",
    "SequenceError",
    "SourceError",
    "StoreError",
    "TableRecreatedError",
    "TruncationWarning",
    "__version__",
    "backfill_windows",
    "default_session",
    "maintain_table",
    "run_load",
]

OPERATOR_PATHS = {
    "airflow_provider_deltamerge.operators": [
        "DeltaBackfillOperator",
        "DeltaMaintenanceOperator",
        "DeltaMergeOperator",
        "DeltaScd2Operator",
    ],
    "airflow_provider_deltamerge.operators.merge": ["DeltaMergeOperator", "DeltaScd2Operator"],
    "airflow_provider_deltamerge.operators.backfill": ["DeltaBackfillOperator"],
    "airflow_provider_deltamerge.operators.maintenance": ["DeltaMaintenanceOperator"],
    "airflow_provider_deltamerge.hooks.deltamerge": ["DeltaMergeHook"],
}


def test_the_package_exports_exactly_its_public_names():
    assert sorted(airflow_provider_deltamerge.__all__) == sorted(PUBLIC_NAMES)
    for name in PUBLIC_NAMES:
        assert getattr(airflow_provider_deltamerge, name) is not None, name


@pytest.mark.parametrize("module", sorted(OPERATOR_PATHS))
def test_the_operators_and_the_hook_import_from_their_documented_paths(module):
    imported = importlib.import_module(module)
    for name in OPERATOR_PATHS[module]:
        assert isinstance(getattr(imported, name), type), f"{module}.{name}"


def test_the_cli_entry_point_is_where_pyproject_names_it():
    from airflow_provider_deltamerge.cli.main import run

    assert callable(run)
    shown = subprocess.run(
        [sys.executable, "-m", "airflow_provider_deltamerge.cli", "--help"], capture_output=True, text=True
    )
    assert shown.returncode == 0 and "deltamerge" in shown.stdout


def test_the_spark_submit_job_keeps_its_old_module_path_with_a_deprecation_warning():
    from airflow_provider_deltamerge.hooks.deltamerge import remote_job_resource
    from airflow_provider_deltamerge.submit import remote_job

    assert remote_job_resource().name == "remote_job.py"
    assert "submit" in str(remote_job_resource())
    sys.modules.pop("airflow_provider_deltamerge.remote_job", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module("airflow_provider_deltamerge.remote_job")
    assert old.main is remote_job.main
    moved = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any("submit.remote_job" in str(w.message) for w in moved)


def test_a_job_submitted_by_its_old_file_path_still_runs_and_says_it_moved():
    old_file = airflow_provider_deltamerge.__path__[0] + "/remote_job.py"
    shown = subprocess.run([sys.executable, old_file, "--help"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "--request-file" in shown.stdout
    assert "DeprecationWarning" in shown.stderr and "submit" in shown.stderr
