"""Runner instances as real processes (``python -m watukuy.cli --config ...``) for fault tests:
they can be SIGKILLed and SIGSTOPped like any deployment, and the tests watch them only
through Kafka (group membership, topics) and their exit codes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient

ROOT = Path(__file__).resolve().parents[2]


def write_config(
    path: Path, bootstrap: str, prefix: str, runner: str, **runner_options: Any
) -> Path:
    config = {
        "kafka": {"bootstrap.servers": bootstrap},
        "topics": {"prefix": prefix, "partitions": 8},
        "runner": {
            "id": runner,
            # Shorter than the 10s default so the suite stays quick; set it to measure defaults.
            "session.timeout": os.environ.get("WATUKUY_TEST_SESSION_TIMEOUT", "6s"),
            "commit.interval": "100ms",
            **runner_options,
        },
        "rest": {"listen": "127.0.0.1:0"},  # many runners on one host: any free port each
        "pollers": [{"python": "integration.pollers:invoices"}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Runner:
    name: str
    config: Path
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = field(default=0)
    # Options of ``integration.faults.runner`` (e.g. ["--hold-transaction", "0.3"]): run the
    # runner with fault-injecting Kafka clients instead of ``watukuy.cli``.
    faults: list[str] | None = None

    def start(self) -> Runner:
        self.starts += 1
        handle = self.log.open("ab")
        module = "watukuy.cli" if self.faults is None else "integration.faults.runner"
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, "--debug", "--config", str(self.config)]
            + (self.faults or []),
            cwd=ROOT,
            env=self.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        return self

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signum)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.wait(10)

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM, then wait for a clean exit; the exit code."""
        if self.process is None:
            return None
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float) -> int | None:
        if self.process is None:
            return None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def runner_env(vendor_url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "connector")])
    env["WATUKUY_VENDOR_URL"] = vendor_url
    env.update(extra)
    return env


def assignments(bootstrap: str, group: str) -> dict[str, set[int]]:
    """Which runner (group.instance.id) holds which partitions of the state topic now."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        described = admin.describe_consumer_groups([group])[group].result(timeout=15)
    except KafkaException:  # a coordinator still loading (fresh broker): no view yet
        return {}
    if described.state in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
        return {}
    return {
        (m.group_instance_id or m.client_id): {tp.partition for tp in m.assignment.topic_partitions}
        for m in described.members
    }


def free_port() -> int:
    """A TCP port free on loopback now (for a runner's ``rest.listen``)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for(predicate: Any, timeout: float, what: str, step: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
