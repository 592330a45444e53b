"""A new local session gets the small-batch settings only where nobody else set them, and says so."""

from __future__ import annotations

import logging

from airflow_provider_deltamerge.spark.session import (
    SMALL_BATCH_CONF,
    local_session_conf,
    log_small_batch_conf,
)

ADAPTIVE = "spark.sql.adaptive.enabled"
SHUFFLE = "spark.sql.shuffle.partitions"
COALESCE = "spark.sql.adaptive.coalescePartitions.parallelismFirst"


def test_unset_small_batch_settings_are_applied(monkeypatch):
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    conf = local_session_conf()
    assert {key: conf[key] for key in SMALL_BATCH_CONF} == SMALL_BATCH_CONF
    assert conf[COALESCE] == "false"


def test_settings_the_user_made_anywhere_stand(monkeypatch, tmp_path):
    (tmp_path / "spark-defaults.conf").write_text(f"# a comment\n{COALESCE}  true\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--master local[1] --conf {ADAPTIVE}=false pyspark-shell")
    conf = local_session_conf({SHUFFLE: "7"})
    assert conf[SHUFFLE] == "7"
    assert ADAPTIVE not in conf and COALESCE not in conf  # Spark reads them where the user put them
    assert conf["spark.sql.adaptive.coalescePartitions.enabled"] == "true"


def test_the_settings_applied_and_kept_are_logged(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    with caplog.at_level(logging.INFO, logger="airflow_provider_deltamerge.spark.session"):
        log_small_batch_conf({SHUFFLE: "2"})
    line = caplog.messages[-1]
    assert f"{COALESCE}=false" in line and f"{ADAPTIVE}=true" in line
    assert f"kept as set: {SHUFFLE}" in line and f"{SHUFFLE}=4" not in line
