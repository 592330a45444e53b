"""The spark-submit application of the crash and read-count tests: the package's job module, run with
the test fault points installed (tests/faults.py) and, when DELTAMERGE_COUNT_READS names a file, the
reads of the dataset's state tables counted into it (tests/store_reads.py)."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
sys.path[:] = [REPO_ROOT] + [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]


def run_counted() -> int:
    from airflow_provider_deltamerge.submit.remote_job import main
    from tests import faults, store_reads

    faults.install()
    counter = store_reads.count_into_file(os.environ.get(store_reads.COUNT_FILE))
    try:
        return main()
    finally:
        counter.write()


if __name__ == "__main__":
    from airflow_provider_deltamerge.submit.process_exit import exit_with

    exit_with(run_counted)
