#!/usr/bin/env bash
# The oldest supported set (constraints/oldest.txt: Airflow 3.0, PySpark 3.5, delta-spark 3.3, the
# oldest deltalake allowed), in .venv-oldest: the unit tests, the delta-rs conformance suite and one
# example DAG with dag.test(). The benchmark's smoke test is left to the tested set: the benchmark is a
# development tool, run on that set. So are the property tests (marker `property`): each runs dozens of
# loads to check semantics no library version changes, while the example tests of the same modules run
# every code path they take here. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-oldest CONSTRAINTS=constraints/oldest.txt bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv-oldest/bin/python"
exec .venv-oldest/bin/python -m pytest tests/unit tests/spark --ignore tests/spark/test_benchmark.py -m "not property" \
  "tests/airflow/test_example_dags.py::test_weekly_flights_merge_week_by_week_and_rerun" "$@"
