#!/usr/bin/env bash
# Sets up the environment and runs the demo: real nycflights13 data into Delta tables on local Spark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m demo "$@"
