"""Which JVM class archive a new local session starts from (spark/class_archive.py), without Spark."""

from __future__ import annotations

import pytest

from airflow_provider_deltamerge.cli import jvm_archive
from airflow_provider_deltamerge.spark import class_archive, jit_options
from airflow_provider_deltamerge.spark.session import local_session_conf

OPTIONS = class_archive.JAVA_OPTIONS
DEFERRED = " ".join(jit_options.LATE_C2)  # spark/jit_options.py: after the caller's options


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(class_archive.ENV, str(tmp_path))
    return tmp_path


def test_a_session_starts_from_the_archive_made_for_its_java_and_jars(folder):
    assert class_archive.session_java_options({}) == {}  # none made yet
    path = class_archive.archive_path({})
    assert path.parent == folder and path.suffix == ".jsa"
    path.write_bytes(b"archive")
    options = class_archive.session_java_options({})[OPTIONS]
    assert options.startswith(f"-XX:SharedArchiveFile={path} ")
    assert local_session_conf()[OPTIONS] == f"{options} {DEFERRED}"


def test_jars_added_by_the_conf_name_another_archive(folder):
    assert class_archive.archive_path({"spark.jars": "/opt/delta.jar"}) != class_archive.archive_path({})


def test_the_command_makes_the_archive_a_session_with_the_environments_delta_jars_looks_for(
    folder, tmp_path, monkeypatch
):
    jars = [tmp_path / "delta-spark_2.13-4.0.0.jar", tmp_path / "delta-storage-4.0.0.jar"]
    for jar in jars:
        jar.write_bytes(b"jar")
    monkeypatch.setenv("DELTA_SPARK_JARS", ",".join(str(jar) for jar in jars))
    made = jvm_archive.archive_of({"spark.driver.memory": "2g"})
    assert made != class_archive.archive_path({})  # Delta's jars name another archive
    made.write_bytes(b"archive")
    session_options = local_session_conf({"spark.driver.memory": "2g"})[OPTIONS]
    assert session_options.startswith(f"-XX:SharedArchiveFile={made} ")


def test_the_callers_java_options_are_kept_after_the_archive_and_their_own_sharing_stands(folder):
    class_archive.archive_path({}).write_bytes(b"archive")
    theirs = {OPTIONS: "-Xss4m"}
    assert class_archive.session_java_options(theirs)[OPTIONS].endswith(" -Xss4m")
    for own in ("-Xshare:off", "-XX:SharedArchiveFile=/x.jsa", "-XX:ArchiveClassesAtExit=/y.jsa"):
        assert class_archive.session_java_options({OPTIONS: own}) == {}
        assert local_session_conf({OPTIONS: own})[OPTIONS] == f"{own} {DEFERRED}"


def test_java_options_set_in_spark_defaults_are_not_replaced(folder, tmp_path_factory, monkeypatch):
    class_archive.archive_path({}).write_bytes(b"archive")
    conf_dir = tmp_path_factory.mktemp("conf")
    (conf_dir / "spark-defaults.conf").write_text(f"{OPTIONS} -Dsite=1\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    assert OPTIONS not in local_session_conf()


def test_off_turns_it_off(monkeypatch):
    monkeypatch.setenv(class_archive.ENV, "off")
    assert class_archive.archive_path({}) is None
    assert class_archive.session_java_options({}) == {}
    assert "SharedArchiveFile" not in local_session_conf()[OPTIONS]
