"""Every Connect route of a live runner, decoded by Kafka Connect's own entity classes.

A Connect client (its ``RestClient``, consoles and tools built on ``connect-runtime``) reads our
answers into ``org.apache.kafka.connect.runtime.rest.entities``. These tests decode each answer
with those very classes (``tests/connect_jvm``, leniently: unknown fields ignored) and check
the values the client then reads through their accessors: a config-file connector, one
created over REST in Connect's flat config form, one with two streams (also created over REST),
an unknown one, plugins, validate, loggers.

One runner, two tenants and one JVM run for every answer keep the wall time short.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from integration.demo import example_config, runner_config, start_simulator
from integration.demo import write_config as write_runner_config
from tests.connect_jvm.decoder import ConnectDecoder, Decoded
from tests.integration.kafka_support import delete_prefix, unique_prefix
from tests.integration.runners import Runner, free_port, rest_healthy, runner_env, wait_for
from watukuy.options.flat import flatten

TENANTS = 2
RUNNER = "entities-1"
FILE, REST = "invoices", "orders"  # from the config file; created over REST
CONNECTORS = (FILE, REST)
STREAMED = "tracker"  # created over REST with two streams: a task per stream and tenant
STREAMS = ("projects", "users")
STATES = {"RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING"}
LANES = {"live", "backfill", "reconcile"}
LOG4J_LEVELS = {"OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"}
BAD_FIELD = "schedule.min"


@dataclass(frozen=True)
class Answer:
    status: int
    decoded: Decoded

    def value(self) -> Any:
        return self.decoded.get()


@dataclass(frozen=True)
class Live:
    """What the runner answered on every route, decoded; and what the test sent and knows."""

    answers: dict[str, Answer]
    posted: dict[str, str]
    prefix: str
    tenants: list[str]
    cluster_id: str

    def __getitem__(self, label: str) -> Answer:
        return self.answers[label]


def http(port: int, method: str, path: str, body: Any = None) -> tuple[int, str]:
    """The status and the body text, as a client sees them (error statuses included)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def get_json(port: int, path: str) -> Any:
    status, text = http(port, "GET", path)
    return json.loads(text) if status == 200 else None


@pytest.fixture(scope="session")
def connect_decoder() -> ConnectDecoder:
    """connect-runtime's jars (fetched from Maven Central once, cached) and ``Decode.java``."""
    return ConnectDecoder.prepare()


def _connector_routes(name: str) -> dict[str, tuple[str, str, str, Any]]:
    base = f"/connectors/{name}"
    return {
        f"{name} info": ("ConnectorInfo", "GET", base, None),
        f"{name} config": ("Map<String,String>", "GET", f"{base}/config", None),
        f"{name} status": ("ConnectorStateInfo", "GET", f"{base}/status", None),
        f"{name} tasks": ("List<TaskInfo>", "GET", f"{base}/tasks", None),
        f"{name} task 0": ("ConnectorStateInfo.TaskState", "GET", f"{base}/tasks/0/status", None),
        f"{name} offsets": ("ConnectorOffsets", "GET", f"{base}/offsets", None),
        f"{name} topics": ("Map<String,ActiveTopicsInfo>", "GET", f"{base}/topics", None),
    }


def _routes(flat: dict[str, str]) -> dict[str, tuple[str, str, str, Any]]:
    """label -> (entity, method, path, body): every read route a Connect client calls."""
    bad = {**flat, BAD_FIELD: "soon"}
    validate = "/connector-plugins/http/config/validate"
    return {
        "server": ("ServerInfo", "GET", "/", None),
        "names": ("List<String>", "GET", "/connectors", None),
        "expand status": (
            "Map<String,Map<String,ConnectorStateInfo>>", "GET", "/connectors?expand=status", None
        ),
        "expand info": (
            "Map<String,Map<String,ConnectorInfo>>", "GET", "/connectors?expand=info", None
        ),
        **_connector_routes(FILE),
        **_connector_routes(REST),
        **_connector_routes(STREAMED),
        **{
            f"{STREAMED}.{stream} offsets": (
                "ConnectorOffsets", "GET", f"/connectors/{STREAMED}.{stream}/offsets", None
            )
            for stream in STREAMS
        },
        "plugins": ("List<PluginInfo>", "GET", "/connector-plugins", None),
        "validate good": ("ConfigInfos", "PUT", validate, flat),
        "validate bad": ("ConfigInfos", "PUT", validate, bad),
        "unknown": ("ErrorMessage", "GET", "/connectors/nope", None),
        "unknown status": ("ErrorMessage", "GET", "/connectors/nope/status", None),
        "loggers": ("Map<String,LoggerLevel>", "GET", "/admin/loggers", None),
        "root logger": ("LoggerLevel", "GET", "/admin/loggers/root", None),
    }  # fmt: skip


