"""DeltaMergeHook: run one LoadRequest where the Airflow connection says.

- no connection:              in-process local Spark (run_load's own default session)
- a ``deltamerge`` connection: in-process Spark with the connection's master and Spark properties
- a ``spark`` connection:      spark-submit (through the apache-spark provider's SparkSubmitHook) of
                               ``submit/remote_job.py`` with the request as a JSON file; the metrics come
                               back from the load record the job writes, never from its log
- a ``spark_connect`` connection: a remote SparkSession over Spark Connect

The spark-submit arguments are built by the pure function :func:`submit_arguments`. A dataset's storage
options (credentials) never go on the spark-submit command line or into the request file: they reach the
job in the environment of the spark-submit process (``STORAGE_OPTIONS_ENV``), which the driver of a
client-mode job inherits and removes from its environment before the load starts.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping
from functools import cached_property
from importlib import resources
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowException, BaseHook, mask_secret

from ..errors import ConfigError, JobFailedError
from ..model.secrets import credential_values, redact_text
from ..submit.remote_job import STORAGE_OPTIONS_ENV

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from ..model.request import LoadRequest

MODES = {None: "local", "deltamerge": "local", "spark": "submit", "spark_connect": "connect"}
# SparkSubmitHook arguments this hook sets itself; every other one of the installed hook's arguments
# may come through `submit_options` (Spark properties come through `spark_conf`).
SET_BY_THIS_HOOK = ("conf", "conn_id", "name", "application_args")
LOG_TAIL_MARKER = "Last spark-submit output:"
# Session settings every job gets, as the embedded local session has them (results must not depend on
# where the load ran); the driver log stays short so a failure's cause is in the tail.
JOB_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # INT96, Spark's default, reads back as nanoseconds in pyarrow and delta-rs: years past 2262 overflow
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "WARN",
}


def remote_job_resource() -> Any:
    """The ``submit/remote_job.py`` shipped in this package (use with ``importlib.resources.as_file``)."""
    return resources.files("airflow_provider_deltamerge") / "submit/remote_job.py"


def submit_options_accepted() -> tuple[str, ...]:
    """The installed SparkSubmitHook's keyword arguments, but those this hook sets itself."""
    import inspect

    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    parameters = inspect.signature(SparkSubmitHook.__init__).parameters.values()
    named = (p.name for p in parameters if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD)
    return tuple(name for name in named if name not in ("self", *SET_BY_THIS_HOOK))


def check_submit_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """`submit_options` as a dict; a key the installed SparkSubmitHook does not take, or that this hook
    sets itself, is refused."""
    if not options:
        return {}
    accepted = submit_options_accepted()
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError("submit_options", f"unknown option(s) {unknown}; valid: {', '.join(accepted)}")
    return dict(options)


def submit_arguments(
    request_file: str,
    *,
    name: str,
    python: str,
    spark_conf: Mapping[str, Any] | None = None,
    submit_options: Mapping[str, Any] | None = None,
    delta_jars: Any = None,
) -> dict[str, Any]:
    """SparkSubmitHook keyword arguments that run submit/remote_job.py on the request in request_file.

    The request file is also shipped with ``--files`` so that a driver in cluster deploy mode finds it
    in its working directory. ``python`` is the interpreter the driver and executors use; it must have
    this package installed. ``delta_jars`` (see ``model.delta_jars``; where None, those DELTA_SPARK_JARS
    names, if any) adds Delta's jars and SQL settings. User ``spark_conf`` entries override the defaults.
    """
    from ..model.delta_jars import given_or_env_jars, merge_spark_conf

    options = check_submit_options(submit_options)
    conf = {"spark.pyspark.python": python, "spark.pyspark.driver.python": python, **JOB_CONF}
    delta = given_or_env_jars(delta_jars)
    if delta is not None:
        delta_options = delta.spark_submit_options()
        conf = merge_spark_conf(conf, delta_options.pop("conf"))
        for key, value in delta_options.items():  # jars, packages: comma lists, the user's kept too
            options[key] = _join(options.get(key), value)
    conf = merge_spark_conf(conf, {k: str(v) for k, v in (spark_conf or {}).items()})
    return {
        **options,
        "conf": conf,
        "files": _join(request_file, options.get("files")),
        "name": name,
        "application_args": ["--request-file", request_file],
    }


def _join(*lists: str | None) -> str:
    return ",".join(item for item in lists if item)


def spark_submit_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Environment of the spark-submit process: pyspark's own Spark when SPARK_HOME is not set."""
    env = dict(environ)
    if not env.get("SPARK_HOME"):
        from pyspark.find_spark_home import _find_spark_home

        env["SPARK_HOME"] = _find_spark_home()
    spark_bin = os.path.join(env["SPARK_HOME"], "bin")
    python_bin = os.path.dirname(sys.executable)  # find-spark-home looks for pyspark with this python
    env["PATH"] = os.pathsep.join(p for p in (spark_bin, python_bin, env.get("PATH", "")) if p)
    return env


