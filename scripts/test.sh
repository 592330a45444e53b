#!/usr/bin/env bash
# Sets up the environment, checks the code with ruff, and runs the whole test suite.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m ruff check --quiet .
.venv/bin/python -m ruff format --check --quiet .
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest "$@"
