"""Scenario 11 of issue 14, rolling upgrade: an instance meets a key whose stored state a newer
release wrote. It must not crash with ``StateCorrupted`` nor overwrite the newer value: that
key waits (not polled, not written, its status says why) while the other keys go on, and once
an instance that reads it holds the key, it goes on there."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from confluent_kafka import Producer

from tests.engine.support import Env, simulated
from tests.integration.kafka_support import (
    latest_values,
    make_store,
    read_topic,
    wait_owned,
)
from watukuy import Engine
from watukuy.core.errors import Conflict
from watukuy.serde import framing
from watukuy.serde import state as serde
from watukuy.store.kafka.partitioner import partition_for


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with simulated(3, 5, 11) as environment:
        yield environment


async def _started(env: Env, bootstrap: str, prefix: str) -> Engine:
    store = make_store(bootstrap, prefix)
    engine = env.make_engine(env.make_poller(), store=store)
    await engine.__aenter__()
    await wait_owned(store, 4)
    return engine


def _write_newer_state(bootstrap: str, prefix: str, key: str) -> bytes:
    """Rewrite ``key``'s latest state as a newer release would: ``format_version`` + 1."""
    topic = f"{prefix}.state"
    current = latest_values(bootstrap, topic)[key.encode()]
    assert current is not None
    schema = serde.SCHEMAS.current[serde.STATE]
    value = framing.decode(current, schema)
    value["format_version"] = serde.FORMAT_VERSION + 1
    value["sequence"] = 1000  # what the newer release committed; must survive
    newer = framing.encode(schema, value)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, newer, key.encode(), partition=partition_for(key, 4))
    assert producer.flush(30) == 0
    return newer


async def test_an_older_instance_lets_a_newer_key_wait_and_runs_the_others(
    env: Env,
    kafka_bootstrap: str,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = await _started(env, kafka_bootstrap, prefix)
    await engine.tick()
    await engine.close()
    newer_tenant, other = env.tenants[0], env.tenants[1]
    waiting = f"invoices/{newer_tenant.id}"
    newer = await asyncio.to_thread(_write_newer_state, kafka_bootstrap, prefix, waiting)

    for tenant in (newer_tenant, other):
        env.sim.update_item(tenant.id, env.sim.items(tenant.id)[0]["id"], amount=1)
    env.sim.reset_stats()
    env.clock.advance(3600)  # every key is due
    caplog.set_level(logging.WARNING)
    engine = await _started(env, kafka_bootstrap, prefix)
    await engine.tick()
    await engine.tick()

    # The other keys went on; the newer one was not polled, and says why.
    assert env.sim.request_count(other.id) > 0
    assert env.sim.request_count(newer_tenant.id) == 0
    shown = {f"{e.poller}/{e.partition}": e for e in engine.inspect()}
    assert set(shown) == {f"invoices/{t.id}" for t in env.tenants}
    assert "waits for a newer release" in (shown[waiting].last_error or "")
    assert all(shown[k].last_error is None for k in shown if k != waiting)
    lines = [r.getMessage() for r in caplog.records if "newer release" in r.getMessage()]
    assert any(waiting in line for line in lines)
    assert len([line for line in lines if "not polled here" in line]) == 1
    # Operations on it are refused rather than writing over the newer value.
    with pytest.raises(Conflict, match="newer release"):
        await engine.trigger("invoices", partition=newer_tenant.id)
    await engine.close()

    latest = await asyncio.to_thread(latest_values, kafka_bootstrap, f"{prefix}.state")
    assert latest[waiting.encode()] == newer  # byte for byte: nothing wrote over it
    events = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    assert len(events.by_key[f"invoices/{other.id}"]) == 6  # 5 created, 1 updated
    assert len(events.by_key[waiting]) == 5  # only what the first run published

    # An instance of the newer release takes the key over and goes on from its state.
    monkeypatch.setattr(serde, "FORMAT_VERSION", serde.FORMAT_VERSION + 1)
    engine = await _started(env, kafka_bootstrap, prefix)
    await engine.tick()
    await engine.close()
    assert env.sim.request_count(newer_tenant.id) > 0
    events = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    mine = events.by_key[waiting]
    assert [v["type"] for v in mine[5:]] == ["updated"]
    assert mine[-1]["sequence"] == 1001  # numbered on from the newer release's state
