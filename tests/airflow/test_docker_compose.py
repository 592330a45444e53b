"""docker-compose.yaml cannot run here (no Docker engine); check that it parses and is consistent with
the project: services, the image that installs this provider at the tested set, the Delta jars
for that Spark, the mounted example DAGs, the shared lake volume and the Spark connection."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_SERVICES = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
SPARK_SERVICES = ("spark-master", "spark-worker")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yaml").read_text())


@pytest.fixture(scope="module")
def pins() -> dict[str, str]:
    """The tested set the image installs: constraints/tested.txt, names in their canonical form."""
    lines = (ROOT / "constraints" / "tested.txt").read_text().splitlines()
    pinned = (re.fullmatch(r"([\w.\-]+)==([\w.]+)", line) for line in lines if not line.startswith("#"))
    return {re.sub(r"[-_.]+", "-", m.group(1)).lower(): m.group(2) for m in pinned if m}


def dockerfile(compose: dict, service: str) -> str:
    return compose["services"][service]["build"]["dockerfile_inline"]


def test_services_are_airflow_3_and_a_spark_cluster(compose):
    assert set(compose["services"]) == {"postgres", "airflow-init", *AIRFLOW_SERVICES, *SPARK_SERVICES}
    commands = {name: compose["services"][name]["command"] for name in AIRFLOW_SERVICES}
    assert commands == {
        "airflow-apiserver": "api-server",
        "airflow-scheduler": "scheduler",
        "airflow-dag-processor": "dag-processor",
        "airflow-triggerer": "triggerer",
    }
    for name in AIRFLOW_SERVICES:
        depends = compose["services"][name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy"
        assert depends["airflow-init"]["condition"] == "service_completed_successfully"


def test_one_image_installs_this_provider_at_the_pinned_versions(compose, pins):
    images = {
        compose["services"][name]["image"] for name in (*AIRFLOW_SERVICES, *SPARK_SERVICES, "airflow-init")
    }
    assert images == {"airflow-provider-deltamerge:dev"}
    text = dockerfile(compose, "airflow-scheduler")
    assert compose["services"]["airflow-scheduler"]["build"]["context"] == "."
    assert f"FROM apache/airflow:{pins['apache-airflow']}-python3" in text
    assert (
        "COPY --chown=airflow:0 airflow_provider_deltamerge /opt/deltamerge/src/airflow_provider_deltamerge"
        in text
    )
    assert "COPY --chown=airflow:0 constraints /opt/deltamerge/src/constraints" in text
    assert "pip install --no-cache-dir -c /opt/deltamerge/src/constraints/tested.txt" in text
    assert '"/opt/deltamerge/src[demo,delta-spark]"' in text
    assert "openjdk-17-jre-headless" in text
    for copied in re.findall(r"^COPY --chown=\S+ (.+) /opt/deltamerge/src/", text, re.M):
        for path in copied.split():
            assert (ROOT / path).exists(), path


def test_delta_jars_match_spark_and_delta_spark_pins(compose, pins):
    text = dockerfile(compose, "spark-worker")
    spark_minor = ".".join(pins["pyspark"].split(".")[:2])
    jar = f"delta-spark_{spark_minor}_2.13-{pins['delta-spark']}.jar"
    storage = f"delta-storage-{pins['delta-spark']}.jar"
    assert f"/{jar}" in text and f"/{storage}" in text
    spark_jars = re.search(r"'spark\.jars (\S+)'", text).group(1).split(",")
    assert spark_jars == [f"/opt/delta-jars/{jar}", f"/opt/delta-jars/{storage}"]
    assert "spark.sql.extensions io.delta.sql.DeltaSparkSessionExtension" in text
    assert "SPARK_CONF_DIR=/opt/spark-conf" in text and "> /opt/spark-conf/spark-defaults.conf" in text


def test_example_dags_are_mounted_and_the_lake_is_shared_at_one_path(compose):
    demo_dir = compose["services"]["airflow-scheduler"]["environment"]["DELTAMERGE_DEMO_DIR"]
    for name in AIRFLOW_SERVICES:
        service = compose["services"][name]
        assert "./dags_examples:" + service["environment"]["AIRFLOW__CORE__DAGS_FOLDER"] in service["volumes"]
        assert f"deltamerge-data:{demo_dir}" in service["volumes"]
    for name in SPARK_SERVICES:  # executors read the landing data and write the tables
        assert f"deltamerge-data:{demo_dir}" in compose["services"][name]["volumes"]
    assert "deltamerge-data" in compose["volumes"]
    assert (ROOT / "dags_examples" / "nycflights13_landing.py").is_file()
    assert (
        "/opt/airflow/dags/nycflights13_landing.py " + demo_dir
        in compose["services"]["airflow-init"]["command"][-1]
    )


def test_spark_connection_points_at_the_master(compose):
    env = compose["services"]["airflow-scheduler"]["environment"]
    conn_id = env["DELTAMERGE_CONN_ID"]
    connection = json.loads(env[f"AIRFLOW_CONN_{conn_id.upper()}"])
    assert connection["conn_type"] == "spark"
    master = compose["services"]["spark-master"]["command"][-1]
    host, port = re.search(r"--host (\S+) --port (\d+)", master).groups()
    assert connection["host"] == f"spark://{host}:{port}"
    assert f"spark://{host}:{port}" in compose["services"]["spark-worker"]["command"][-1]


def test_published_ports_are_loopback_only(compose):
    published = [p for service in compose["services"].values() for p in service.get("ports", [])]
    assert published and all(p.startswith("127.0.0.1:") for p in published)
