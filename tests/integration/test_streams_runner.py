"""A connector with two streams run by a real runner process on the real broker against the
simulator: each stream is its own poller ``tracker.<stream>`` and publishes every tenant's
items to its own topic ``<prefix>.events.tracker.<stream>``, keyed by its own poller name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from integration.demo import Simulator, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.kafka_support import in_sequence, read_topic
from tests.integration.runners import Runner, runner_env, wait_for

TENANTS = 2
ITEMS = 4


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(TENANTS, ITEMS)


def tracker() -> dict[str, Any]:
    """Two views of the simulator's items: one follows its resume token, the other lists
    everything each poll (no cursor); both from one tenant listing and one base URL."""
    return {
        "name": "tracker",
        "partitions": {
            "http": {
                "url": "${env:WATUKUY_VENDOR_URL}/tenants",
                "records": "tenants",
                "key": "id",
                "data": {"slug": "slug", "token": "token"},
            },
            "refresh": "30s",
        },
        "defaults": {
            "request": {
                "base": "${env:WATUKUY_VENDOR_URL}/{partition.data.slug}",
                "auth": {"bearer": "{partition.data.token}"},
                "query": {"limit": 3},
            },
            "records": "data",
            "identity": "id",
            "version": "etag",
            "paginate": {"next_token": {"path": "next", "param": "cursor"}},
            "schedule": {"min": "1s", "max": "2s"},
        },
        "streams": [
            {
                "name": "items",
                "request": {"path": "/items"},
                "cursor": {"token": {"path": "resume", "param": "cursor"}},
            },
            {"name": "listing", "request": {"path": "items"}},
        ],
    }


def test_each_stream_publishes_to_its_own_topic(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> None:
    config = runner_config(kafka_bootstrap, prefix, "streams-1", example={"pollers": [tracker()]})
    path = write_runner_config(tmp_path / "runner.yaml", config)
    runner = Runner("streams-1", path, runner_env(simulator.base_url), tmp_path / "r.log")
    runner.start()
    topics = {name: f"{prefix}.events.tracker.{name}" for name in ("items", "listing")}
    try:

        def arrived(stream: str) -> bool:
            read = read_topic(kafka_bootstrap, topics[stream], idle=1.0)
            expected = {f"tracker.{stream}/{tenant['id']}" for tenant in simulator.tenants}
            return set(read.by_key) == expected and all(
                len(events) >= ITEMS for events in read.by_key.values()
            )

        for stream in topics:
            wait_for(lambda s=stream: arrived(s), 90, f"every tenant's items on {stream}")
        assert runner.process is not None and runner.process.poll() is None, runner.output()
    finally:
        assert runner.stop() == 0, runner.output()

    for stream, topic in topics.items():
        # Read once, for good: a loaded machine may take seconds to hand the consumer its
        # partitions, and an idle second before the first record would read nothing.
        read = read_topic(kafka_bootstrap, topic, idle=5.0)
        for key, events in read.by_key.items():
            assert key.startswith(f"tracker.{stream}/")
            assert in_sequence(read.sequences(key)), key
            assert sorted(e["subject"] for e in events) == sorted({e["subject"] for e in events})
        assert len(read.ids()) == len(set(read.ids())) == TENANTS * ITEMS