def _ready(port: int) -> bool:
    """Every connector runs every tenant (of each stream), and each has polled once."""
    for name, tasks_expected in ((FILE, TENANTS), (REST, TENANTS), (STREAMED, 2 * TENANTS)):
        status = get_json(port, f"/connectors/{name}/status")
        if status is None:
            return False
        tasks = status["tasks"]
        if len(tasks) != tasks_expected or any(task["state"] != "RUNNING" for task in tasks):
            return False
    for name in (FILE, REST, *(f"{STREAMED}.{stream}" for stream in STREAMS)):
        offsets = get_json(port, f"/connectors/{name}/offsets")
        if offsets is None:
            return False
        entries = offsets["offsets"]
        if len(entries) != TENANTS or any(entry["offset"]["live"] is None for entry in entries):
            return False
    return True


def _streamed(connector: dict[str, Any]) -> dict[str, Any]:
    """The example connector as two streams of one connector: the tenants' projects and
    users, sharing the tenant listing, the credential and everything but the path."""
    shared = {k: v for k, v in connector.items() if k not in ("partitions", "request")}
    base = connector["request"]["url"].rsplit("/", 1)[0]
    request = {"base": base, "auth": connector["request"]["auth"]}
    return {
        "partitions": connector["partitions"],
        "defaults": {**shared, "request": request},
        "streams": [{"name": name, "request": {"path": f"/{name}"}} for name in STREAMS],
    }


def _stopped(port: int) -> bool:
    status = get_json(port, f"/connectors/{REST}/status")
    return status is not None and status["connector"]["state"] == "STOPPED"


def _stop_and_reset(port: int) -> tuple[int, str]:
    """Stop the REST connector, then ``DELETE .../offsets``: Connect answers a ``Message``."""
    assert http(port, "PUT", f"/connectors/{REST}/stop")[0] == 202
    wait_for(lambda: _stopped(port), 30, f"{REST} STOPPED")
    return http(port, "DELETE", f"/connectors/{REST}/offsets")


