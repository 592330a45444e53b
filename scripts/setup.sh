#!/usr/bin/env bash
# Creates a virtualenv in the repository and installs the provider with its test and demo extras,
# every package pinned by a constraints file: .venv with constraints/tested.txt by default;
# VENV=.venv-oldest CONSTRAINTS=constraints/oldest.txt for the oldest supported set.
# Safe to run again: it reinstalls only when pyproject.toml or the constraints changed.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
constraints=${CONSTRAINTS:-constraints/tested.txt}

if ! command -v java >/dev/null 2>&1; then
  echo "error: Java 17 is required (Spark runs on the JVM) and no 'java' is on PATH." >&2
  echo "       Install it, e.g. 'apt-get install openjdk-17-jre-headless', then run this again." >&2
  exit 1
fi
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
if [ "${java_major:-0}" -lt 17 ]; then
  echo "error: Java 17 or newer is required; 'java -version' reports ${java_major:-unknown}." >&2
  exit 1
fi

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "error: Python 3.11 or newer is required (both pinned sets need it) ($python)." >&2
  exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  "$python" -m venv "$venv"
fi
stamp=$venv/.installed-$(cat pyproject.toml "$constraints" scripts/setup.sh | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "setup: installing airflow-provider-deltamerge and its dependencies into $venv ($constraints; a few minutes the first time)"
  # uv (from PyPI, pinned) installs the same pinned set as pip would, fetching in parallel: about a third
  # of pip's time, which every fresh CI run pays twice (the tested and the oldest set). Its packages are
  # compiled to bytecode as pip compiles them: every Airflow task is a fresh process, and one that finds
  # no bytecode (PYTHONDONTWRITEBYTECODE, a read-only image) compiles pyspark's modules again, 1.6 s here
  "$venv/bin/python" -m pip install --quiet "uv==0.13.9"
  "$venv/bin/python" -m uv pip install --quiet --compile-bytecode --python "$venv/bin/python" -e ".[dev]" -c "$constraints"
  rm -f "$venv"/.installed-*
  touch "$stamp"
fi
# Azurite, the Azure Blob emulator the storage tests start, from the npm registry into .tools
# (git-ignored). Without node the Azure tests skip and say so.
azurite_version=3.37.0
if command -v npm >/dev/null 2>&1; then
  if [ ! -f ".tools/.azurite-$azurite_version" ]; then
    echo "setup: installing azurite $azurite_version into .tools"
    npm install --prefix .tools --no-audit --no-fund --silent "azurite@$azurite_version"
    rm -f .tools/.azurite-*
    touch ".tools/.azurite-$azurite_version"
  fi
else
  echo "setup: npm not found; the Azure storage tests will be skipped (install node and npm to run them)"
fi
echo "setup: $venv ready ($("$venv/bin/python" --version), $(java -version 2>&1 | head -1))"
