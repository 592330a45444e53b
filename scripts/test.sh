#!/usr/bin/env bash
# Sets up the environment, checks the code with ruff, runs the whole test suite on the tested set,
# then the oldest supported set's run (scripts/test-oldest.sh). Extra arguments go to the main pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m ruff check --quiet .
.venv/bin/python -m ruff format --check --quiet .
# The oldest set's virtualenv is made while the main run goes (mostly downloading and unpacking)
oldest_setup_log=$(mktemp)
VENV=.venv-oldest CONSTRAINTS=constraints/oldest.txt bash scripts/setup.sh >"$oldest_setup_log" 2>&1 &
oldest_setup=$!
trap 'pkill -P "$oldest_setup" 2>/dev/null; kill "$oldest_setup" 2>/dev/null; rm -f "$oldest_setup_log"' EXIT
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
.venv/bin/python -m pytest "$@"
if ! wait "$oldest_setup"; then
  cat "$oldest_setup_log" >&2
  echo "error: setting up .venv-oldest failed (above)" >&2
  exit 1
fi
cat "$oldest_setup_log"
bash scripts/test-oldest.sh