def _cluster_id(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return str(admin.describe_cluster(request_timeout=10).result(timeout=15).cluster_id)


@pytest.fixture(scope="module")
def live(
    kafka_bootstrap: str, connect_decoder: ConnectDecoder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    tmp: Path = tmp_path_factory.mktemp("entities")
    prefix = unique_prefix()
    sim = start_simulator(
        "--tenants", str(TENANTS), "--items", "2", "--mutate-every", "0", log=tmp / "sim.log"
    )
    example = example_config({"min": "1s", "max": "2s"})
    example["pollers"][0]["partitions"]["refresh"] = "2s"
    # Through JSON, as a user's config file would be: YAML's `404:` key is the string "404".
    connector = json.loads(json.dumps(example["pollers"][0]))
    connector.pop("name")
    flat = flatten(connector, "http")
    port = free_port()
    config = runner_config(kafka_bootstrap, prefix, RUNNER, example=example)
    config["runner"]["session.timeout"] = "6s"
    config["rest"] = {"listen": f"127.0.0.1:{port}"}
    path = write_runner_config(tmp / "runner.yaml", config)
    runner = Runner(RUNNER, path, runner_env(sim.base_url), tmp / "runner.log").start()
    try:
        wait_for(lambda: rest_healthy(port), 60, "the runner's /health")
        created = http(port, "POST", "/connectors", {"name": REST, "config": flat})
        assert created[0] == 201, created
        streamed = flatten(_streamed(connector), "http")
        created = http(port, "POST", "/connectors", {"name": STREAMED, "config": streamed})
        assert created[0] == 201, created
        wait_for(lambda: _ready(port), 90, "both connectors RUNNING on every tenant", step=0.5)
        batch, statuses = [], []
        for entity, method, route, body in _routes(flat).values():
            status, text = http(port, method, route, body)
            batch.append((entity, text))
            statuses.append(status)
        labels = [*_routes(flat), "reset offsets"]
        status, text = _stop_and_reset(port)
        batch.append(("Message", text))
        statuses.append(status)
        decoded = connect_decoder.decode(batch)
        answers = {
            label: Answer(status, one)
            for label, status, one in zip(labels, statuses, decoded, strict=True)
        }
        tenants = [tenant["id"] for tenant in sim.tenants]
        yield Live(answers, flat, prefix, tenants, _cluster_id(kafka_bootstrap))
    finally:
        assert runner.stop() == 0, runner.output()
        sim.stop()
        delete_prefix(kafka_bootstrap, prefix)


# --- what a Connect client reads -------------------------------------------------------------


def test_server_info_names_the_commit_and_the_kafka_cluster(live: Live) -> None:
    answer = live["server"]
    info = answer.value()
    assert answer.status == 200
    assert info["version"] and info["commit"]
    assert info["clusterId"] == live.cluster_id


def test_connectors_are_listed_by_name(live: Live) -> None:
    assert live["names"].status == 200
    assert sorted(live["names"].value()) == sorted([*CONNECTORS, STREAMED])


def _check_info(info: dict[str, Any], name: str, tasks: int = TENANTS) -> None:
    assert info["name"] == name
    assert info["type"] == "SOURCE"
    assert info["tasks"] == [{"connector": name, "task": i} for i in range(tasks)]
    config = info["config"]
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in config.items()), config
    assert config["connector.class"] == "http"


@pytest.mark.parametrize("name", CONNECTORS)
def test_connector_info_is_a_source_with_a_flat_config_and_a_task_per_tenant(
    live: Live, name: str
) -> None:
    answer = live[f"{name} info"]
    assert answer.status == 200
    _check_info(answer.value(), name)
    expanded = live["expand info"].value()
    assert sorted(expanded) == sorted([*CONNECTORS, STREAMED])
    _check_info(expanded[name]["info"], name)


def test_a_flat_config_posted_is_the_config_read_back(live: Live) -> None:
    expected = {**live.posted, "name": REST}  # Connect's config names its connector too
    assert live[f"{REST} config"].status == 200
    assert live[f"{REST} config"].value() == expected
    assert live[f"{REST} info"].value()["config"] == expected


def test_a_config_file_connector_reads_back_its_flat_config(live: Live) -> None:
    assert live[f"{FILE} config"].status == 200
    config = live[f"{FILE} config"].value()
    assert config["connector.class"] == "http"
    assert config["request.url"] == live.posted["request.url"]  # a ${env:...} placeholder


def _check_status(
    status: dict[str, Any], name: str, connector_state: str, tasks: int = TENANTS
) -> None:
    assert status["name"] == name
    assert status["type"] == "SOURCE"
    assert status["connector"]["state"] == connector_state
    assert status["connector"]["workerId"] == RUNNER
    found = status["tasks"]
    assert [task["id"] for task in found] == list(range(tasks))
    assert all(isinstance(task["id"], int) and task["state"] in STATES for task in found)


@pytest.mark.parametrize("name", CONNECTORS)
def test_status_has_states_and_integer_task_ids(live: Live, name: str) -> None:
    answer = live[f"{name} status"]
    assert answer.status == 200
    _check_status(answer.value(), name, "RUNNING")
    expanded = live["expand status"]
    assert expanded.status == 200
    _check_status(expanded.value()[name]["status"], name, "RUNNING")


@pytest.mark.parametrize("name", CONNECTORS)
def test_tasks_are_one_per_tenant_with_string_configs(live: Live, name: str) -> None:
    answer = live[f"{name} tasks"]
    assert answer.status == 200
    tasks = answer.value()
    assert [task["id"] for task in tasks] == [
        {"connector": name, "task": i} for i in range(TENANTS)
    ]
    for task in tasks:
        assert all(isinstance(v, str) for v in task["config"].values()), task
    one = live[f"{name} task 0"]
    assert one.status == 200
    assert one.value()["id"] == 0 and one.value()["state"] == "RUNNING"


@pytest.mark.parametrize("name", CONNECTORS)
def test_offsets_have_exactly_the_lanes_for_each_tenant(live: Live, name: str) -> None:
    answer = live[f"{name} offsets"]
    assert answer.status == 200
    offsets = answer.value()["offsets"]
    assert sorted(entry["partition"]["key"] for entry in offsets) == sorted(live.tenants)
    for entry in offsets:
        assert set(entry["partition"]) == {"key"}
        assert set(entry["offset"]) == LANES, entry["offset"]


@pytest.mark.parametrize("name", CONNECTORS)
def test_topics_name_the_events_topic(live: Live, name: str) -> None:
    answer = live[f"{name} topics"]
    assert answer.status == 200
    topics = answer.value()
    assert list(topics) == [name]
    assert f"{live.prefix}.events.{name}" in topics[name]["topics"]


def test_plugins_are_the_two_connector_classes(live: Live) -> None:
    assert live["plugins"].status == 200
    assert sorted(plugin["className"] for plugin in live["plugins"].value()) == ["http", "python"]


def test_validate_finds_no_error_in_a_good_flat_config(live: Live) -> None:
    answer = live["validate good"]
    assert answer.status == 200
    report = answer.value()
    assert report["errorCount"] == 0
    assert report["values"], report
    for entry in report["values"]:
        assert entry["value"]["errors"] == []
        assert entry["definition"] is not None, entry
        assert entry["definition"]["name"] == entry["value"]["name"]


def test_validate_names_the_bad_field(live: Live) -> None:
    answer = live["validate bad"]
    assert answer.status == 200
    report = answer.value()
    assert report["errorCount"] >= 1
    failing = [entry["value"]["name"] for entry in report["values"] if entry["value"]["errors"]]
    assert BAD_FIELD in failing


@pytest.mark.parametrize("label", ["unknown", "unknown status"])
def test_an_unknown_connector_is_an_error_message(live: Live, label: str) -> None:
    answer = live[label]
    assert answer.status == 404
    error = answer.value()
    assert error["errorCode"] == 404 and "nope" in error["message"]


def test_loggers_have_connects_level_names(live: Live) -> None:
    loggers = live["loggers"]
    assert loggers.status == 200
    levels = loggers.value()
    assert "root" in levels
    assert {entry["level"] for entry in levels.values()} <= LOG4J_LEVELS
    root = live["root logger"]
    assert root.status == 200 and root.value()["level"] in LOG4J_LEVELS


def test_resetting_offsets_of_a_stopped_connector_answers_a_message(live: Live) -> None:
    answer = live["reset offsets"]
    assert answer.status == 200
    assert REST in answer.value()["message"]


def test_the_decoder_ignores_extra_fields_but_not_a_wrong_type(
    connect_decoder: ConnectDecoder,
) -> None:
    """What the tests above rest on: lenient means unknown fields pass, while a field Connect
    declares with another type still fails, naming where (issue 22's nested config did)."""
    task = {"id": 0, "state": "RUNNING", "worker_id": "w", "lag": 1.5}
    info = {"name": "a", "config": {"cursor": {"none": True}}, "tasks": [], "type": "source"}
    extra, wrong = connect_decoder.decode(
        [("ConnectorStateInfo.TaskState", json.dumps(task)), ("ConnectorInfo", json.dumps(info))]
    )
    assert extra.get() == {
        "id": 0, "state": "RUNNING", "workerId": "w", "trace": None, "version": None
    }  # fmt: skip
    assert not wrong.ok and '["config"]' in wrong.error and '["cursor"]' in wrong.error


# --- a connector with streams ------------------------------------------------------------------


def test_a_connector_with_streams_is_one_connector_with_a_task_per_stream_and_tenant(
    live: Live,
) -> None:
    info = live[f"{STREAMED} info"]
    assert info.status == 200
    _check_info(info.value(), STREAMED, tasks=2 * TENANTS)
    assert json.loads(info.value()["config"]["streams"])[0]["name"] == STREAMS[0]
    status = live[f"{STREAMED} status"]
    assert status.status == 200
    _check_status(status.value(), STREAMED, "RUNNING", tasks=2 * TENANTS)
    tasks = live[f"{STREAMED} tasks"].value()
    assert [task["id"] for task in tasks] == [
        {"connector": STREAMED, "task": i} for i in range(2 * TENANTS)
    ]


def test_each_stream_has_its_offsets_and_its_topic(live: Live) -> None:
    for stream in STREAMS:
        answer = live[f"{STREAMED}.{stream} offsets"]
        assert answer.status == 200
        offsets = answer.value()["offsets"]
        assert sorted(entry["partition"]["key"] for entry in offsets) == sorted(live.tenants)
        assert all(set(entry["offset"]) == LANES for entry in offsets)
    topics = live[f"{STREAMED} topics"].value()[STREAMED]["topics"]
    assert sorted(topics) == [f"{live.prefix}.events.{STREAMED}.{s}" for s in STREAMS]
