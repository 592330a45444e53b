#!/usr/bin/env bash
# Runs the delta-spark half of the suite on real Delta Lake jars, which DELTA_SPARK_JARS names (local
# files or folders, comma- or colon-separated; nothing is downloaded): the delta-spark variant of every
# test in tests/spark and its writer-independent modules once, then tests/airflow (in-process loads,
# spark-submit to local Spark and to a standalone cluster with the jars on its class path, a Spark Connect
# server started with them, dag.test() of every example DAG), tests/e2e (a real scheduler's tasks),
# tests/cli and tests/catalog (tables in a Hive
# metastore, each scenario in a process of its own), where every new session and
# job takes the jars DELTA_SPARK_JARS names and backend="auto" picks the delta-spark writer
# (DELTAMERGE_AUTO_DELTA_RS_MAX_MB=0: the tests' batches are small, which "auto" would give delta-rs).
# The default test command (scripts/test.sh) is unchanged: without jars these tests run on delta-rs.
# Extra arguments go to each pytest run (e.g. -x, -k).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DELTA_SPARK_JARS:-}" ]; then
  echo "error: DELTA_SPARK_JARS is not set. Point it at local Delta jars matching the pinned Spark:" >&2
  echo "       delta-spark_2.13-<version>.jar and delta-storage-<version>.jar (or a folder of them), e.g." >&2
  echo "       DELTA_SPARK_JARS=\$(ls /opt/delta/*.jar | paste -sd, -) $0" >&2
  exit 2
fi
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export DELTAMERGE_AUTO_DELTA_RS_MAX_MB=0
# The jars named must load: a typo would otherwise run the whole half on delta-rs, each test skipped.
.venv/bin/python - <<'EOF'
import sys

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.model.delta_jars import delta_jars_from_env

try:
    jars = delta_jars_from_env()
except ConfigError as exc:
    sys.exit(f"error: {exc}")
names = [j.rsplit("/", 1)[-1] for j in jars.jars]
if not any(n.startswith("delta-spark_") for n in names) or not any(n.startswith("delta-storage-") for n in names):
    sys.exit(f"error: DELTA_SPARK_JARS names {names}: it needs a delta-spark_<scala> and a delta-storage jar")
print("delta-spark half on: " + ", ".join(names))
EOF
status=0
.venv/bin/python -m pytest tests/spark -k delta-spark "$@" || status=$?
# Modules marked writer_independent run once, with the real writer selection (here delta-spark), and the
# conformance, commit-format and writer-choice tests among them need the jars.
.venv/bin/python -m pytest tests/spark -m writer_independent -k "not delta-spark" "$@" || status=$?
.venv/bin/python -m pytest tests/airflow tests/e2e tests/cli tests/catalog "$@" || status=$?
exit $status
