"""``watukuy-source status`` as an operator runs it: the table of a prefix's statuses, read from
``<prefix>.status`` on a real broker, with dead owners' keys UNASSIGNED."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.kafka_support import delete_prefix, unique_prefix
from tests.integration.runners import ROOT, runner_env
from watukuy.control.keystatus import BackfillProgress, KeyStatus
from watukuy.control.status import StatusTopic
from watukuy.store.kafka.clients import admin_client
from watukuy.store.kafka.topics import TopicLayout, ensure_topics

HEADER = ["POLLER", "PARTITION", "STATE", "OWNER", "LAG", "CIRCUIT", "PARKED", "BACKFILL"]
ERROR = "HTTP 503 from GET https://api.example.com/{partition.data.slug}/invoices"


def _status(poller: str, partition: str, **changes: Any) -> KeyStatus:
    values: dict[str, Any] = {
        "poller": poller,
        "partition": partition,
        "state": "RUNNING",
        "owner": None,
        "lag": 4.2,
        "circuit": "closed",
        "parked": {"invalid": 0, "poison": 0},
    }
    values.update(changes)
    return KeyStatus(**values)


async def _publish(bootstrap: str, layout: TopicLayout) -> None:
    kafka = {"bootstrap.servers": bootstrap}
    live = StatusTopic(kafka, layout, runner_id="r-live", session_timeout=10, heartbeats=False)
    gone = StatusTopic(kafka, layout, runner_id="r-gone", session_timeout=10, heartbeats=False)
    await live.start()
    await gone.start()
    progress = BackfillProgress(pages=12, items=1200, cursor="2026-03-01T00:00:00Z", fraction=0.5)
    await live.publish(
        [
            _status("invoices", "acme"),
            _status("invoices", "globex", state="PAUSED", parked={"invalid": 2, "poison": 0}),
            _status("invoices", "umbrella", state="FAILED", circuit="open", last_error=ERROR),
            _status("orders", "", lag=None, backfill=progress),
        ]
    )
    await gone.publish([_status("invoices", "initech")])
    await gone.stop()  # clean: its heartbeat is tombstoned
    await live.stop(clean=False)  # its heartbeat stays, fresh for the session timeout


@pytest.fixture(scope="module")
def published(kafka_bootstrap: str) -> Iterator[str]:
    """A prefix whose status topic holds the statuses above; its name."""
    layout = TopicLayout(unique_prefix(), partitions=3, replication_factor=1)
    ensure_topics(admin_client({"bootstrap.servers": kafka_bootstrap}), layout, [])
    asyncio.run(_publish(kafka_bootstrap, layout))
    yield layout.prefix
    delete_prefix(kafka_bootstrap, layout.prefix)


def _config(tmp_path: Path, bootstrap: str, prefix: str, **runner: str) -> Path:
    config = {
        "kafka": {"bootstrap.servers": bootstrap},
        "topics": {"prefix": prefix, "partitions": 3},
        "runner": {"id": "status-cli", **runner},
        "pollers": [{"python": "integration.pollers:invoices"}],
    }
    path = tmp_path / "runner.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _run(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "watukuy.cli", "status", "--config", str(config), *extra],
        cwd=ROOT,
        env=runner_env("http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _rows(stdout: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in stdout.splitlines()]


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("watukuy-source:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_status_prints_every_partition_with_dead_owners_unassigned(
    tmp_path: Path, kafka_bootstrap: str, published: str
) -> None:
    done = _run(_config(tmp_path, kafka_bootstrap, published))
    assert done.returncode == 0, done.stderr
    rows = _rows(done.stdout)
    assert rows[0] == HEADER
    assert rows[1:6] == [
        ["invoices", "acme", "RUNNING", "r-live", "4s", "closed", "0", "-"],
        ["invoices", "globex", "PAUSED", "r-live", "4s", "closed", "invalid=2", "-"],
        ["invoices", "initech", "UNASSIGNED", "r-gone", "4s", "closed", "0", "-"],
        ["invoices", "umbrella", "FAILED", "r-live", "4s", "open", "0", "-"],
        [
            "orders",
            "''",
            "RUNNING",
            "r-live",
            "-",
            "closed",
            "0",
            "50%, 12 pages, 1,200 items, at 2026-03-01T00:00:00Z",
        ],
    ]
    assert done.stdout.splitlines()[6:] == [f"invoices/umbrella: {ERROR}"]
    assert "█" not in done.stdout and "[" not in done.stdout  # not a terminal: no bar


def test_status_of_one_poller(tmp_path: Path, kafka_bootstrap: str, published: str) -> None:
    done = _run(_config(tmp_path, kafka_bootstrap, published), "--poller", "orders")
    assert done.returncode == 0, done.stderr
    assert [row[:3] for row in _rows(done.stdout)] == [HEADER[:3], ["orders", "''", "RUNNING"]]


def test_a_terminal_gets_a_progress_bar(
    tmp_path: Path, kafka_bootstrap: str, published: str
) -> None:
    config = _config(tmp_path, kafka_bootstrap, published)
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "watukuy.cli", "status", "--config", str(config)],
            cwd=ROOT,
            env=runner_env("http://127.0.0.1:9", PYTHONIOENCODING="utf-8"),
            stdout=terminal,
            stderr=subprocess.PIPE,
        )
        os.close(terminal)
        output = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
        assert process.wait(timeout=60) == 0
    finally:
        os.close(controller)
    text = output.decode()
    orders = next(line for line in text.splitlines() if line.startswith("orders"))
    assert "[" + "█" * 10 + "░" * 10 + "] 50% 12 pages, 1,200 items" in orders


def test_an_unknown_poller_is_a_usage_error(
    tmp_path: Path, kafka_bootstrap: str, published: str
) -> None:
    done = _run(_config(tmp_path, kafka_bootstrap, published), "--poller", "nope")
    assert done.returncode == 2
    assert _one_line(done.stderr) == (
        "watukuy-source: --poller: unknown poller 'nope' (known: invoices, orders)"
    )


def test_a_prefix_without_topics_is_named(tmp_path: Path, kafka_bootstrap: str) -> None:
    prefix = unique_prefix()
    done = _run(_config(tmp_path, kafka_bootstrap, prefix))
    assert done.returncode == 1
    assert _one_line(done.stderr) == (
        f"watukuy-source: topic '{prefix}.status' does not exist: no runner has started with "
        f"topics.prefix '{prefix}' on this cluster"
    )


def test_an_unreachable_broker_ends_status_with_the_one_line(tmp_path: Path) -> None:
    config = _config(tmp_path, "127.0.0.1:1", unique_prefix(), **{"startup.timeout": "3s"})
    done = _run(config)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "watukuy-source: cannot reach Kafka at 127.0.0.1:1 within 3s; "
        "check kafka.bootstrap.servers (runner.startup.timeout)"
    )
    assert "Traceback" not in done.stderr
