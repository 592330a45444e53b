"""The Spark application spark-submit runs: one LoadRequest in, one load out.

Usage (built by DeltaMergeHook, not typed by hand)::

    spark-submit [options] .../airflow_provider_deltamerge/remote_job.py --request-file request.json

It reads the request JSON, builds the SparkSession spark-submit configured, and calls run_load. The
result is not printed for anyone to parse: the caller reads the load record (``_dlt_loads``) by the
request's load id. A failure exits non-zero with the traceback on stderr; success exits 0 (see
`process_exit.exit_with`). Never imports Airflow.

The dataset's storage options (credentials) come in the environment variable ``STORAGE_OPTIONS_ENV``
as JSON, never in the request file or on the command line; the job removes the variable from its
environment before anything else runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

STORAGE_OPTIONS_ENV = "DELTAMERGE_STORAGE_OPTIONS"


def _drop_own_directory_from_path() -> None:
    """Python puts this file's folder first on sys.path; its modules must not shadow others (the
    package's `delta/` folder would shadow delta-spark's `delta` package)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="deltamerge-remote-job", description=__doc__.splitlines()[0])
    parser.add_argument("--request-file", required=True, help="path of the LoadRequest JSON file")
    return parser.parse_args(argv)


def read_request_text(path: str) -> str:
    """The request file at path, or (cluster deploy mode, shipped with --files) its name in the cwd."""
    for candidate in (path, os.path.basename(path)):
        if os.path.isfile(candidate):
            with open(candidate, encoding="utf-8") as handle:
                return handle.read()
    raise FileNotFoundError(f"request file {path!r} not found (also looked for {os.path.basename(path)!r})")


def take_storage_options() -> dict | None:
    """The storage options the hook put in this process's environment, removed from it."""
    text = os.environ.pop(STORAGE_OPTIONS_ENV, None)
    return json.loads(text) if text else None


def log_to_stderr() -> None:
    """The load's INFO lines on stderr, which spark-submit hands to the Airflow task log."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    from airflow_provider_deltamerge.load import run_request
    from airflow_provider_deltamerge.model.request import LoadRequest

    log_to_stderr()
    args = parse_args(argv)
    request = LoadRequest.from_json(read_request_text(args.request_file), take_storage_options())
    spark = SparkSession.builder.appName(f"deltamerge {request.table}").getOrCreate()
    try:
        info = run_request(request, spark)
    finally:
        spark.stop()
    print(f"deltamerge: {request.describe()} done, table version {info.table_version}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    _drop_own_directory_from_path()
    from airflow_provider_deltamerge.submit.process_exit import exit_with

    exit_with(main)
