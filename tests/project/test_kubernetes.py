"""deploy/kubernetes holds together without a cluster: every manifest is valid against the
Kubernetes OpenAPI schemas (kubernetes-validate bundles them; no network), the two Prometheus
Operator resources have the shape its CRDs document, and what an operator relies on holds: each
pod's runner.id is its name, the probes hit ``GET /health`` on the REST port, the ConfigMap's
config passes ``watukuy-source validate`` with the pod's environment and secret files, no
secret value is written in the ConfigMap, and the alert rules are compose's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate
import pytest
import yaml

from watukuy.config import load_config
from watukuy.core.durations import parse_duration
from watukuy.rest.middleware import OPEN_ROUTES
from watukuy.rest.routes import ROUTES

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "kubernetes"
ALERTS = REPO / "integration" / "compose" / "alerts.yml"
# The oldest Kubernetes still in wide use (and the oldest schema of interest here), and the
# newest the validator bundles.
KUBERNETES_VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
OPERATOR_API = "monitoring.coreos.com/v1"
POD_NAME = "watukuy-0"
REFERENCE = re.compile(r"^\$\{(env|file):[^}]+\}$")
REQUEST_TIMEOUT = "60s"  # request.timeout's default (docs/configuration.md)
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")  # Prometheus' duration syntax


def manifests() -> list[tuple[str, dict[str, Any]]]:
    """Every object of deploy/kubernetes, with the file it is in."""
    found: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc is not None:
                found.append((path.name, doc))
    return found


def only(kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [
        doc
        for _, doc in manifests()
        if doc["kind"] == kind and name in (None, doc["metadata"]["name"])
    ]
    return found


def runner_container() -> dict[str, Any]:
    (container,) = only("StatefulSet")["spec"]["template"]["spec"]["containers"]
    return container


def runner_yaml() -> tuple[str, str]:
    """The ConfigMap key the runner's --config names, and its text."""
    command = runner_container()["command"]
    assert command[:2] == ["watukuy-source", "--config"]
    config = PurePosixPath(command[2])
    mount = mounted(config.parent)
    assert "configMap" in mount, f"{config} is not in a ConfigMap volume"
    data = only("ConfigMap", mount["configMap"]["name"])["data"]
    return config.name, data[config.name]


def pod_volumes() -> dict[str, dict[str, Any]]:
    """The pod's volumes by name, each claim of the volume claim templates as
    ``{"claim": its template}``."""
    statefulset = only("StatefulSet")["spec"]
    volumes = {volume["name"]: volume for volume in statefulset["template"]["spec"]["volumes"]}
    for claim in statefulset.get("volumeClaimTemplates", []):
        volumes[claim["metadata"]["name"]] = {"name": claim["metadata"]["name"], "claim": claim}
    return volumes


def mounted(directory: PurePosixPath) -> dict[str, Any]:
    """The pod volume mounted at ``directory`` in the runner container."""
    volumes = pod_volumes()
    for mount in runner_container()["volumeMounts"]:
        if PurePosixPath(mount["mountPath"]) == directory:
            volume: dict[str, Any] = volumes[mount["name"]]
            return volume
    raise AssertionError(f"nothing is mounted at {directory}")


def secret_values() -> dict[str, str]:
    data: dict[str, str] = only("Secret")["stringData"]
    return data


def rest_port() -> int:
    _, text = runner_yaml()
    return int(yaml.safe_load(text)["rest"]["listen"].rpartition(":")[2])


