"""A new local session defers C2 (spark/jit_options.py) unless its caller chose how the JVM compiles."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_deltamerge.spark import class_archive, jit_options
from airflow_provider_deltamerge.spark.session import local_session_conf, log_java_options

OPTIONS = jit_options.JAVA_OPTIONS
DEFERRED = " ".join(jit_options.LATE_C2)


@pytest.fixture(autouse=True)
def nothing_set_elsewhere(monkeypatch, tmp_path):
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))  # no spark-defaults.conf
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    monkeypatch.setenv(class_archive.ENV, "off")


def test_a_new_local_session_defers_c2_after_the_callers_own_options():
    assert local_session_conf()[OPTIONS] == DEFERRED
    assert local_session_conf({OPTIONS: "-Xss4m -Dsite=1"})[OPTIONS] == f"-Xss4m -Dsite=1 {DEFERRED}"


@pytest.mark.parametrize(
    "theirs",
    [
        "-XX:TieredStopAtLevel=1",
        "-XX:-TieredCompilation",
        "-XX:Tier4InvocationThreshold=5000",
        "-Xint",
        "-XX:CompileThresholdScaling=0.5",
    ],
)
def test_a_compilation_policy_of_the_callers_stands(theirs):
    assert local_session_conf({OPTIONS: theirs})[OPTIONS] == theirs


def test_java_options_set_in_spark_defaults_are_not_replaced(tmp_path):
    (tmp_path / "spark-defaults.conf").write_text(f"{OPTIONS} -Dsite=1\n")
    assert OPTIONS not in local_session_conf()


def test_the_archive_comes_first_and_the_deferral_stays(monkeypatch, tmp_path):
    monkeypatch.setenv(class_archive.ENV, str(tmp_path))
    class_archive.archive_path({}).write_bytes(b"archive")
    options = local_session_conf({OPTIONS: "-Xss4m"})[OPTIONS]
    assert options.startswith("-XX:SharedArchiveFile=") and options.endswith(f"-Xss4m {DEFERRED}")


def test_the_task_log_says_how_the_jvm_compiles(caplog):
    with caplog.at_level(logging.INFO, logger="airflow_provider_deltamerge.spark.session"):
        log_java_options(local_session_conf())
        log_java_options(local_session_conf({OPTIONS: "-XX:TieredStopAtLevel=1"}))
        log_java_options({})
    said = [m for m in caplog.messages if "compil" in m]
    assert "C2 compiles deferred" in said[0]
    assert "kept as set" in said[1] and "spark.driver.extraJavaOptions" in said[1]
    assert "Java's default compilation" in said[2]
