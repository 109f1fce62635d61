"""docker-compose.yml, the Dockerfile and the configs they mount hold together, without a Docker
engine: the services and images, ports, dependencies, health checks, restart policies, every
mounted file, the Prometheus targets, the Grafana provisioning, and every watukuy config the
runners run passes ``watukuy-source validate``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from integration.registry.apicurio import CCOMPAT_PATH
from watukuy.rest.middleware import OPEN_ROUTES
from watukuy.rest.routes import ROUTES

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
RUNNERS = ("runner-1", "runner-2")
SERVICES = {"kafka", "registry", "vendor", *RUNNERS, "prometheus", "grafana"}
CONTRACT_KEYS = {"kafka", "topics", "runner", "rest", "budgets", "pollers"}
RESTART_POLICIES = {"always", "unless-stopped", "on-failure"}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = load(COMPOSE)
    assert isinstance(compose, dict)
    found: dict[str, Any] = compose["services"]
    return found


def named_volumes(service: dict[str, Any]) -> dict[PurePosixPath, str]:
    """A service's named volumes: the path in the container -> the volume's name."""
    found: dict[PurePosixPath, str] = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if not source.startswith((".", "/")):
            found[PurePosixPath(target)] = source
    return found


def mounts(service: dict[str, Any]) -> dict[PurePosixPath, Path]:
    """A service's bind mounts: the path in the container -> the path in this repository."""
    found: dict[PurePosixPath, Path] = {}
    for volume in service.get("volumes", []):
        source, target, *mode = volume.split(":")
        if PurePosixPath(target) in named_volumes(service):
            continue
        assert source.startswith("./"), f"{volume}: only files of the repository are mounted"
        assert mode == ["ro"], f"{volume}: mounted read-only"
        found[PurePosixPath(target)] = REPO / source
    return found


def in_repo(service: dict[str, Any], container_path: str) -> Path:
    """The repository file a service sees at ``container_path`` through its mounts."""
    path = PurePosixPath(container_path)
    for target, source in mounts(service).items():
        if path == target or target in path.parents:
            return source / path.relative_to(target)
    raise AssertionError(f"{container_path} is not mounted")


def published(service: dict[str, Any]) -> dict[int, int]:
    """Container port -> host port."""
    ports: dict[int, int] = {}
    for entry in service.get("ports", []):
        host, _, container = str(entry).rpartition(":")
        ports[int(container)] = int(host)
    return ports


def runner_config(service: dict[str, Any]) -> Path:
    command = service["command"]
    assert command[:2] == ["watukuy-source", "--config"]
    return in_repo(service, command[2])


def test_the_stack_has_every_service(services: dict[str, Any]) -> None:
    assert set(services) == SERVICES


def test_images_are_pinned_or_built_here(services: dict[str, Any]) -> None:
    for name, service in services.items():
        if "build" in service:
            build = service["build"]
            assert (REPO / build["context"] / build.get("dockerfile", "Dockerfile")).is_file()
        else:
            image = service["image"]
            assert ":" in image and not image.endswith(":latest"), f"{name}: pin {image}"
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["registry"]["image"].startswith("apicurio/apicurio-registry:")
    assert services["prometheus"]["image"].startswith("prom/prometheus:")
    assert services["grafana"]["image"].startswith("grafana/grafana:")


def test_kafka_is_a_single_kraft_node(services: dict[str, Any]) -> None:
    env = services["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    for name in (
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR",
    ):
        assert str(env[name]) == "1", name


def test_kafka_aborts_a_dead_runners_transaction_as_the_docs_recommend(
    services: dict[str, Any],
) -> None:
    operating = (REPO / "docs" / "operating.md").read_text()
    found = re.search(r"`(transaction\.abort\.[a-z.]+)`\s+low \((\d+)\)", operating)
    assert found, "the recommended transaction cleanup setting of docs/operating.md"
    prop, value = found.groups()
    # The apache/kafka image turns KAFKA_A_B_C into a.b.c in server.properties.
    env = services["kafka"]["environment"]
    assert str(env["KAFKA_" + prop.upper().replace(".", "_")]) == value


def test_every_service_has_a_health_check_and_a_restart_policy(services: dict[str, Any]) -> None:
    for name, service in services.items():
        check = service.get("healthcheck")
        assert check and check["test"][0] in ("CMD", "CMD-SHELL"), name
        assert check.get("retries", 0) >= 3, name
        assert service.get("restart") in RESTART_POLICIES, name


def test_runners_are_two_instances_of_one_image_and_config(services: dict[str, Any]) -> None:
    one, two = (services[name] for name in RUNNERS)
    assert one["build"] == two["build"] == services["vendor"]["build"]
    assert one["command"] == two["command"]
    config = load(runner_config(one))
    # No runner.id in the file: each instance's id is its hostname, so they must differ.
    assert "id" not in (config.get("runner") or {})
    assert [services[name]["hostname"] for name in RUNNERS] == list(RUNNERS)


def test_runners_publish_rest_and_metrics_and_are_checked_on_health(
    services: dict[str, Any],
) -> None:
    config = load(runner_config(services["runner-1"]))
    port = int(config["rest"]["listen"].rpartition(":")[2])
    assert config["rest"]["listen"].startswith("0.0.0.0:")  # reachable from outside its container
    # /metrics is served on the REST port: publishing it publishes both.
    paths = {(method, path) for method, path, _ in ROUTES}
    assert {("GET", "/metrics"), ("GET", "/health")} <= paths
    assert ("GET", "/health") in OPEN_ROUTES  # the probe needs no credentials
    host_ports = [published(services[name])[port] for name in RUNNERS]
    assert len(set(host_ports)) == len(RUNNERS)
    for name in RUNNERS:
        probe = " ".join(services[name]["healthcheck"]["test"])
        assert f"http://127.0.0.1:{port}/health'" in probe, name


