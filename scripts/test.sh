#!/usr/bin/env bash
# Sets up the environment, checks the code with ruff, builds the documentation site (strict), runs the
# whole test suite on the tested set, then the oldest supported set's run (scripts/test-oldest.sh).
# Extra arguments go to the main pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m ruff check --quiet .
.venv/bin/python -m ruff format --check --quiet .
bash scripts/docs.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
.venv/bin/python -m pytest "$@"
bash scripts/test-oldest.sh
