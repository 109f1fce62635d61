"""docker-compose.yml, the Dockerfile and the sample configs hold together, without running them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
CONTRACT_KEYS = {"kafka", "topics", "runner", "rest", "budgets", "pollers"}


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = load(COMPOSE)
    assert isinstance(compose, dict)
    return compose["services"]


def test_kafka_is_a_single_kraft_node(services: dict[str, Any]) -> None:
    kafka = services["kafka"]
    assert kafka["image"] == "apache/kafka:4.1.0"
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    for name in (
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR",
    ):
        assert str(env[name]) == "1", name


def test_runner_is_built_here_and_waits_for_kafka(services: dict[str, Any]) -> None:
    runner = services["watukuy"]
    build = runner["build"]
    assert (REPO / build["context"] / build.get("dockerfile", "Dockerfile")).is_file()
    assert runner["command"] == [
        "watukuy-source",
        "--config",
        "/etc/watukuy/config/invoices.yaml",
    ]
    assert "8083:8083" in runner["ports"]
    assert "kafka" in runner["depends_on"]


def test_runner_polls_the_vendor_service(services: dict[str, Any]) -> None:
    vendor = services["vendor"]
    assert vendor["command"][:3] == ["python", "-m", "integration.simulator"]
    assert "0.0.0.0" in vendor["command"]  # reachable from the runner's container
    assert "healthcheck" in vendor
    runner = services["watukuy"]
    assert runner["environment"]["WATUKUY_VENDOR_URL"] == "http://vendor:8099"
    assert runner["depends_on"]["vendor"]["condition"] == "service_healthy"
    # The runner's config is declarative: no module of the user's is needed to start it.
    config = load(REPO / "config" / "invoices.yaml")
    assert all("name" in poller and "python" not in poller for poller in config["pollers"])


def test_mounted_files_exist(services: dict[str, Any]) -> None:
    mounts = [volume.split(":") for volume in services["watukuy"]["volumes"]]
    assert ["./config", "/etc/watukuy/config", "ro"] in mounts
    assert ["./schemas", "/etc/watukuy/schemas", "ro"] in mounts
    for source, *_ in mounts:
        if source.startswith("."):
            assert (REPO / source).exists(), source


def test_dockerfile_installs_the_project() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in text
    assert "pip install ." in text
    for line in text.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (REPO / source).exists(), line


@pytest.mark.parametrize("name", ["invoices.yaml", "python.yaml"])
def test_configs_have_the_contract_keys(name: str) -> None:
    config = load(REPO / "config" / name)
    assert set(config) >= CONTRACT_KEYS
    assert config["kafka"]["bootstrap.servers"]
    assert set(config["topics"]) >= {"prefix", "partitions", "replication.factor"}
    assert config["runner"]["id"]
    host, _, port = config["rest"]["listen"].rpartition(":")
    assert host and port == "8083"
    assert config["pollers"]


def test_compose_config_talks_to_the_compose_broker() -> None:
    assert load(REPO / "config" / "invoices.yaml")["kafka"]["bootstrap.servers"] == "kafka:9092"


def test_docker_compose_accepts_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker is not installed")
    probe = subprocess.run(
        [docker, "compose", "version"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        pytest.skip("docker compose is not available")
    checked = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert checked.returncode == 0, checked.stderr
