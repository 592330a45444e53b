"""The `delta_jars` option: where Spark finds Delta Lake's JVM classes (pure, no Spark).

The delta-spark writer needs Delta's jars on Spark's class path plus Delta's SQL extension and catalog.
`delta_jars` says where the jars come from; this module turns it into session conf (local session
builder) and spark-submit arguments. Accepted shapes:

- ``None``: no Delta jars; ``backend="auto"`` then uses the delta-rs writer.
- a local jar path, a folder of jars, or a list of them: ``["/opt/delta/delta-spark_2.13-4.0.0.jar",
  "/opt/delta/delta-storage-4.0.0.jar"]`` or ``"/opt/delta"`` (every ``*.jar`` in it). Missing files
  are an error. URIs with a scheme (``hdfs://``, ``s3a://``, ``local:/``) are passed on unchecked.
- ``{"jars": [...]}``: the same as a list.
- ``{"packages": ["io.delta:delta-spark_2.13:4.0.0"], "allow_download": True}``: Maven coordinates that
  Spark resolves with Ivy when the session starts, which needs the network. Refused unless
  ``allow_download`` is True, so nothing is ever downloaded by accident. ``jars`` may be given too.

``DELTA_SPARK_JARS`` (environment): local jar files or folders separated by ``os.pathsep`` or commas;
`delta_jars_from_env` reads it. Where no `delta_jars` is given, a new local session and a spark-submit
job take the jars it names (`given_or_env_jars`), so a worker (or a test run) with it set loads with the
delta-spark writer without each DAG naming the jars.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# A Spark Connect server's settings that let delta-spark's DeltaTable calls reach Delta on it (the plugins
# live in Delta's delta-connect-server jar).
DELTA_CONNECT_PLUGINS = {
    "spark.connect.extensions.relation.classes": "org.apache.spark.sql.connect.delta.DeltaRelationPlugin",
    "spark.connect.extensions.command.classes": "org.apache.spark.sql.connect.delta.DeltaCommandPlugin",
}
ENV_VAR = "DELTA_SPARK_JARS"
OPTION_KEYS = ("jars", "packages", "allow_download")
# Spark confs holding comma-separated lists: merged, never overwritten.
LIST_CONFS = ("spark.sql.extensions", "spark.jars", "spark.jars.packages")

_MAVEN_COORDINATE = re.compile(r"[\w.\-]+:[\w.\-]+:[\w.\-]+")
_URI_SCHEME = re.compile(r"[A-Za-z][\w+.\-]*:")
_HOW_TO_GET_JARS = (
    "Delta needs delta-spark_<scala>-<version>.jar and delta-storage-<version>.jar matching the Spark version"
)


@dataclass(frozen=True)
class DeltaJars:
    """Validated `delta_jars`: jar locations and (opted-in) Maven coordinates."""

    jars: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()

    def spark_conf(self) -> dict[str, str]:
        """Session conf that puts Delta on the class path and enables its SQL extension and catalog."""
        conf = _delta_sql_conf()
        if self.jars:
            conf["spark.jars"] = ",".join(self.jars)
        if self.packages:
            conf["spark.jars.packages"] = ",".join(self.packages)
        return conf

    def spark_submit_options(self) -> dict[str, Any]:
        """The same as keyword arguments of Airflow's SparkSubmitHook: jars, packages, conf."""
        options: dict[str, Any] = {"conf": _delta_sql_conf()}
        if self.jars:
            options["jars"] = ",".join(self.jars)
        if self.packages:
            options["packages"] = ",".join(self.packages)
        return options

    def spark_submit_args(self) -> list[str]:
        """The same as spark-submit command-line arguments."""
        options = self.spark_submit_options()
        args: list[str] = []
        for flag in ("jars", "packages"):
            if flag in options:
                args += [f"--{flag}", options[flag]]
        for key, value in options["conf"].items():
            args += ["--conf", f"{key}={value}"]
        return args


