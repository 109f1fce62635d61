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
from typing import Any

import pytest

INTEGRATION_DIR = Path(__file__).parent / "integration"

# ``make test`` runs the suite on three xdist workers (``-n 3``). The tests of these files spend
# their time waiting (for session timeouts, the broker's aborts, vendor delays, held
# transactions), not computing, and each runs on topics, runners and a simulator of its own, so
# they run beside the rest. Every other integration test is one unit of work for one worker,
# one after another in file order as a plain ``pytest`` runs them: two of those at once would
# starve each other's runner processes on a two-core machine.
BESIDE_THE_REST = {
    "test_child_on_change_kafka.py",
    "test_child_on_change_kill.py",
    "test_child_streams_kill.py",
    "test_credentials_kafka.py",
    "test_credentials_runner.py",
    "test_faults.py",
    "test_failover.py",
    "test_group_liveness.py",
    "test_runbooks.py",
    "test_webhooks_runner.py",
    "test_windows_runner.py",
}
ONE_AT_A_TIME = "integration, one at a time"


def pytest_configure(config: pytest.Config) -> None:
    # A bad WATUKUY_KAFKA_VERSION stops the session before its first test, not at the first
    # test that needs the broker, minutes in.
    from integration.kafka.versions import UnsupportedKafkaVersion, kafka_version

    try:
        kafka_version()
    except UnsupportedKafkaVersion as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        in_integration = INTEGRATION_DIR in Path(str(item.fspath)).parents
        item.add_marker(pytest.mark.integration if in_integration else pytest.mark.unit)


def work_unit(nodeid: str) -> str:
    """The unit of work (one worker runs it whole) a test belongs to: the one-at-a-time
    integration tests share one; every other test is a unit of its own."""
    path = nodeid.split("::", 1)[0]
    in_integration = path.startswith("tests/integration/")
    return ONE_AT_A_TIME if in_integration and Path(path).name not in BESIDE_THE_REST else nodeid


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, when it runs the suite
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    # Scheduling by our own units, not by ``xdist_group`` marks: xdist 3.8 renames the marked
    # tests' node ids in a way pytest 9.2 no longer sees, so ``--dist loadgroup`` groups nothing.
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)


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
