"""Real Spark servers for tests, started from the pyspark distribution on loopback and always stopped:
a standalone master with one worker, and a Spark Connect server (with the Delta jars DELTA_SPARK_JARS
names on its class path, and Delta Connect's plugins, where those jars hold them)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 90


def expected_writer() -> str:
    """The writer backend="auto" picks for these tests' small batches: delta-spark where DELTA_SPARK_JARS
    names Delta's jars (every new local session, spark-submit job and Connect server of the tests has them)
    and DELTAMERGE_AUTO_DELTA_RS_MAX_MB is 0 (scripts/test-delta-spark.sh sets both), else delta-rs."""
    from airflow_provider_deltamerge.delta.selection import auto_delta_rs_max_bytes
    from airflow_provider_deltamerge.model.delta_jars import delta_jars_from_env

    return "delta-spark" if delta_jars_from_env() and auto_delta_rs_max_bytes() == 0 else "delta-rs"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_env(**extra: str) -> dict[str, str]:
    """Environment for Spark processes: pyspark's Spark, this interpreter, this source tree, loopback."""
    from pyspark.find_spark_home import _find_spark_home

    home = _find_spark_home()
    env = dict(os.environ)
    env.update(
        SPARK_HOME=home,
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PATH=os.pathsep.join(
            [os.path.join(home, "bin"), os.path.dirname(sys.executable), env.get("PATH", "")]
        ),
        PYTHONPATH=os.pathsep.join(p for p in [str(ROOT), env.get("PYTHONPATH", "")] if p),
    )
    env.update(extra)
    return env


@contextlib.contextmanager
def running(
    command: list[str], log_file: Path, env: dict[str, str], cwd: Path | None = None
) -> Iterator[subprocess.Popen]:
    """Run a server in its own process group (in `cwd`, where given); stop the whole group on exit."""
    with open(log_file, "wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )
    try:
        yield process
    finally:
        _stop(process)


def _stop(process: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_until(
    check, what: str, log_file: Path, process: subprocess.Popen, timeout: float = START_TIMEOUT
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}:\n{log_file.read_text()[-3000:]}")
        with contextlib.suppress(OSError, ValueError):
            if check():
                return
        time.sleep(0.5)
    raise TimeoutError(f"{what} not ready after {timeout}s:\n{log_file.read_text()[-3000:]}")


def port_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


def _spark_class(env: dict[str, str]) -> str:
    return os.path.join(env["SPARK_HOME"], "bin", "spark-class")


@contextlib.contextmanager
def standalone_cluster(work_dir: Path, worker_cores: int = 2, worker_memory: str = "1g") -> Iterator[str]:
    """A standalone master and one worker on 127.0.0.1; yields the master URL."""
    work_dir.mkdir(parents=True, exist_ok=True)
    env = spark_env(SPARK_NO_DAEMONIZE="1")
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    master_cmd = [
        _spark_class(env),
        "org.apache.spark.deploy.master.Master",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--webui-port",
        str(ui_port),
    ]
    worker_cmd = [
        _spark_class(env),
        "org.apache.spark.deploy.worker.Worker",
        "--host",
        "127.0.0.1",
        "--webui-port",
        str(worker_ui),
        "--cores",
        str(worker_cores),
        "--memory",
        worker_memory,
        "--work-dir",
        str(work_dir / "work"),
        master_url,
    ]

    def alive_workers() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as response:
            state = json.load(response)
        return any(w.get("state") == "ALIVE" for w in state.get("workers", []))

    master_log, worker_log = work_dir / "master.log", work_dir / "worker.log"
    with running(master_cmd, master_log, env) as master:
        wait_until(lambda: port_open(port), "spark master", master_log, master)
        with running(worker_cmd, worker_log, env) as worker:
            wait_until(alive_workers, "spark worker", worker_log, worker)
            yield master_url


def connect_delta_jars():
    """The jars DELTA_SPARK_JARS names where they hold Delta Connect's server plugin, which the
    delta-spark writer's DeltaTable calls need through Connect; else None (the server runs without Delta)."""
    from airflow_provider_deltamerge.model.delta_jars import delta_jars_from_env

    jars = delta_jars_from_env()
    return jars if holds_connect_plugins(jars) else None


def holds_connect_plugins(jars) -> bool:
    """Whether the jars hold Delta Connect's server plugin."""
    return jars is not None and any("delta-connect-server" in j.rsplit("/", 1)[-1] for j in jars.jars)


def connect_writer() -> str:
    """The writer a load through the tests' Connect server gets."""
    return expected_writer() if connect_delta_jars() else "delta-rs"


def _delta_args(jars) -> list[str]:
    """spark-submit arguments of Delta's jars and SQL settings, and Delta Connect's plugins where the jars
    hold them; none without jars."""
    from airflow_provider_deltamerge.model.delta_jars import DELTA_CONNECT_PLUGINS

    if jars is None:
        return []
    plugins = DELTA_CONNECT_PLUGINS if holds_connect_plugins(jars) else {}
    return jars.spark_submit_args() + [a for k, v in plugins.items() for a in ("--conf", f"{k}={v}")]


_CONNECT_JARS = object()  # connect_server's default: the jars connect_delta_jars() gives


@contextlib.contextmanager
def connect_server(
    work_dir: Path,
    token: str | None = None,
    conf: dict[str, str] | None = None,
    delta_jars=_CONNECT_JARS,
) -> Iterator[int]:
    """A Spark Connect server (local[2]) on 127.0.0.1; yields its port. With a token, it requires it.
    `conf`: more settings of the server (a Hive metastore's); `delta_jars`: Delta's jars on its class path
    with Delta's SQL settings (None: no Delta), by default those of connect_delta_jars()."""
    work_dir.mkdir(parents=True, exist_ok=True)
    env = spark_env(**({"SPARK_CONNECT_AUTHENTICATE_TOKEN": token} if token else {}))
    port = free_port()
    jars = connect_delta_jars() if delta_jars is _CONNECT_JARS else delta_jars
    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        **(conf or {}),
        "spark.connect.grpc.binding.address": "127.0.0.1",  # loopback only, whatever `conf` says
        "spark.connect.grpc.binding.port": str(port),
    }
    command = [
        os.path.join(env["SPARK_HOME"], "bin", "spark-submit"),
        "--master",
        "local[2]",
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name",
        "deltamerge-test-connect",
        *(a for k, v in settings.items() for a in ("--conf", f"{k}={v}")),
        *_delta_args(jars),
        "spark-internal",
    ]
    log_file = work_dir / "connect.log"
    with running(command, log_file, env, cwd=work_dir) as server:
        wait_until(lambda: port_open(port), "spark connect server", log_file, server)
        yield port