def parse_delta_jars(value: Any, argument: str = "delta_jars") -> DeltaJars | None:
    """Validate a `delta_jars` value (see the module docstring); None stays None."""
    if value is None or isinstance(value, DeltaJars):
        return value
    if isinstance(value, (str, os.PathLike)):
        value = {"jars": [value]}
    elif isinstance(value, (list, tuple)):
        value = {"jars": list(value)}
    if not isinstance(value, Mapping):
        raise ConfigError(
            argument, f"{value!r} must be a jar path, a list of them, or a dict of {OPTION_KEYS}"
        )
    unknown = sorted(set(value) - set(OPTION_KEYS))
    if unknown:
        raise ConfigError(argument, f"unknown key(s) {unknown}; valid: {', '.join(OPTION_KEYS)}")
    allow_download = value.get("allow_download", False)
    if not isinstance(allow_download, bool):
        raise ConfigError(argument, f"allow_download must be True or False, got {allow_download!r}")
    jars = tuple(p for entry in _as_list(argument, value.get("jars")) for p in _jar_paths(argument, entry))
    packages = tuple(_maven_coordinate(argument, p) for p in _as_list(argument, value.get("packages")))
    if packages and not allow_download:
        raise ConfigError(
            argument,
            f"packages {list(packages)} make Spark download jars from Maven when the session starts; "
            "pass allow_download=True to opt in, or give local jar paths with 'jars' instead",
        )
    if not jars and not packages:
        raise ConfigError(argument, f"{value!r} names no jars and no packages; {_HOW_TO_GET_JARS}")
    return DeltaJars(jars, packages)


def delta_jars_from_env(environ: Mapping[str, str] | None = None) -> DeltaJars | None:
    """The local jars named by DELTA_SPARK_JARS, or None when it is unset or empty."""
    text = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not text:
        return None
    entries = [e.strip() for part in text.split(os.pathsep) for e in part.split(",") if e.strip()]
    return parse_delta_jars({"jars": entries}, argument=ENV_VAR)


def given_or_env_jars(value: Any, argument: str = "delta_jars") -> DeltaJars | None:
    """`value` validated; where it is None, the jars DELTA_SPARK_JARS names (None where it is unset too)."""
    jars = parse_delta_jars(value, argument)
    return jars if jars is not None else delta_jars_from_env()


def merge_spark_conf(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """base updated with extra; list-valued confs (extensions, jars, packages) keep the entries of both."""
    merged = dict(base)
    for key, value in extra.items():
        if key in LIST_CONFS and merged.get(key):
            entries = [e for e in merged[key].split(",") if e]
            entries += [e for e in value.split(",") if e and e not in entries]
            merged[key] = ",".join(entries)
        else:
            merged[key] = value
    return merged


def _delta_sql_conf() -> dict[str, str]:
    return {"spark.sql.extensions": DELTA_EXTENSION, "spark.sql.catalog.spark_catalog": DELTA_CATALOG}


def _as_list(argument: str, value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ConfigError(argument, f"{value!r} must be a string or a list of strings")


def _jar_paths(argument: str, entry: Any) -> list[str]:
    """One `jars` entry as jar locations: a URI as given, a local jar file, or every jar of a folder."""
    if not isinstance(entry, (str, os.PathLike)) or not str(entry).strip():
        raise ConfigError(argument, f"{entry!r} is not a jar path")
    text = os.fspath(entry).strip()
    if text.startswith("file:"):
        text = re.sub(r"^file:(//)?", "", text)
    elif _URI_SCHEME.match(text) and not os.path.exists(text):
        return [text]  # hdfs://, s3a://, local:/ ... : resolved where Spark runs
    path = os.path.abspath(os.path.expanduser(text))
    if os.path.isdir(path):
        jars = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".jar"))
        if not jars:
            raise ConfigError(argument, f"folder {path!r} holds no .jar files; {_HOW_TO_GET_JARS}")
        return jars
    if not os.path.isfile(path):
        raise ConfigError(argument, f"jar {path!r} does not exist; {_HOW_TO_GET_JARS}, as local files")
    if not path.endswith(".jar"):
        raise ConfigError(argument, f"{path!r} is not a .jar file")
    return [path]


def _maven_coordinate(argument: str, value: Any) -> str:
    if not isinstance(value, str) or not _MAVEN_COORDINATE.fullmatch(value.strip()):
        raise ConfigError(argument, f"package {value!r} is not a Maven coordinate group:artifact:version")
    return value.strip()
