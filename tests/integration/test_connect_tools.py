"""Kafka Connect's own clients against a real runner: kafka-connect-py's ``kc`` runs the commands
of docs/rest.md ("Using Connect tools") as written, with the config files written there, and
each command's output is what a Connect user expects to see."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from integration.demo import Simulator, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.kafka_support import read_topic
from tests.integration.runners import ROOT, Runner, free_port, runner_env, wait_for

DOCS = ROOT / "docs" / "rest.md"
DOC_URL = "http://localhost:8083"
COMMANDS = re.compile(
    r"<!-- kc-examples:start -->\n```sh\n(.*?)```\n<!-- kc-examples:end -->", re.S
)
FILES = re.compile(r"<!-- kc-file: (\S+) -->\n```json\n(.*?)```", re.S)
KC = Path(sys.executable).with_name("kc")  # the venv's, installed by the dev extra
TENANTS = 2
ITEMS = 3


def documented_commands() -> list[str]:
    found = COMMANDS.search(DOCS.read_text(encoding="utf-8"))
    assert found, "the kc examples block of docs/rest.md is missing"
    return [line for line in found.group(1).splitlines() if line.startswith("kc ")]


def documented_files() -> dict[str, Any]:
    return {name: json.loads(text) for name, text in FILES.findall(DOCS.read_text("utf-8"))}


@dataclass
class Kc:
    """``kc --url <the runner>`` run in ``cwd`` (where the documented files are), recording
    each command as the docs write it."""

    url: str
    cwd: Path
    ran: list[str] = field(default_factory=list, repr=False)
    outputs: list[str] = field(default_factory=list, repr=False)

    def text(self, *args: str) -> str:
        """kc's output. kc prints an HTTP error as text and exits 0, so callers parse it."""
        done = subprocess.run(
            [str(KC), "--url", self.url, *args],
            capture_output=True, text=True, timeout=60, cwd=self.cwd,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        self.outputs.append(done.stdout)
        line = shlex.join(["kc", "--url", DOC_URL, *args])
        if not self.ran or self.ran[-1] != line:  # a command retried until it shows is one step
            self.ran.append(line)
        return done.stdout.strip()

    def json(self, *args: str) -> Any:
        out = self.text(*args)
        try:
            return json.loads(out)
        except ValueError:
            raise AssertionError(f"kc {shlex.join(args)} printed no JSON: {out}") from None

    def until(self, shows: Callable[[Any], bool], *args: str, within: float = 60) -> Any:
        """The JSON of ``kc ARGS`` once ``shows`` holds for it."""

        def attempt() -> Any:
            answer = self.json(*args)
            return answer if shows(answer) else None

        return wait_for(attempt, within, f"kc {shlex.join(args)} to show it", step=0.5)

    def quiet(self, *args: str) -> None:
        """A command that prints nothing when it succeeds (pause, resume, delete)."""
        out = self.text(*args)
        assert out == "", f"kc {shlex.join(args)}: {out}"


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(TENANTS, ITEMS)


@pytest.fixture
def kc(kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path) -> Iterator[Kc]:
    """One runner with REST; its config-file poller (the Python one) polls rarely, so the
    connector kc creates does the work."""
    port = free_port()
    config = runner_config(kafka_bootstrap, prefix, "kc")
    config["runner"]["session.timeout"] = "6s"
    config["rest"] = {"listen": f"127.0.0.1:{port}"}
    path = write_runner_config(tmp_path / "runner.yaml", config)
    env = runner_env(simulator.base_url, WATUKUY_SCHEDULE_MIN="600s", WATUKUY_SCHEDULE_MAX="600s")
    runner = Runner("kc", path, env, tmp_path / "runner.log").start()
    work = tmp_path / "kc"
    work.mkdir()
    for name, content in documented_files().items():
        (work / name).write_text(json.dumps(content))
    client = Kc(f"http://127.0.0.1:{port}", work)
    try:
        wait_for(lambda: client.text("list").startswith("["), 60, "the runner's REST API")
        client.ran.clear()
        yield client
    finally:
        assert runner.stop() == 0, runner.output()
        tokens = [tenant["token"] for tenant in simulator.tenants]
        assert not any(token in out for out in client.outputs for token in tokens)


def test_kc_runs_its_commands_against_a_runner(
    kc: Kc, kafka_bootstrap: str, prefix: str, simulator: Simulator
) -> None:
    files = documented_files()
    written: dict[str, str] = files["orders.json"]["config"]
    update: dict[str, str] = files["orders-update.json"]
    tenants = sorted(tenant["id"] for tenant in simulator.tenants)

    created = kc.json("create", "--config-file", "orders.json")
    assert created["name"] == "orders" and created["type"] == "source"
    assert kc.json("list") == ["invoices", "orders"]

    # get and config: Connect's flat map of strings, as written (Connect adds the name).
    info = kc.json("get", "orders")
    assert info["name"] == "orders" and info["type"] == "source"
    assert_flat(info["config"], written)
    assert_flat(kc.json("config", "orders"), written)

    # status: a RUNNING task per tenant, ids 0..n-1 in key order.
    status = kc.until(lambda s: _task_states(s) == ["RUNNING"] * TENANTS, "status", "orders")
    assert status["connector"]["state"] == "RUNNING" and status["type"] == "source"
    assert [task["partition"] for task in status["tasks"]] == tenants
    tasks = kc.json("list-tasks", "orders")
    assert [task["id"] for task in tasks] == [{"connector": "orders", "task": i} for i in (0, 1)]
    assert [task["config"] for task in tasks] == [{"partition": key} for key in tenants]
    task = kc.json("task-status", "orders", "0")
    assert task["id"] == 0 and task["state"] == "RUNNING" and task["worker_id"] == "kc"
    assert kc.json("restart-task", "orders", "0") is None  # 204: kc prints null

    # list-topics (KIP-558): the events topic, once events were published to it.
    events = f"{prefix}.events.orders"

    def every_item_arrived() -> bool:
        read = read_topic(kafka_bootstrap, events, idle=1.0)
        return len(read.by_key) == TENANTS and all(len(e) >= ITEMS for e in read.by_key.values())

    wait_for(every_item_arrived, 60, "every tenant's events", step=1.0)
    topics = kc.until(lambda t: bool(t.get("orders", {}).get("topics")), "list-topics", "orders")
    assert topics == {"orders": {"topics": [events]}}

    # pause and resume: the status shows it.
    kc.quiet("pause", "orders")
    paused = kc.until(lambda s: _task_states(s) == ["PAUSED"] * TENANTS, "status", "orders")
    assert paused["connector"]["state"] == "PAUSED"
    kc.quiet("resume", "orders")
    kc.until(lambda s: _task_states(s) == ["RUNNING"] * TENANTS, "status", "orders")

    # update from a flat config file: the changed setting shows in config.
    assert written["schedule.max"] != update["schedule.max"]
    updated = kc.json("update", "orders", "--config-file", "orders-update.json")
    assert updated["name"] == "orders"
    assert_flat(updated["config"], update)
    assert kc.json("config", "orders")["schedule.max"] == update["schedule.max"]

    # validate-config: no error for a good flat config; a bad key is named.
    good = kc.json("validate-config", "http", "--config-file", "orders-update.json")
    assert good["error_count"] == 0, good
    bad_config = {"connector.class": "http", "request.urll": "https://api.example.com/items"}
    bad = kc.json("validate-config", "http", "--config-data", json.dumps(bad_config))
    assert bad["error_count"] >= 1
    assert "request.urll" in {entry["value"]["name"] for entry in bad["configs"] if _errors(entry)}

    # delete: gone from the list.
    kc.quiet("delete", "orders")
    kc.until(lambda names: names == ["invoices"], "list")

    assert kc.ran == documented_commands()


def assert_flat(config: dict[str, Any], written: dict[str, str]) -> None:
    """Connect's config form: every value a string, the keys as written plus Connect's name."""
    assert all(isinstance(value, str) for value in config.values()), config
    assert config["connector.class"] == "http"
    assert {key: config.get(key) for key in written} == written
    assert set(config) - set(written) <= {"name"}


def _task_states(status: dict[str, Any]) -> list[str]:
    return [task["state"] for task in status.get("tasks", [])]


def _errors(entry: dict[str, Any]) -> list[str]:
    errors: list[str] = entry["value"]["errors"]
    return errors
