"""The REST API of real runner processes on the real broker: a connector posted to one runner
runs on keys the other owns, either answers its status, pause on one stops polling on the
other, offsets change only while STOPPED, and config-file pollers cannot be reconfigured."""

from __future__ import annotations

import copy
import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from integration.demo import Simulator, example_config, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.kafka_support import in_sequence, read_topic
from tests.integration.runners import Runner, free_port, rest_healthy, runner_env, wait_for

TENANTS = 4
ITEMS = 3


def call(
    port: int, method: str, path: str, body: Any = None, content_type: str = "application/json"
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        return error.code, json.loads(raw) if raw else None


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(TENANTS, ITEMS)


@pytest.fixture
def cluster(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> Iterator[tuple[list[int], dict[str, Any]]]:
    example = example_config({"min": "1s", "max": "2s"})
    example["pollers"][0]["partitions"]["refresh"] = "2s"
    connector = copy.deepcopy(example["pollers"][0])
    connector.pop("name")
    ports = [free_port(), free_port()]
    runners = []
    for index, port in enumerate(ports, start=1):
        config = runner_config(kafka_bootstrap, prefix, f"rest-{index}", example=example)
        config["runner"]["session.timeout"] = "6s"
        config["rest"] = {"listen": f"127.0.0.1:{port}"}
        path = write_runner_config(tmp_path / f"r{index}.yaml", config)
        log = tmp_path / f"r{index}.log"
        runners.append(Runner(f"rest-{index}", path, runner_env(simulator.base_url), log).start())
    try:
        for runner, port in zip(runners, ports, strict=True):
            wait_for(lambda port=port: rest_healthy(port), 60, f"{runner.name}'s /health")
        yield ports, connector
    finally:
        for runner in runners:
            assert runner.stop() == 0, runner.output()


def touch_an_item(sim: Simulator, tenant: str) -> None:
    """Change one of the tenant's items at the vendor (a new etag: an ``updated`` event)."""
    with urllib.request.urlopen(f"{sim.base_url}/_admin/tenants/{tenant}/items") as response:
        item = json.load(response)["data"][0]
    request = urllib.request.Request(
        f"{sim.base_url}/_admin/tenants/{tenant}/items/{item['id']}",
        data=json.dumps({"note": f"touched {time.time()}"}).encode(),
        headers={"Content-Type": "application/json"},
        method="PATCH",
    )
    urllib.request.urlopen(request, timeout=10).close()


def test_a_connector_posted_to_one_runner_runs_everywhere(
    cluster: tuple[list[int], dict[str, Any]],
    kafka_bootstrap: str,
    prefix: str,
    simulator: Simulator,
) -> None:
    (a, b), connector = cluster

    # GET / names the code's commit and the Kafka cluster, as Connect's ServerInfo does.
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
    metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    for port in (a, b):
        code, root = call(port, "GET", "/")
        assert code == 200
        assert root["commit"] == head.stdout.strip()
        assert root["kafka_cluster_id"] == metadata.cluster_id

    # The config-file poller is listed, and cannot be reconfigured over REST.
    assert call(a, "GET", "/connectors") == (200, ["invoices"])
    code, body = call(a, "PUT", "/connectors/invoices/config", connector)
    assert code == 409 and "config file" in body["message"]

    # A REST connector: created on one runner, polled by both (each owns some keys).
    code, _ = call(a, "POST", "/connectors", {"name": "orders", "config": connector})
    assert code == 201
    wait_for(lambda: call(b, "GET", "/connectors")[1] == ["invoices", "orders"], 30, "b lists it")
    topic = f"{prefix}.events.orders"

    def all_arrived() -> bool:
        read = read_topic(kafka_bootstrap, topic, idle=1.0)
        return len(read.by_key) == TENANTS and all(
            len(events) >= ITEMS for events in read.by_key.values()
        )

    wait_for(all_arrived, 90, "every tenant's orders events", step=1.0)
    read = read_topic(kafka_bootstrap, topic, idle=1.0)
    assert all(in_sequence(read.sequences(key)) for key in read.by_key)

    # Either runner answers the status of every partition, from the status topic.
    def status_shows_both() -> dict[str, Any] | None:
        code, status = call(b, "GET", "/connectors/orders/status")
        tasks = status["tasks"] if code == 200 else []
        owners = {task["worker_id"] for task in tasks}
        running = all(task["state"] == "RUNNING" for task in tasks)
        ok = len(tasks) == TENANTS and running and owners == {"rest-1", "rest-2"}
        return status if ok else None

    status = wait_for(status_shows_both, 30, "a status naming both runners")
    assert status["type"] == "source" and status["connector"]["state"] == "RUNNING"

    # Pause on one runner: the status seen from the other says PAUSED.
    assert call(a, "PUT", "/connectors/orders/pause")[0] == 202

    def paused_everywhere() -> bool:
        code, status = call(b, "GET", "/connectors/orders/status")
        return code == 200 and all(task["state"] == "PAUSED" for task in status["tasks"])

    wait_for(paused_everywhere, 30, "PAUSED seen from the other runner")

    # ...and neither runner polls it: changes at the vendor wait for the resume.
    paused_at = read_topic(kafka_bootstrap, topic, idle=1.0).count
    for tenant in simulator.tenants:
        touch_an_item(simulator, tenant["id"])
    time.sleep(5)  # running, every tenant would be polled within 2 s
    assert read_topic(kafka_bootstrap, topic, idle=1.0).count == paused_at

    # Offsets: readable any time, changed only while STOPPED.
    code, offsets = call(b, "GET", "/connectors/orders/offsets")
    assert code == 200 and len(offsets["offsets"]) == TENANTS
    key = offsets["offsets"][0]["partition"]["key"]
    patch = {"offsets": [{"partition": {"key": key}, "offset": None}]}
    assert call(a, "PATCH", "/connectors/orders/offsets", patch)[0] == 409
    assert call(a, "PUT", "/connectors/orders/stop")[0] == 202
    wait_for(
        lambda: call(b, "GET", "/connectors/orders/status")[1]["connector"]["state"] == "STOPPED",
        30,
        "STOPPED",
    )
    assert call(b, "PATCH", "/connectors/orders/offsets", patch)[0] == 200

    # Per-partition operations are accepted; bad input is named.
    assert call(a, "PUT", "/connectors/orders/resume")[0] == 202

    def changes_arrived() -> bool:
        read = read_topic(kafka_bootstrap, topic, idle=1.0)
        updated = [e for events in read.by_key.values() for e in events if e["type"] == "updated"]
        return len(updated) >= TENANTS - 1  # the reset key re-reads its items as created

    wait_for(changes_arrived, 60, "the changes made while paused, once resumed", step=1.0)
    assert call(a, "POST", f"/connectors/orders/partitions/{key}/trigger")[0] == 202
    code, body = call(a, "POST", f"/connectors/orders/partitions/{key}/backfill", {"form": 1})
    assert code == 400 and "form" in body["message"]
    assert call(a, "GET", "/connectors/nope/status")[0] == 404

    # Delete: gone from both runners.
    assert call(b, "DELETE", "/connectors/orders")[0] == 204
    wait_for(lambda: call(a, "GET", "/connectors/orders")[0] == 404, 30, "orders deleted on a")


@pytest.fixture
def slow_pair(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> Iterator[tuple[list[Runner], list[int]]]:
    """Two runners on the Python poller that poll each tenant once, then not for 10 minutes:
    only an operation makes a key poll again."""
    ports = [free_port(), free_port()]
    runners = []
    env = runner_env(simulator.base_url, WATUKUY_SCHEDULE_MIN="600s", WATUKUY_SCHEDULE_MAX="600s")
    for index, port in enumerate(ports, start=1):
        config = runner_config(kafka_bootstrap, prefix, f"slow-{index}")
        config["runner"]["session.timeout"] = "6s"
        config["rest"] = {"listen": f"127.0.0.1:{port}"}
        path = write_runner_config(tmp_path / f"s{index}.yaml", config)
        runners.append(Runner(f"slow-{index}", path, dict(env), tmp_path / f"s{index}.log").start())
    try:
        yield runners, ports
    finally:
        for runner in runners:
            runner.stop()


def test_an_operation_whose_owner_dies_is_applied_once_by_the_next_owner(
    slow_pair: tuple[list[Runner], list[int]], kafka_bootstrap: str, prefix: str
) -> None:
    runners, ports = slow_pair
    topic = f"{prefix}.events.invoices"

    def first_polls() -> dict[str, list[dict[str, Any]]] | None:
        read = read_topic(kafka_bootstrap, topic, idle=1.0)
        done = len(read.by_key) == TENANTS and all(len(e) == ITEMS for e in read.by_key.values())
        return dict(read.by_key) if done else None

    before = wait_for(first_polls, 90, "every tenant's first poll", step=1.0)

    def owners() -> dict[str, str] | None:
        try:  # a runner polls before its REST listens: slow-1 may be done first
            code, status = call(ports[1], "GET", "/connectors/invoices/status")
        except urllib.error.URLError:
            return None
        tasks = status["tasks"] if code == 200 else []
        found = {task["partition"]: task["worker_id"] for task in tasks}
        return found if len(found) == TENANTS and set(found.values()) >= {"slow-1"} else None

    owned = wait_for(owners, 30, "a key owned by slow-1")
    key = next(partition for partition, owner in owned.items() if owner == "slow-1")

    # slow-1 is frozen, then killed: the reset it was sent can only be applied by slow-2, once.
    runners[0].signal(signal.SIGSTOP)
    body = {"to": None, "clear_snapshot": True}
    code, _ = call(ports[1], "POST", f"/connectors/invoices/partitions/{key}/reset", body)
    assert code == 202
    runners[0].kill()

    def reset_applied() -> bool:
        events = read_topic(kafka_bootstrap, topic, idle=1.0).by_key[f"invoices/{key}"]
        return len(events) >= 2 * ITEMS

    wait_for(reset_applied, 90, "the reset applied by the new owner", step=1.0)
    time.sleep(3)  # were it applied twice, the second round would show by now
    after = read_topic(kafka_bootstrap, topic, idle=1.0).by_key[f"invoices/{key}"]
    assert len(after) == 2 * ITEMS, [e["sequence"] for e in after]
    assert in_sequence(e["sequence"] for e in after)
    assert after[: len(before[f"invoices/{key}"])] == before[f"invoices/{key}"]
    assert {e["type"] for e in after[ITEMS:]} == {"created"}  # the snapshot was cleared


REST_TOKEN = "rest-canary-token-9c1e"


def test_every_error_code_and_no_secret_against_a_real_runner(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> None:
    port = free_port()
    config = runner_config(kafka_bootstrap, prefix, "guarded", example=example_config())
    config["rest"] = {"listen": f"127.0.0.1:{port}", "auth": {"tokens": ["${env:REST_TOKEN}"]}}
    path = write_runner_config(tmp_path / "guarded.yaml", config)
    env = runner_env(simulator.base_url, REST_TOKEN=REST_TOKEN)
    runner = Runner("guarded", path, env, tmp_path / "guarded.log").start()
    bearer = {"Authorization": f"Bearer {REST_TOKEN}"}
    answers: list[str] = []

    def send(method: str, path: str, data: bytes | None = None, **headers: str) -> int:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}", data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                answers.append(response.read().decode(errors="replace"))
                return int(response.status)
        except urllib.error.HTTPError as error:
            text = error.read().decode(errors="replace")
            answers.append(text)
            if error.code >= 400 and error.code != 405:
                body = json.loads(text)
                assert body["error_code"] == error.code and "Traceback" not in body["message"]
            return error.code

    try:
        wait_for(lambda: rest_healthy(port), 60, "the runner's /health (open without credentials)")
        as_json = {"Content-Type": "application/json", **bearer}
        assert send("GET", "/connectors") == 401
        assert send("GET", "/connectors", Authorization="Bearer wrong") == 401
        assert send("GET", "/connectors", **bearer) == 200
        assert send("GET", "/openapi.json", **bearer) == 200
        assert send("GET", "/connectors/bad%20name/status", **bearer) == 400
        assert send("GET", "/connectors/nope", **bearer) == 404
        config_body = json.dumps({"request": {"url": "https://x.test/items"}}).encode()
        assert send("PUT", "/connectors/invoices/config", config_body, **as_json) == 409
        big = json.dumps({"name": "big", "config": {"pad": "x" * (2 << 20)}}).encode()
        assert send("POST", "/connectors", big, **as_json) == 413
        text = {"Content-Type": "text/plain", **bearer}
        assert send("POST", "/connectors", b"name=orders", **text) == 415
        wrong = {"request": {"url": "htps://x"}, "records": "data", "identity": "id"}
        bad = json.dumps({"name": "orders", "config": wrong}).encode()
        assert send("POST", "/connectors", bad, **as_json) == 400
        assert "config.request.url" in answers[-1]
    finally:
        assert runner.stop() == 0, runner.output()
    assert not any(REST_TOKEN in answer for answer in answers)
    assert REST_TOKEN not in runner.output()