def job_env(env: Mapping[str, str], storage_options: Mapping[str, str] | None) -> dict[str, str]:
    """The spark-submit process's environment, with the dataset's storage options as JSON where given."""
    env = {k: v for k, v in env.items() if k != STORAGE_OPTIONS_ENV}
    if storage_options:
        env[STORAGE_OPTIONS_ENV] = json.dumps(dict(storage_options))
    return env


def submitted_load_metrics(request: LoadRequest, known: set[str], loads: list[dict]) -> dict[str, Any]:
    """The metrics of what a spark-submit job loaded, from the dataset's load records (``_dlt_loads``).

    The job loads under the request's load id. A retry whose earlier attempt committed but was stopped
    before its load record instead records and reports that earlier load: the new record of this run's
    task. A job with nothing to load (a stateful window without rows) writes no record.
    """
    ours = [r for r in loads if r["load_id"] == request.load_id]
    if not ours and request.run.in_airflow:
        ours = [r for r in loads if r["load_id"] not in known and request.run.is_same_run(r)]
    if not ours:
        return {"load_id": None, "table": request.table}
    return ours[-1]["metrics"]


def catalog_table_metrics(request: LoadRequest) -> dict[str, str]:
    """For a catalog table loaded with spark-submit, what the job's metrics add to its load record's
    (`catalog_table`, `table_location`; the job placed the table in `dataset`, or refused), so the task
    returns the metrics a load in process returns."""
    if not request.target.in_catalog:
        return {}
    from ..load.catalog_target import where_it_lives, writer_location

    return where_it_lives(request.placed(writer_location(request.dataset)))


def masking_submit_hook(secrets: list[str]) -> type:
    """SparkSubmitHook, masking in the command it logs and in its errors every credential this load
    hands over, not only values whose keys say "secret" or "password"."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    class MaskingSparkSubmitHook(SparkSubmitHook):
        def _mask_cmd(self, connection_cmd: str | list[str]) -> str:
            return redact_text(super()._mask_cmd(connection_cmd), secrets)

    return MaskingSparkSubmitHook


def split_log_tail(message: str) -> tuple[str, str]:
    """SparkSubmitHook's failure message split into (first part, masked tail of the driver output)."""
    head, _, tail = message.partition(LOG_TAIL_MARKER)
    return head.strip(), tail.strip()


