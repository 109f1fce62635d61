"""The engine on the Kafka store, one instance, against the vendor simulator and a real broker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from integration.simulator import VendorSimulator, running_simulator
from tests.engine.support import Env
from tests.integration.kafka_support import (
    delete_prefix,
    in_sequence,
    make_store,
    read_topic,
    unique_prefix,
    wait_owned,
)
from watukuy import Engine, FakeClock


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    clock = FakeClock()
    sim = VendorSimulator(tenants=3, items_per_tenant=10, seed=3, now=clock.now)
    async with running_simulator(sim) as base_url:
        environment = Env(sim=sim, base_url=base_url, clock=clock)
        try:
            yield environment
        finally:
            for engine in environment.engines:
                await engine.close()


@pytest.fixture
def prefix(kafka_bootstrap: str) -> AsyncIterator[str]:
    name = unique_prefix()
    yield name
    delete_prefix(kafka_bootstrap, name)


async def _started(env: Env, bootstrap: str, prefix: str, runner: str = "r1") -> Engine:
    store = make_store(bootstrap, prefix, runner)
    engine = env.make_engine(env.make_poller(), store=store)
    await engine.__aenter__()
    await wait_owned(store, 4)
    return engine


async def test_every_item_becomes_one_event_and_state_survives_a_restart(
    env: Env, kafka_bootstrap: str, prefix: str
) -> None:
    engine = await _started(env, kafka_bootstrap, prefix)
    await engine.tick()
    await engine.close()

    first = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    assert first.count == 30
    for tenant in env.tenants:
        assert in_sequence(first.sequences(f"invoices/{tenant.id}"))

    # A new instance restores cursor, snapshot and sequence from the compacted topics.
    tenant = env.tenants[0]
    env.sim.update_item(tenant.id, env.sim.items(tenant.id)[0]["id"], amount=999)
    env.sim.create_item(tenant.id)
    env.clock.advance(60)
    engine = await _started(env, kafka_bootstrap, prefix)
    await engine.tick()
    await engine.close()

    second = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    key = f"invoices/{tenant.id}"
    assert second.count == 32
    assert in_sequence(second.sequences(key))
    assert [v["type"] for v in second.by_key[key][-2:]] == ["updated", "created"]
    assert len(set(second.ids())) == 32
