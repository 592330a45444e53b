"""`delta_jars` as session conf and spark-submit arguments (pure): jars checked, downloads opt-in only."""

from __future__ import annotations

import os

import pytest

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.model.delta_jars import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    ENV_VAR,
    DeltaJars,
    delta_jars_from_env,
    merge_spark_conf,
    parse_delta_jars,
)
from airflow_provider_deltamerge.spark import jit_options
from airflow_provider_deltamerge.spark.session import (
    LOCAL_SESSION_CONF,
    SMALL_BATCH_CONF,
    local_session_conf,
    python_conf,
)

DELTA_SQL = {"spark.sql.extensions": DELTA_EXTENSION, "spark.sql.catalog.spark_catalog": DELTA_CATALOG}
LATE_C2 = jit_options.session_java_options({})  # what a new local session's JVM adds
COORDINATE = "io.delta:delta-spark_2.13:4.0.0"


@pytest.fixture
def jars(tmp_path):
    """A folder with Delta's two jars (empty files: only their paths matter here)."""
    folder = tmp_path / "delta"
    folder.mkdir()
    paths = [str(folder / "delta-spark_2.13-4.0.0.jar"), str(folder / "delta-storage-4.0.0.jar")]
    for path in paths:
        open(path, "wb").close()
    return paths


def test_no_jars_means_no_delta_configuration():
    assert parse_delta_jars(None) is None
    assert local_session_conf() == {**LOCAL_SESSION_CONF, **SMALL_BATCH_CONF, **python_conf(), **LATE_C2}


def test_local_jars_go_to_spark_jars_with_the_delta_extension_and_catalog(jars):
    parsed = parse_delta_jars(jars)
    assert parsed == DeltaJars(jars=tuple(jars))
    assert parsed.spark_conf() == {**DELTA_SQL, "spark.jars": ",".join(jars)}
    assert parsed.spark_submit_args() == [
        "--jars",
        ",".join(jars),
        "--conf",
        f"spark.sql.extensions={DELTA_EXTENSION}",
        "--conf",
        f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}",
    ]
    assert parsed.spark_submit_options() == {"jars": ",".join(jars), "conf": DELTA_SQL}
    assert parse_delta_jars({"jars": jars}) == parsed


def test_a_folder_stands_for_every_jar_in_it_and_file_uris_are_local_paths(jars):
    folder = os.path.dirname(jars[0])
    open(os.path.join(folder, "README.txt"), "w").close()
    assert parse_delta_jars(folder).jars == tuple(sorted(jars))
    assert parse_delta_jars("file://" + jars[0]).jars == (jars[0],)


def test_relative_jar_paths_become_absolute(jars, monkeypatch):
    monkeypatch.chdir(os.path.dirname(jars[0]))
    assert parse_delta_jars("delta-storage-4.0.0.jar").jars == (jars[1],)


def test_a_missing_jar_is_an_error_naming_it(jars, tmp_path):
    missing = str(tmp_path / "delta-spark_2.13-9.9.9.jar")
    with pytest.raises(ConfigError, match="does not exist") as error:
        parse_delta_jars([jars[0], missing])
    assert error.value.argument == "delta_jars" and missing in str(error.value)


def test_a_folder_without_jars_and_a_file_that_is_not_a_jar_are_errors(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="holds no .jar files"):
        parse_delta_jars(str(tmp_path))
    with pytest.raises(ConfigError, match="is not a .jar file"):
        parse_delta_jars(str(tmp_path / "notes.txt"))


def test_remote_jar_uris_are_passed_on_unchecked():
    uris = ["hdfs:///libs/delta-spark_2.13-4.0.0.jar", "local:/opt/delta/delta-storage-4.0.0.jar"]
    assert parse_delta_jars(uris).spark_conf()["spark.jars"] == ",".join(uris)


def test_maven_packages_are_refused_without_the_explicit_download_opt_in():
    with pytest.raises(ConfigError, match="allow_download=True") as error:
        parse_delta_jars({"packages": [COORDINATE]})
    assert COORDINATE in str(error.value)
    with pytest.raises(ConfigError, match="allow_download=True"):
        parse_delta_jars({"packages": COORDINATE, "allow_download": False})


def test_maven_packages_with_the_opt_in_go_to_spark_jars_packages(jars):
    parsed = parse_delta_jars({"packages": [COORDINATE], "allow_download": True, "jars": jars[1:]})
    assert parsed.spark_conf() == {**DELTA_SQL, "spark.jars": jars[1], "spark.jars.packages": COORDINATE}
    assert parsed.spark_submit_args()[:4] == ["--jars", jars[1], "--packages", COORDINATE]


def test_jars_alone_never_ask_spark_to_download():
    parsed = parse_delta_jars(["local:/opt/delta-spark.jar"])
    assert "spark.jars.packages" not in parsed.spark_conf()
    assert "--packages" not in parsed.spark_submit_args()


@pytest.mark.parametrize(
    "value, message",
    [
        ({}, "names no jars and no packages"),
        ({"jar": ["x.jar"]}, r"unknown key\(s\) \['jar'\]; valid: jars, packages, allow_download"),
        ({"packages": ["io.delta:delta-spark"], "allow_download": True}, "not a Maven coordinate"),
        ({"packages": [COORDINATE], "allow_download": "yes"}, "allow_download must be True or False"),
        (42, "must be a jar path"),
        ({"jars": 42}, "must be a string or a list"),
        ([""], "is not a jar path"),
    ],
)
def test_bad_delta_jars_values_say_what_is_wrong(value, message):
    with pytest.raises(ConfigError, match=message):
        parse_delta_jars(value)


def test_the_environment_hook_reads_path_separated_or_comma_separated_jars(jars):
    assert delta_jars_from_env({}) is None
    assert delta_jars_from_env({ENV_VAR: "  "}) is None
    assert delta_jars_from_env({ENV_VAR: os.pathsep.join(jars)}).jars == tuple(jars)
    assert delta_jars_from_env({ENV_VAR: ",".join(jars)}).jars == tuple(jars)


def test_the_environment_hook_names_itself_when_a_jar_is_missing(tmp_path):
    with pytest.raises(ConfigError, match="does not exist") as error:
        delta_jars_from_env({ENV_VAR: str(tmp_path / "delta.jar")})
    assert error.value.argument == ENV_VAR


def test_list_confs_are_merged_not_overwritten():
    merged = merge_spark_conf(
        {"spark.sql.extensions": "com.example.Ext", "spark.jars": "/a.jar", "spark.ui.enabled": "false"},
        {"spark.sql.extensions": DELTA_EXTENSION, "spark.jars": "/a.jar,/b.jar", "spark.ui.enabled": "true"},
    )
    assert merged == {
        "spark.sql.extensions": f"com.example.Ext,{DELTA_EXTENSION}",
        "spark.jars": "/a.jar,/b.jar",
        "spark.ui.enabled": "true",
    }


def test_the_local_session_keeps_our_conf_and_the_callers_and_adds_delta(jars):
    extra = {"spark.sql.extensions": "com.example.Ext", "spark.sql.shuffle.partitions": "2"}
    conf = local_session_conf(extra, jars)
    assert conf == {
        **LOCAL_SESSION_CONF,
        **SMALL_BATCH_CONF,
        **python_conf(),
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.extensions": f"com.example.Ext,{DELTA_EXTENSION}",
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.jars": ",".join(jars),
        **LATE_C2,
    }


def test_the_local_session_refuses_missing_jars_before_starting_anything(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        local_session_conf(delta_jars=[str(tmp_path / "nope.jar")])
