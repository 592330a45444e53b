"""The local session's JVM class archive: Java's class-data sharing for Spark's classes.

A fresh local session spends seconds loading and verifying the same few thousand Spark classes before
its first job (an Airflow task is a fresh process, so every task pays it). A class-data-sharing
archive (JDK 13+ `-XX:ArchiveClassesAtExit`) holds them ready to map: a session started with it
reaches its first job seconds sooner (benchmarks/, the cold regime).

`deltamerge jvm-archive` makes the archive once (cli/jvm_archive.py); a new local session uses it when
one exists for its Java, its Spark jars and the jars its conf adds. The JVM itself checks the archive
against the class path it runs with and ignores it where they differ. An archive is only ever put in
place whole (made under another name, renamed once the JVM that wrote it exited cleanly): a JVM
mapping a truncated archive crashes.

Where: the folder `DELTAMERGE_JVM_ARCHIVE` names, else `$XDG_CACHE_HOME/airflow-provider-deltamerge`
(`~/.cache/...`); `DELTAMERGE_JVM_ARCHIVE=off` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

ENV = "DELTAMERGE_JVM_ARCHIVE"
OFF = ("off", "false", "0", "no")
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# Keys of a session's conf that change the driver's class path, so the archive it may use.
CLASS_PATH_KEYS = ("spark.jars", "spark.driver.extraClassPath", "spark.jars.packages")
# Options by which a caller chose class-data sharing for themselves: theirs stand.
CALLERS_OWN = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare")
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a mismatched archive is ignored without a warning


def archive_folder() -> Path | None:
    """Where archives are kept, or None when turned off."""
    chosen = os.environ.get(ENV, "").strip()
    if chosen.lower() in OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "airflow-provider-deltamerge"


def archive_path(conf: dict[str, str] | None = None) -> Path | None:
    """The archive of a session with `conf`: named by what decides the JVM's classes (None: off)."""
    folder = archive_folder()
    if folder is None:
        return None
    return folder / f"spark-{_class_path_key(conf or {})}.jsa"


def session_java_options(conf: dict[str, str] | None = None) -> dict[str, str]:
    """The driver's Java options with the archive added, where one exists and the caller chose no
    class-data sharing of their own; {} otherwise."""
    conf = conf or {}
    theirs = conf.get(JAVA_OPTIONS, "")
    if any(option in theirs for option in CALLERS_OWN):
        return {}
    path = archive_path(conf)
    if path is None or not path.is_file():
        return {}
    return {JAVA_OPTIONS: f"-XX:SharedArchiveFile={path} {QUIET} {theirs}".strip()}


def writing_java_options(partial: Path, conf: dict[str, str] | None = None) -> dict[str, str]:
    """The driver's Java options of the session that writes an archive to `partial` as its JVM exits."""
    theirs = (conf or {}).get(JAVA_OPTIONS, "")
    return {JAVA_OPTIONS: f"-XX:ArchiveClassesAtExit={partial} {QUIET} {theirs}".strip()}


def _class_path_key(conf: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for part in (_java(), *_spark_jars(), *(f"{key}={conf.get(key, '')}" for key in CLASS_PATH_KEYS)):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:16]


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java else "no java"


def _spark_jars() -> list[str]:
    """Spark's own jars (name, size, time), which the JVM checks the archive against too."""
    from pyspark.find_spark_home import _find_spark_home

    folder = Path(_find_spark_home()) / "jars"
    try:
        jars = sorted(folder.glob("*.jar"))
    except OSError:
        return []
    return [f"{jar.name}:{jar.stat().st_size}:{int(jar.stat().st_mtime)}" for jar in jars]
