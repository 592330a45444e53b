"""Whether a Spark session's Hadoop has a file system for a table's path: the delta-spark writer reads and
writes through it, so an `s3://` table in a session without one (no hadoop-aws jar, no `fs.s3.impl`) cannot
be loaded by delta-spark, whatever Delta's own classes say. Asked of Hadoop itself, never guessed from the
scheme."""

from __future__ import annotations

from urllib.parse import urlsplit

from .locking import local_path


def path_scheme(path: str) -> str:
    """The URI scheme of a table path, lower case; "" for a local one (`locking.local_path`'s answer)."""
    return "" if local_path(path) is not None else urlsplit(path).scheme.lower()


def spark_reaches(spark, path: str) -> tuple[bool, str]:
    """(reaches, why): whether the session's Hadoop configuration has a file system class for the path's
    scheme that loads (`FileSystem.getFileSystemClass`, as Spark's own reads look it up). Local paths always;
    a Spark Connect session's server is not visible from here, so it is taken to reach what it is given."""
    scheme = path_scheme(path)
    if not scheme:
        return True, "a local path"
    context = getattr(spark, "_jsc", None)
    jvm = getattr(spark, "_jvm", None)
    if context is None or jvm is None:
        return True, f"Spark Connect: the server's file system for {scheme!r} is not visible here"
    from py4j.protocol import Py4JJavaError

    try:
        found = jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, context.hadoopConfiguration())
    except Py4JJavaError as error:
        return False, f"its Hadoop has no file system for {scheme!r} ({_first_line(error)})"
    return True, f"its Hadoop reaches {scheme!r} through {found.getName()}"


_HADOOP_AWS = "the hadoop-aws jar and the AWS SDK bundle it was built with on the session's class path"
_HADOOP_AZURE = "the hadoop-azure jar on the session's class path"
_NEEDS = {
    "s3": f"{_HADOOP_AWS}, and spark.hadoop.fs.s3.impl=org.apache.hadoop.fs.s3a.S3AFileSystem",
    "s3a": _HADOOP_AWS,
    "abfs": _HADOOP_AZURE,
    "abfss": _HADOOP_AZURE,
    "wasbs": _HADOOP_AZURE,
    "gs": "the GCS connector jar on the session's class path",
}


def missing_file_system_advice(scheme: str) -> str:
    """What a session needs to reach `scheme`, for an error or a log line."""
    return _NEEDS.get(
        scheme, f"a Hadoop file system for {scheme!r} (spark.hadoop.fs.{scheme}.impl and its jar)"
    )


def _first_line(error) -> str:
    text = str(getattr(error, "java_exception", error))
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__