def pod_environment() -> dict[str, str]:
    """The runner container's environment as the kubelet would set it for pod watukuy-0."""
    env: dict[str, str] = {}
    secret = only("Secret")
    for var in runner_container()["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
            continue
        source = var["valueFrom"]
        if "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "metadata.name", var
            env[var["name"]] = POD_NAME
        else:
            ref = source["secretKeyRef"]
            assert ref["name"] == secret["metadata"]["name"], var
            env[var["name"]] = secret["stringData"][ref["key"]]
    return env


def lay_out_mounts(root: Path) -> Path:
    """The runner container's ConfigMap and Secret volumes written under ``root`` at their mount
    paths; returns where the config file is."""
    volumes = pod_volumes()
    for mount in runner_container()["volumeMounts"]:
        volume = volumes[mount["name"]]
        target = root / mount["mountPath"].lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        if "configMap" in volume:
            files = only("ConfigMap", volume["configMap"]["name"])["data"]
        elif "secret" in volume:
            source = only("Secret", volume["secret"]["secretName"])["stringData"]
            items = volume["secret"].get("items") or [{"key": k, "path": k} for k in source]
            files = {item["path"]: source[item["key"]] for item in items}
        else:
            continue
        for name, text in files.items():
            (target / name).write_text(text, encoding="utf-8")
    return root / runner_container()["command"][2].lstrip("/")


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    files = {path.name for path in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_core_manifest_is_valid_against_the_kubernetes_schemas(version: str) -> None:
    checked = set()
    for file, doc in manifests():
        if doc["apiVersion"] == OPERATOR_API:
            continue  # not in Kubernetes' own schemas: checked by hand below
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{file}: {doc['kind']}: {exc.message}") from None
        checked.add(doc["kind"])
    assert checked == {
        "ConfigMap",
        "Secret",
        "Service",
        "StatefulSet",
        "PodDisruptionBudget",
    }


def test_the_pod_name_is_the_runner_id_and_static_membership_holds() -> None:
    runner = yaml.safe_load(runner_yaml()[1])["runner"]
    found = re.fullmatch(r"\$\{env:(\w+)\}", runner["id"])
    assert found, "runner.id comes from the environment"
    (var,) = [v for v in runner_container()["env"] if v["name"] == found.group(1)]
    assert var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert runner.get("static.membership", True) is True


def test_the_statefulset_and_its_services_select_the_runner_pods() -> None:
    statefulset = only("StatefulSet")
    spec = statefulset["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    headless = only("Service", spec["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    for _, doc in manifests():
        if doc["kind"] in ("Service", "PodDisruptionBudget"):
            selector = doc["spec"]["selector"]
            selector = selector.get("matchLabels", selector)
            assert selector.items() <= labels.items(), doc["metadata"]["name"]
    pdb = only("PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert spec["updateStrategy"]["type"] == "RollingUpdate"
    # More pods than partitions of <prefix>.state would stand idle.
    topics = yaml.safe_load(runner_yaml()[1])["topics"]
    assert 2 <= spec["replicas"] <= topics["partitions"]


def test_rest_is_served_on_its_port_and_the_probes_hit_health() -> None:
    port = rest_port()
    (named,) = [p for p in runner_container()["ports"] if p["containerPort"] == port]
    assert ("GET", "/health") in OPEN_ROUTES  # the kubelet sends no credentials
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check = runner_container()[probe]["httpGet"]
        assert check["path"] == "/health", probe
        assert check["port"] in (port, named["name"]), probe
    rest = only("Service", "watukuy")
    (service_port,) = rest["spec"]["ports"]
    assert service_port["port"] == port
    assert service_port["targetPort"] in (port, named["name"])


def test_a_starting_pod_is_not_killed_and_a_stopping_one_has_time() -> None:
    container = runner_container()

    def window(probe: str) -> int:
        spec = container[probe]
        return int(spec["periodSeconds"]) * int(spec["failureThreshold"])

    assert window("startupProbe") >= 180  # a restore, or waiting for a dead owner's transaction
    assert window("livenessProbe") >= 30
    assert container["livenessProbe"]["failureThreshold"] >= 3
    # SIGTERM lets every page in flight finish, then commits: the slowest page must fit.
    pollers = yaml.safe_load(runner_yaml()[1])["pollers"]
    timeouts = [
        parse_duration(p["request"].get("timeout", REQUEST_TIMEOUT), "request.timeout")
        for p in pollers
    ]
    grace = only("StatefulSet")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace >= max(timeouts) + 15


def test_the_configmap_config_passes_validate_with_the_pods_environment(tmp_path: Path) -> None:
    config_file = lay_out_mounts(tmp_path)
    env = dict(os.environ, **pod_environment())
    env.pop("PYTHONPATH", None)
    checked = subprocess.run(
        [sys.executable, "-m", "watukuy.cli", "validate", "--config", str(config_file)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.strip().endswith("is valid")
    for value in secret_values().values():
        assert value not in checked.stdout  # validate prints the config, secrets redacted


def test_the_loaded_config_is_what_the_pod_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = lay_out_mounts(tmp_path)
    for name, value in pod_environment().items():
        monkeypatch.setenv(name, value)
    config = load_config(config_file)
    assert config.runner.id == POD_NAME
    assert config.runner.static_membership
    assert config.rest.port == rest_port() and config.rest.host == "0.0.0.0"
    assert config.kafka["sasl.password"] == secret_values()["kafka-password"]
    assert config.topics.replication_factor >= 3  # a production cluster


def test_the_state_dir_is_on_a_claim_of_each_pod_its_own() -> None:
    """runner.state.dir is where a volume claim template is mounted, writable, so a pod's local
    state store survives a restart and no two pods share one."""
    _, text = runner_yaml()
    state_dir = PurePosixPath(yaml.safe_load(text)["runner"]["state.dir"])
    volume = mounted(state_dir)
    assert "claim" in volume, f"{state_dir} is not on a volume claim template"
    claim = volume["claim"]["spec"]
    assert claim["accessModes"] == ["ReadWriteOnce"]
    assert claim["resources"]["requests"]["storage"]
    (mount,) = (m for m in runner_container()["volumeMounts"] if m["name"] == volume["name"])
    assert not mount.get("readOnly", False)
    pod = only("StatefulSet")["spec"]["template"]["spec"]["securityContext"]
    assert pod["fsGroup"] == pod["runAsGroup"]  # the claim is writable by the runner's group


def test_no_secret_value_is_in_the_configmap() -> None:
    text = yaml.safe_dump(only("ConfigMap")["data"])
    for key, value in secret_values().items():
        assert value.startswith("CHANGE-ME"), f"{key}: a placeholder, clearly marked"
        assert value not in text, key
    config = yaml.safe_load(runner_yaml()[1])
    credentials = re.compile(r"sasl\.(username|password|jaas)|password|secret")
    sensitive = [v for k, v in config["kafka"].items() if credentials.search(k)]
    sensitive += config["rest"]["auth"].get("tokens", [])
    sensitive += config["rest"]["auth"].get("basic", {}).values()
    assert sensitive
    for value in sensitive:
        assert REFERENCE.match(value), value


def test_prometheus_scrapes_metrics_on_the_rest_port() -> None:
    annotations = only("StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == rest_port()
    assert ("GET", annotations["prometheus.io/path"]) in {(m, p) for m, p, _ in ROUTES}


def test_the_service_monitor_has_the_operators_shape_and_reaches_metrics() -> None:
    monitor = only("ServiceMonitor")
    assert monitor["apiVersion"] == OPERATOR_API
    spec = monitor["spec"]
    assert set(spec) <= {"selector", "endpoints", "jobLabel", "namespaceSelector"}
    selected = [
        doc
        for _, doc in manifests()
        if doc["kind"] == "Service"
        and spec["selector"]["matchLabels"].items() <= doc["metadata"]["labels"].items()
    ]
    assert [s["metadata"]["name"] for s in selected] == ["watukuy"]  # job="watukuy"
    (endpoint,) = spec["endpoints"]
    assert endpoint["port"] in {p["name"] for p in selected[0]["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert DURATION.match(endpoint["interval"])
    auth = endpoint["authorization"]
    assert auth["type"] == "Bearer"
    assert auth["credentials"]["name"] == only("Secret")["metadata"]["name"]
    assert auth["credentials"]["key"] in secret_values()
    rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
    (down,) = [r for r in rules if r["alert"] == "WatukuyRunnerDown"]
    assert 'job="watukuy"' in down["expr"]


def test_the_prometheus_rule_has_the_operators_shape() -> None:
    rule = only("PrometheusRule")
    assert rule["apiVersion"] == OPERATOR_API
    assert set(rule["spec"]) == {"groups"}
    for group in rule["spec"]["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit", "partial_response_strategy"}
        assert isinstance(group["name"], str) and group["rules"]
        for each in group["rules"]:
            assert set(each) <= {"alert", "record", "expr", "for", "labels", "annotations"}
            assert ("alert" in each) != ("record" in each)
            assert isinstance(each["expr"], str) and each["expr"].strip()
            assert "for" not in each or DURATION.match(each["for"])
            for mapping in ("labels", "annotations"):
                values = each.get(mapping, {})
                assert all(isinstance(v, str) for v in values.values()), each


def test_the_alert_rules_are_composes() -> None:
    compose = yaml.safe_load(ALERTS.read_text())["groups"]
    assert only("PrometheusRule")["spec"]["groups"] == compose


def test_the_pod_runs_the_image_as_its_non_root_user_read_only() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    user = re.search(r"useradd .*--uid (\d+)", dockerfile)
    assert user, "the Dockerfile's user"
    uid = int(user.group(1))
    pod = only("StatefulSet")["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] == uid
    container = runner_container()
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert "PYTHONDONTWRITEBYTECODE=1" in dockerfile  # nothing written beside the code
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert container["image"] == f"watukuy:{version}"
    assert rest_port() in {int(p) for p in re.findall(r"^EXPOSE (\d+)", dockerfile, re.M)}


def test_resources_are_requested_within_their_limits() -> None:
    units = {"m": 0.001, "": 1.0, "Mi": 2.0**20, "Gi": 2.0**30}

    def quantity(text: str | int) -> float:
        found = re.fullmatch(r"(\d+)(m|Mi|Gi|)", str(text))
        assert found, text
        return int(found.group(1)) * units[found.group(2)]

    resources = runner_container()["resources"]
    for name in ("cpu", "memory"):
        assert quantity(resources["requests"][name]) <= quantity(resources["limits"][name])
    # RESULTS.md: RSS 349 MB after restoring a million snapshot entries.
    assert quantity(resources["requests"]["memory"]) >= 349 * 10**6