def test_host_ports_do_not_collide(services: dict[str, Any]) -> None:
    ports = [port for service in services.values() for port in published(service).values()]
    assert len(ports) == len(set(ports))


def test_dependencies_wait_for_health(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for needed, how in service.get("depends_on", {}).items():
            assert needed in services, f"{name} depends on unknown {needed}"
            assert how["condition"] in CONDITIONS, name
            if how["condition"] == "service_healthy":
                assert "healthcheck" in services[needed], needed
    for name in RUNNERS:
        needs = services[name]["depends_on"]
        assert {k: v["condition"] for k, v in needs.items()} == {
            "kafka": "service_healthy",
            "registry": "service_healthy",
            "vendor": "service_healthy",
        }
    assert set(services["prometheus"]["depends_on"]) == set(RUNNERS)
    assert services["grafana"]["depends_on"]["prometheus"]["condition"] == "service_healthy"


def test_runners_poll_the_vendor_and_use_the_registry(services: dict[str, Any]) -> None:
    vendor = services["vendor"]
    assert vendor["command"][:3] == ["python", "-m", "integration.simulator"]
    assert "0.0.0.0" in vendor["command"]  # reachable from the runners' containers
    vendor_port = int(vendor["command"][vendor["command"].index("--port") + 1])
    registry_port = next(iter(published(services["registry"])))
    for name in RUNNERS:
        service = services[name]
        assert service["environment"]["WATUKUY_VENDOR_URL"] == f"http://vendor:{vendor_port}"
        config = load(runner_config(service))
        assert config["kafka"]["bootstrap.servers"] == "kafka:9092"
        url = config["schema.registry"]["url"]
        assert url == f"http://registry:{registry_port}{CCOMPAT_PATH}"
        # Declarative: no module of the user's is needed to start it.
        assert all("name" in poller and "python" not in poller for poller in config["pollers"])


def test_each_runners_state_dir_is_on_a_named_volume(services: dict[str, Any]) -> None:
    declared = load(COMPOSE).get("volumes") or {}
    for name in RUNNERS:
        config = load(runner_config(services[name]))
        state_dir = PurePosixPath(config["runner"]["state.dir"])
        volume = named_volumes(services[name]).get(state_dir)
        assert volume in declared, f"{name}: {state_dir} is not on a declared named volume"
    dockerfile = (REPO / "Dockerfile").read_text()
    assert f"chown watukuy:watukuy {state_dir}" in dockerfile  # a new volume is the runner's


def test_every_mounted_file_exists(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for target, source in mounts(service).items():
            assert source.exists(), f"{name}: {source} (mounted at {target})"


def test_prometheus_scrapes_both_runners_metrics(services: dict[str, Any]) -> None:
    prometheus = services["prometheus"]
    config = load(in_repo(prometheus, "/etc/prometheus/prometheus.yml"))
    (job,) = config["scrape_configs"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    targets = {t for group in job["static_configs"] for t in group["targets"]}
    port = int(load(runner_config(services["runner-1"]))["rest"]["listen"].rpartition(":")[2])
    assert targets == {f"{name}:{port}" for name in RUNNERS}
    for rules in config["rule_files"]:
        assert in_repo(prometheus, rules).is_file(), rules


def test_grafana_provisions_prometheus_and_the_dashboard(services: dict[str, Any]) -> None:
    grafana = services["grafana"]
    provisioning = in_repo(grafana, "/etc/grafana/provisioning")
    (source,) = load(provisioning / "datasources" / "prometheus.yml")["datasources"]
    assert source["type"] == "prometheus" and source["isDefault"] is True
    prometheus_port = next(iter(published(services["prometheus"])))
    assert source["url"] == f"http://prometheus:{prometheus_port}"
    (provider,) = load(provisioning / "dashboards" / "watukuy.yml")["providers"]
    dashboards = in_repo(grafana, provider["options"]["path"])
    assert dashboards == REPO / "integration" / "grafana"
    assert (dashboards / "watukuy.json").is_file()
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert in_repo(grafana, home) == dashboards / "watukuy.json"


def test_the_runners_config_passes_validate(services: dict[str, Any], tmp_path: Path) -> None:
    configs = {runner_config(services[name]) for name in RUNNERS}
    for config in configs:
        env = dict(os.environ, **services["runner-1"]["environment"])
        env.pop("PYTHONPATH", None)
        checked = subprocess.run(
            [sys.executable, "-m", "watukuy.cli", "validate", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,  # the schema path resolves against the file, as in the container
            env=env,
        )
        assert checked.returncode == 0, checked.stderr
        assert checked.stderr.strip().endswith("is valid")


def test_dockerfile_builds_what_compose_runs(services: dict[str, Any]) -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.1[1-9]", text, re.M)  # python for the health checks
    assert "pip install ." in text
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'watukuy-source = "watukuy.cli:main"' in pyproject  # the runners' command
    copied: list[tuple[str, str]] = []
    for line in text.splitlines():
        if line.startswith("COPY "):
            *sources, target = line.split()[1:]
            for source in sources:
                assert (REPO / source).exists(), line
                copied.append((source, target))
    # The vendor runs `python -m integration.simulator` from the image's last WORKDIR.
    workdir = re.findall(r"^WORKDIR (\S+)", text, re.M)[-1]
    assert ("integration/simulator", f"{workdir}/integration/simulator") in copied
    assert ("integration/__init__.py", f"{workdir}/integration/__init__.py") in copied
    exposed = {int(port) for port in re.findall(r"^EXPOSE (\d+)", text, re.M)}
    assert set(published(services["runner-1"])) <= exposed
    assert re.search(r"^USER (?!root)\S+", text, re.M)  # the runners do not run as root


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