class DeltaMergeHook(BaseHook):
    """Run a load request in process, with spark-submit, or over Spark Connect.

    :param conn_id: Airflow connection: none (local Spark), ``deltamerge``, ``spark`` or
        ``spark_connect``.
    :param spark_conf: Spark properties for the session or the spark-submit ``--conf`` options.
    :param submit_options: extra SparkSubmitHook arguments (``driver_memory``, ``jars``, ...).
    :param python: interpreter for the spark-submit driver and executors; default: this one.
    :param delta_jars: where Spark finds Delta's jars (see ``model.delta_jars``), for local and
        spark-submit runs; a Spark Connect server is configured on its own side.
    """

    conn_name_attr = "conn_id"
    default_conn_name = "deltamerge_default"
    conn_type = "deltamerge"
    hook_name = "Delta Merge (in-process Spark)"

    def __init__(
        self,
        conn_id: str | None = None,
        *,
        spark_conf: Mapping[str, Any] | None = None,
        submit_options: Mapping[str, Any] | None = None,
        python: str | None = None,
        delta_jars: Any = None,
    ) -> None:
        super().__init__()
        self.conn_id = conn_id
        self.spark_conf = dict(spark_conf or {})
        self.submit_options = dict(submit_options or {})
        self.python = python or sys.executable
        self.delta_jars = delta_jars
        self._submit_hook: Any = None
        self._secrets: list[str] = []

    @cached_property
    def connection(self) -> Connection | None:
        return self.get_connection(self.conn_id) if self.conn_id else None

    @property
    def mode(self) -> str:
        """'local', 'submit' or 'connect', from the connection type."""
        conn_type = self.connection.conn_type if self.connection else None
        if conn_type not in MODES:
            raise ConfigError(
                "conn_id",
                f"connection {self.conn_id!r} has type {conn_type!r}; use one of "
                "'deltamerge', 'spark', 'spark_connect', or no connection for local Spark",
            )
        return MODES[conn_type]

    def get_conn(self) -> Any:
        return self.connection

    def run(self, request: LoadRequest) -> dict[str, Any]:
        """Run the load and return its metrics dict (as in ``_dlt_loads.metrics``)."""
        from ..load import run_request

        mode = self.mode
        self._secrets = self.credentials(request)
        for secret in self._secrets:
            mask_secret(secret)  # Airflow's task log hides them from here on
        self.log.info("Running %s with %s Spark", request.describe(), mode)
        if mode == "submit":
            return self._run_submit(request)
        spark = self._connect_session() if mode == "connect" else self._local_session()
        try:
            return run_request(request, spark).metrics
        finally:
            if mode == "connect":
                spark.stop()

    def credentials(self, request: LoadRequest) -> list[str]:
        """Every credential this load hands to Spark: Spark properties, the connection's password and
        extras, the source's options (tokens, account keys, SAS, passwords, JDBC url passwords)."""
        connection = self.connection
        handed = {
            "spark_conf": self.spark_conf,
            "submit_options": self.submit_options,
            "source": request.source,
            "storage_options": request.storage_options,
            "connection": {
                "password": connection.password if connection else None,
                "extra": connection.extra_dejson if connection else None,
            },
        }
        return credential_values(handed)

    def _local_session(self) -> Any:
        """The process's local session; a `deltamerge` connection gives its master and Spark conf.

        As for any SparkSession, a session already running in this process is reused as it is.
        """
        from ..model.delta_jars import merge_spark_conf, parse_delta_jars
        from ..spark.session import default_session

        extra = self.connection.extra_dejson if self.connection else {}
        conf = {"spark.pyspark.python": self.python}  # Python workers run this interpreter, not PATH's
        delta = parse_delta_jars(self.delta_jars)
        for part in (delta.spark_conf() if delta else {}, extra.get("spark_conf") or {}, self.spark_conf):
            conf = merge_spark_conf(conf, {k: str(v) for k, v in part.items()})
        return default_session((self.connection and self.connection.host) or "local[*]", conf)

    def _connect_session(self) -> Any:
        """A new Spark Connect session; the URL (it may hold a token) is never logged.

        pyspark switches the whole process to Connect mode, so it must not run a local session too
        (an Airflow task process does not).
        """
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        if self.delta_jars is not None:
            raise ConfigError(
                "delta_jars", "a Spark Connect server has its own class path; configure it there"
            )
        if SparkContext._active_spark_context is not None:
            raise ConfigError(
                "conn_id", "Spark Connect cannot be used in a process that already runs a local SparkSession"
            )
        url = SparkConnectHook(conn_id=self.conn_id).get_connection_url()
        self.log.info("Spark Connect server %s:%s", self.connection.host, self.connection.port)
        builder = SparkSession.builder.remote(url)
        session_conf = {k: v for k, v in JOB_CONF.items() if k.startswith("spark.sql.")}  # not the server's
        for key, value in {**session_conf, **self.spark_conf}.items():
            builder = builder.config(key, str(value))
        return builder.create()

    def _run_submit(self, request: LoadRequest) -> dict[str, Any]:
        from ..delta.store import read_loads
        from ..model.run import new_load_id

        if request.dataset is None:  # a catalog table's folder, which this process cannot ask the catalog
            raise ConfigError(
                "dataset",
                f"is required to load catalog table {request.table_name!r} with spark-submit: the folder "
                "the table is (or is to be created) in, where this task reads the load's record after the "
                "job; or load it in process or over Spark Connect, where the catalog is asked",
            )
        if request.load_id is None:
            request = request.with_load_id(new_load_id())
        options = request.store_options
        known = {r["load_id"] for r in read_loads(request.dataset, storage_options=options)}
        self._submit(request)
        metrics = submitted_load_metrics(request, known, read_loads(request.dataset, storage_options=options))
        return {**metrics, **catalog_table_metrics(request)}

    def _submit(self, request: LoadRequest) -> None:
        """spark-submit submit/remote_job.py with the request as a JSON file; JobFailedError if it fails."""
        with tempfile.TemporaryDirectory(prefix="deltamerge-") as folder:
            request_file = os.path.join(folder, "request.json")
            with open(request_file, "w", encoding="utf-8") as handle:
                handle.write(request.to_json())
            arguments = submit_arguments(
                request_file,
                name=f"deltamerge {request.table}",
                python=self.python,
                spark_conf=self.spark_conf,
                submit_options=self.submit_options,
                delta_jars=self.delta_jars,
            )
            self._submit_hook = masking_submit_hook(self._secrets)(conn_id=self.conn_id, **arguments)
            with resources.as_file(remote_job_resource()) as application:
                try:
                    # cwd: the job's scratch files (spark-warehouse, derby.log) stay in the temp folder
                    env = job_env(spark_submit_env(os.environ), request.storage_options)
                    self._submit_hook.submit(str(application), env=env, cwd=folder)
                except AirflowException as exc:
                    head, tail = split_log_tail(redact_text(str(exc), self._secrets))
                    raise JobFailedError(f"spark job for {request.table_uri} failed: {head}", tail) from None

    def kill(self) -> None:
        """Stop a running spark-submit job (called from the operator's on_kill)."""
        if self._submit_hook is not None:
            self._submit_hook.on_kill()
