"""Test wiring shared by every tier.

Tests under ``tests/integration`` are marked ``integration`` and talk to a real Apache Kafka
broker: the one named by ``WATUKUY_BOOTSTRAP``, else the one in ``.watukuy/broker``, started
if none runs and stopped by the last session using it (``integration.kafka.broker.shared``).
Everything else is marked ``unit`` and needs no broker.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

INTEGRATION_DIR = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        in_integration = INTEGRATION_DIR in Path(str(item.fspath)).parents
        item.add_marker(pytest.mark.integration if in_integration else pytest.mark.unit)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    from integration.kafka import broker

    with broker.shared() as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def schema_registry_url() -> Iterator[str]:
    """A Confluent-compatible schema registry: ``WATUKUY_SCHEMA_REGISTRY_URL``, else Apicurio
    Registry already started by ``integration/registry``, else one this session starts."""
    external = os.environ.get("WATUKUY_SCHEMA_REGISTRY_URL")
    if external:
        yield external
        return
    from integration import registry

    running = registry.read_running()
    if running is not None:
        yield running.confluent_url
        return
    started = registry.start()
    try:
        yield started.confluent_url
    finally:
        registry.stop()


@pytest.fixture
def new_topic(kafka_bootstrap: str) -> Iterator[Callable[..., str]]:
    """Create uniquely named topics for one test and delete them afterwards."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    created: list[str] = []

    def create(prefix: str = "t", partitions: int = 1, **config: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)]
        )
        futures[name].result(timeout=30)
        created.append(name)
        return name

    yield create
    if created:
        for future in admin.delete_topics(created).values():
            # Best effort: the broker may already be gone at teardown.
            with contextlib.suppress(Exception):
                future.result(timeout=30)
