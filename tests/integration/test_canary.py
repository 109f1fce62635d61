"""No partition data reaches Kafka: the canary tenants of :mod:`tests.engine.canaries` fail in
every way a poll can (5xx, timeout, malformed JSON, 404, 401, refused, a failing handler) on
the Kafka store, and every record under the run's prefix (state, items, parked, DLQ, events,
schemas, status: keys, values and headers) is searched for every canary."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from confluent_kafka.admin import AdminClient

from integration.simulator import VendorSimulator, running_simulator
from tests.engine.canaries import POLLER, TEMPLATE, Scenario
from tests.integration.kafka_support import (
    Stored,
    make_store,
    read_to_end,
    wait_owned,
)
from watukuy import Engine, FakeClock

ROUNDS = 4


@pytest.fixture
async def scenario() -> AsyncIterator[tuple[Scenario, FakeClock]]:
    clock = FakeClock()
    sim = VendorSimulator(tenants=0, items_per_tenant=3, seed=13, now=clock.now)
    async with running_simulator(sim) as base_url:
        yield Scenario.build(sim, base_url), clock


def everything_under(bootstrap: str, prefix: str) -> list[Stored]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = sorted(t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix + "."))
    return read_to_end(bootstrap, topics, committed=False)


async def test_no_canary_reaches_any_topic(
    scenario: tuple[Scenario, FakeClock],
    kafka_bootstrap: str,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    canaries, clock = scenario
    http = canaries.http()
    store = make_store(kafka_bootstrap, prefix)
    engine = Engine([canaries.poller()], store=store, clock=clock, http=http)
    engine.on(POLLER, canaries.handler)
    with caplog.at_level(logging.DEBUG, logger="watukuy"):
        await engine.__aenter__()
        try:
            await wait_owned(store, 4)
            for _ in range(ROUNDS):
                await engine.tick()
                clock.advance(15 * 60)
            inspections = engine.inspect()
        finally:
            await engine.close()
            await http.close()

    errors = {i.partition: i.last_error for i in inspections}
    assert errors[canaries.tenant("5xx").key] == f"VendorError: GET {TEMPLATE} -> 500"

    records = await asyncio.to_thread(everything_under, kafka_bootstrap, prefix)
    by_topic: dict[str, int] = {}
    leaks: list[str] = []
    for record in records:
        by_topic[record.topic] = by_topic.get(record.topic, 0) + 1
        for part, blob in [("key", record.key), ("value", record.value), *record.headers.items()]:
            for canary in canaries.found_in(blob or b""):
                leaks.append(f"{record.topic}@{record.offset} {part}: {canary}")
    assert leaks == []

    # The search covered what matters: failing keys' state, the poison DLQ, the events.
    assert by_topic.get(f"{prefix}.state", 0) >= len(canaries.tenants)
    assert by_topic.get(f"{prefix}.dlq.{POLLER}", 0) == 3
    assert by_topic.get(f"{prefix}.events.{POLLER}", 0) > 0
    dlq = [r for r in records if r.topic == f"{prefix}.dlq.{POLLER}"]
    assert all(b"[redacted]" in r.headers["watukuy.error.message"] for r in dlq)
    for record in caplog.records:
        assert canaries.found_in(record.getMessage()) == [], record.getMessage()
