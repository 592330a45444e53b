"""Provider registration: get_provider_info is valid and `airflow providers` commands list the provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from airflow_provider_deltamerge.get_provider_info import get_provider_info


def test_provider_info_matches_schema_and_distribution():
    import airflow
    import jsonschema

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == "airflow-provider-deltamerge"
    assert info["connection-types"][0]["hook-class-name"].endswith("hooks.deltamerge.DeltaMergeHook")


def test_listed_modules_import_and_hold_the_classes():
    import importlib

    info = get_provider_info()
    modules = [
        m for group in ("operators", "hooks") for entry in info[group] for m in entry["python-modules"]
    ]
    names = {n for m in modules for n in vars(importlib.import_module(m))}
    assert {
        "DeltaMergeOperator",
        "DeltaScd2Operator",
        "DeltaBackfillOperator",
        "DeltaMaintenanceOperator",
        "DeltaMergeHook",
    } <= names


def test_get_provider_info_imports_nothing_heavy():
    code = (
        "import sys; import airflow_provider_deltamerge.get_provider_info as m; m.get_provider_info(); "
        "print([n for n in ('pyspark', 'deltalake', 'pyarrow', 'airflow') if n in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_operator_modules_do_not_import_pyspark_deltalake_or_openlineage():
    modules = [m for entry in get_provider_info()["operators"] for m in entry["python-modules"]]
    code = (
        f"import sys; import importlib; [importlib.import_module(m) for m in {modules!r}]; "
        "print([n for n in ('pyspark', 'deltalake', 'openlineage') if n in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _airflow_cli(*args: str) -> str:
    airflow = Path(sys.executable).with_name("airflow")
    result = subprocess.run(
        [str(airflow), *args], capture_output=True, text=True, env=os.environ, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def _installed() -> bool:
    try:
        metadata.distribution("airflow-provider-deltamerge")
    except metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not _installed(), reason="the distribution is not installed (pip install -e .)")
def test_airflow_providers_cli_lists_provider_and_hook():
    listed = _airflow_cli("providers", "list", "--output", "json")
    providers = {p["package_name"]: p for p in json.loads(listed)}
    assert providers["airflow-provider-deltamerge"]["version"] == metadata.version(
        "airflow-provider-deltamerge"
    )
    hooks = json.loads(_airflow_cli("providers", "hooks", "--output", "json"))
    ours = [h for h in hooks if h.get("connection_type") == "deltamerge"]
    assert ours and ours[0]["class"] == "airflow_provider_deltamerge.hooks.deltamerge.DeltaMergeHook"
    full = json.loads(
        _airflow_cli("providers", "get", "airflow-provider-deltamerge", "--full", "--output", "json")
    )
    modules = json.dumps(full)
    assert "airflow_provider_deltamerge.operators.merge" in modules
    assert "airflow_provider_deltamerge.operators.backfill" in modules
    assert "airflow_provider_deltamerge.operators.maintenance" in modules
