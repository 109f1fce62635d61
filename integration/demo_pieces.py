"""The pieces of the demo that the benchmarks and integration tests share: the vendor
simulator and runner processes, their configs, and the Kafka helpers around them.

Everything here starts real processes in sessions of their own (so a Ctrl-C in the terminal
reaches only the script, which then stops them in order) and hands back what is needed to stop
them again.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from integration.kafka import broker

ROOT = Path(__file__).resolve().parents[1]
POLLER = "integration.pollers:invoices"
EXAMPLE = ROOT / "config" / "invoices.yaml"
"""The declarative invoices poller the demo runs (the same one docker-compose runs)."""


@dataclass
class Simulator:
    process: subprocess.Popen[str]
    base_url: str
    tenants: list[dict[str, str]]

    def stop(self) -> int | None:
        return stop_process(self.process, signal.SIGTERM, 10)


def start_simulator(*options: str, log: Path | None = None) -> Simulator:
    """``python -m integration.simulator OPTIONS --port 0``; waits for its address line."""
    command = [sys.executable, "-m", "integration.simulator", *options, "--port", "0"]
    with open(log or os.devnull, "ab") as stderr:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # see start_runner
        )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 60)
    line = process.stdout.readline() if ready else ""
    if not line:
        stop_process(process, signal.SIGKILL, 5)
        where = f"; see {log}" if log is not None else ""
        raise RuntimeError(f"the vendor simulator did not print its address{where}")
    info = json.loads(line)
    return Simulator(process, info["base_url"], info["tenants"])


def example_config(schedule: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``config/invoices.yaml`` with its relative paths made absolute (the demo writes its own
    copy elsewhere) and, if given, the pollers' ``schedule`` replaced."""
    config: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    for poller in config["pollers"]:
        if isinstance(poller.get("schema"), str):
            poller["schema"] = str((EXAMPLE.parent / poller["schema"]).resolve())
        if schedule is not None:
            poller["schedule"] = dict(schedule)
    return config


def runner_config(
    bootstrap: str,
    prefix: str,
    runner_id: str,
    *,
    partitions: int = 4,
    example: Mapping[str, Any] | None = None,
    **runner: Any,
) -> dict[str, Any]:
    """A runner config on this broker and topics prefix: the pollers and budgets of
    ``example`` (see :func:`example_config`), else the Python poller ``integration.pollers``."""
    config: dict[str, Any] = {
        "kafka": {"bootstrap.servers": bootstrap},
        "topics": {"prefix": prefix, "partitions": partitions, "replication.factor": 1},
        "runner": {"id": runner_id, "commit.interval": "100ms", **runner},
        "rest": {"listen": "127.0.0.1:0"},  # any free port: the demo does not use REST
        "pollers": [{"python": POLLER}],
    }
    if example is not None:
        config["budgets"] = example.get("budgets", {})
        config["pollers"] = example["pollers"]
    return config


def write_config(path: Path, config: Mapping[str, Any], *comments: str) -> Path:
    """``config`` as YAML, after ``comments`` (one ``#`` line each)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "".join(f"# {line}\n" for line in comments)
    path.write_text(header + yaml.safe_dump(dict(config), sort_keys=False))
    return path


def runner_env(vendor_url: str, **extra: str) -> dict[str, str]:
    """The runner's environment: the simulator's address, and the repo on ``PYTHONPATH`` so
    ``integration.pollers`` (and an uninstalled ``watukuy``) can be imported."""
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "connector"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["WATUKUY_VENDOR_URL"] = vendor_url
    env.update(extra)
    return env


def start_runner(config: Path, env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``python -m watukuy.cli --config CONFIG`` (what ``watukuy-source`` runs).

    In a session of its own, so a Ctrl-C in the terminal reaches only this script, which then
    sends the runner exactly one SIGTERM (a second signal during its shutdown would kill it:
    see :func:`signals_interrupt`)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "watukuy.cli", "--config", str(config)],
            cwd=ROOT,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def signals_interrupt() -> None:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt, so this script always stops the
    processes it started (they run in sessions of their own and get no terminal signals)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.default_int_handler)


def stop_process(process: subprocess.Popen[Any], signum: int, timeout: float) -> int | None:
    """Send ``signum`` and wait for the exit code; SIGKILL after ``timeout`` seconds."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    if process.stdout is not None:
        process.stdout.close()
    return process.returncode


def wait_for_topic(
    bootstrap: str, topic: str, timeout: float, alive: Any = lambda: True, step: float = 0.2
) -> list[int] | None:
    """The partitions of ``topic`` once the runner has created it (asked every ``step``
    seconds); ``None`` on a timeout or when ``alive()`` turns false first."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        with contextlib.suppress(KafkaException):  # the broker is slow to answer: ask again
            metadata = admin.list_topics(timeout=5).topics.get(topic)
            if metadata is not None and metadata.error is None and metadata.partitions:
                return sorted(metadata.partitions)
        time.sleep(step)
    return None


def committed_reader(
    bootstrap: str, topic: str, partitions: list[int], *, timing: bool = False
) -> Consumer:
    """A read_committed consumer of all of ``topic`` from its beginning (no group commits).
    ``timing``: for a bench that times when records become readable, it reads them as soon as
    it can (the broker holds an empty fetch 10 ms, not 500; a partition without a leader yet
    is asked about again within 10-100 ms, not 100-1000)."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"watukuy-reader-{uuid.uuid4().hex[:8]}",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    }
    if timing:
        config |= {
            "fetch.wait.max.ms": 10,
            "fetch.error.backoff.ms": 10,
            "retry.backoff.ms": 10,
            "retry.backoff.max.ms": 100,
            "topic.metadata.refresh.fast.interval.ms": 10,
        }
    consumer = Consumer(config)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    return consumer


def delete_topics(bootstrap: str, prefix: str, within: float = 30.0) -> list[str]:
    """Delete the topics named ``<prefix>.*``, and wait up to ``within`` seconds until the
    broker no longer lists them (its metadata follows a deletion a moment later: a reader
    right after the demo ended found every topic still there once, in CI); the names deleted.
    One that will not go is said on stderr with why, not raised: a cleanup must not hide
    what the run printed before it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix + ".")]
    if not names:
        return []
    failed: dict[str, str] = {}
    for name, future in admin.delete_topics(names, operation_timeout=within).items():
        try:
            future.result(timeout=within)
        except Exception as exc:  # said below, with the topic's name
            failed[name] = str(exc)
    deadline = time.monotonic() + within
    left = set(names)
    while left and time.monotonic() < deadline:
        left &= set(admin.list_topics(timeout=10).topics)
        if left:
            time.sleep(0.1)
    for name in sorted(left):
        why = failed.get(name, f"still listed {within:g}s after its deletion")
        print(f"topic {name} not deleted: {why}", file=sys.stderr, flush=True)
    return sorted(names)


def kafka_broker(announce: str) -> contextlib.AbstractContextManager[str]:
    """``$WATUKUY_BOOTSTRAP``, else the broker in ``.watukuy/broker``: started here (fetching
    Kafka on the first run) if it is not running, and then stopped on the way out unless
    another process still uses it."""
    return broker.shared(say=lambda line: print(f"{announce}: {line}", flush=True))


def gap_free(sequences: list[int]) -> bool:
    """Whether ``sequences`` is exactly 1, 2, 3, ... (no gap, no repeat, in order)."""
    return sequences == list(range(1, len(sequences) + 1))
