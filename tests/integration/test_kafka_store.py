"""The engine on the Kafka store, one instance, against the vendor simulator and a real broker."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.engine.support import Env, simulated
from tests.integration.kafka_support import (
    delete_prefix,
    in_sequence,
    latest_values,
    make_store,
    read_to_end,
    read_topic,
    unique_prefix,
    wait_owned,
)
from watukuy import Engine
from watukuy.core.schedule import ON_GRID
from watukuy.serde import framing
from watukuy.serde.events import dlq_schema
from watukuy.store.kafka import served
from watukuy.store.kafka.served import MARK_EVERY


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with simulated(3, 10, 3) as environment:
        yield environment


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


def _identity(item: dict[str, Any]) -> str:
    if item.get("broken"):
        raise ValueError("the vendor sent an item without a usable id")
    return str(item["id"])


async def test_an_invalid_item_goes_to_the_dlq_with_triage_headers_and_the_key_goes_on(
    env: Env, kafka_bootstrap: str, prefix: str
) -> None:
    tenant = env.tenants[1]
    env.sim.create_item(tenant.id, broken=True)
    store = make_store(kafka_bootstrap, prefix)
    engine = env.make_engine(env.make_poller(identity=_identity), store=store)
    await engine.__aenter__()
    await wait_owned(store, 4)
    await engine.tick()
    parked = await engine.parked.list("invoices", partition=tenant.id)
    await engine.close()

    assert [p.kind for p in parked] == ["invalid"]
    dlq = await asyncio.to_thread(read_to_end, kafka_bootstrap, [f"{prefix}.dlq.invoices"])
    assert len(dlq) == 1
    key, headers = dlq[0].key, dlq[0].headers
    body = framing.decode(dlq[0].value or b"", dlq_schema().schema)
    assert key == f"invoices/{tenant.id}".encode()
    assert headers["watukuy.kind"] == b"invalid"
    assert headers["watukuy.stage"] == b"poll"
    assert headers["watukuy.partition"] == tenant.id.encode()
    assert b"without a usable id" in headers["watukuy.error.message"]
    assert headers["watukuy.attempts"] == b"1"
    assert "watukuy.cursor" in headers
    assert json.loads(body["item"])["broken"] is True
    assert (body["kind"], body["stage"], body["truncated"]) == ("invalid", "poll", False)
    events = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    assert len(events.by_key[f"invoices/{tenant.id}"]) == 10  # the others were published

    # The parked record is state: a new instance lists it again.
    store = make_store(kafka_bootstrap, prefix)
    engine = env.make_engine(env.make_poller(identity=_identity), store=store)
    await engine.__aenter__()
    await wait_owned(store, 4)
    again = await engine.parked.list("invoices", partition=tenant.id)
    assert [p.id for p in again] == [p.id for p in parked]


async def test_an_event_too_large_for_its_topic_is_parked_and_takes_no_sequence_number(
    env: Env, kafka_bootstrap: str, prefix: str
) -> None:
    tenant = env.tenants[2]
    huge = env.sim.create_item(tenant.id, note="x" * 1_200_000)
    engine = await _started(env, kafka_bootstrap, prefix)
    await engine.tick()
    parked = await engine.parked.list("invoices", partition=tenant.id)
    await engine.close()

    events = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    assert events.count == 30  # the transaction with the huge item committed
    key = f"invoices/{tenant.id}"
    assert huge["id"] not in {e["subject"] for e in events.by_key[key]}
    assert events.sequences(key) == list(range(1, 11))  # no number taken by the huge one
    assert [(p.kind, p.subject) for p in parked] == [("invalid", huge["id"])]
    assert "exceeds max.message.bytes" in parked[0].error
    dlq = await asyncio.to_thread(read_to_end, kafka_bootstrap, [f"{prefix}.dlq.invoices"])
    assert len(dlq) == 1
    headers, value = dlq[0].headers, dlq[0].value or b""
    letter = framing.decode(value, dlq_schema().schema)
    assert (
        letter["truncated"]
        and letter["original_sha256"] == headers["watukuy.original.sha256"].decode()
    )
    assert headers["watukuy.kind"] == b"invalid"
    assert headers["watukuy.identity"] == huge["id"].encode()
    assert int(headers["watukuy.original.bytes"]) > 1_200_000
    assert len(headers["watukuy.original.sha256"]) == 64
    assert len(value) <= 4096


async def test_an_invalid_item_too_large_for_the_parked_topic_is_parked_cut(
    env: Env, kafka_bootstrap: str, prefix: str
) -> None:
    # Whole, its parked record failed the key's transaction at every retry: the key stalled.
    tenant = env.tenants[1]
    env.sim.create_item(tenant.id, broken=True, note="x" * 1_200_000)
    store = make_store(kafka_bootstrap, prefix)
    engine = env.make_engine(env.make_poller(identity=_identity), store=store)
    await engine.__aenter__()
    await wait_owned(store, 4)
    await asyncio.wait_for(engine.tick(), 60)
    await engine.close()

    events = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    assert len(events.by_key[f"invoices/{tenant.id}"]) == 10 and events.count == 30
    dlq = await asyncio.to_thread(read_to_end, kafka_bootstrap, [f"{prefix}.dlq.invoices"])
    assert [d.headers["watukuy.kind"] for d in dlq] == [b"invalid"]
    assert int(dlq[0].headers["watukuy.original.bytes"]) > 1_200_000

    store = make_store(kafka_bootstrap, prefix)
    engine = env.make_engine(env.make_poller(identity=_identity), store=store)
    await engine.__aenter__()
    await wait_owned(store, 4)
    [parked] = await engine.parked.list("invoices", partition=tenant.id)
    # What is left is no item: a retry says so and what would bring it back, and keeps it.
    retried = await engine.parked.retry("invoices", [parked.id], partition=tenant.id)
    [after] = await engine.parked.list("invoices", partition=tenant.id)
    await engine.close()
    assert parked.kind == "invalid" and parked.item["truncated"] is True
    assert parked.item["original_bytes"] > 1_200_000 and len(parked.item["head"]) == 2048
    assert parked.item["original_sha256"] == dlq[0].headers["watukuy.original.sha256"].decode()
    assert retried == [] and after.id == parked.id and after.attempts == parked.attempts + 1
    assert "cannot be retried from here; replay the partition" in after.error


async def test_removing_a_partition_tombstones_every_record_of_the_key(
    env: Env, kafka_bootstrap: str, prefix: str
) -> None:
    tenant = env.tenants[0]
    env.sim.create_item(tenant.id, broken=True)  # one parked record too
    store = make_store(kafka_bootstrap, prefix)
    engine = env.make_engine(env.make_poller(identity=_identity), store=store)
    await engine.__aenter__()
    await wait_owned(store, 4)
    await engine.tick()
    await engine.partitions.remove("invoices", tenant.id)
    await engine.close()

    mine = f"invoices/{tenant.id}".encode()
    for topic in ("state", "items", "parked"):
        latest = await asyncio.to_thread(latest_values, kafka_bootstrap, f"{prefix}.{topic}")
        of_key = {k: v for k, v in latest.items() if k == mine or k.startswith(mine + b"/")}
        assert of_key, f"{topic}: the key never had records"
        assert all(v is None for v in of_key.values()), f"{topic} still holds the key"
        others = [k for k, v in latest.items() if v is not None]
        assert others or topic == "parked"  # other tenants keep their records


def _served_said(bootstrap: str, store: Any, partitions: int) -> list[float | None]:
    """What the group's offsets of each partition of the state topic say was served."""
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": store.settings.group})
    try:
        state = store.layout.state
        found = group.committed([TopicPartition(state, p) for p in range(partitions)], 30)
        return [served.decode(tp.metadata) for tp in found]
    finally:
        group.close()


def _polls(env: Env) -> int:
    return sum(env.sim.request_count(tenant.id) for tenant in env.tenants)


async def test_idle_polls_write_nothing_and_the_next_instance_keeps_their_schedule(
    env: Env, kafka_bootstrap: str, prefix: str
) -> None:
    """10,000 idle keys cost a runner 9% of a core in state records of their due times: an
    idle poll writes none, and what the instance says it served keeps the schedule whole."""
    poller = env.make_poller(schedule={"min": "30s", "max": "30s"})
    store = make_store(kafka_bootstrap, prefix)
    engine = env.make_engine(poller, store=store)
    await engine.__aenter__()
    await wait_owned(store, 4)
    await engine.tick()  # the first polls: items, ETags, cursors
    env.clock.advance(30)
    await engine.tick()  # the next page's cursor and ETag
    written = await asyncio.to_thread(read_to_end, kafka_bootstrap, [f"{prefix}.state"])
    for _ in range(5):
        env.clock.advance(30)
        await engine.tick()
    assert _polls(env) == 3 * 7  # each key polled at each of its due times
    due = {entry.partition: entry.next_due for entry in engine.inspect()}
    idle = await asyncio.to_thread(read_to_end, kafka_bootstrap, [f"{prefix}.state"])
    assert len(idle) == len(written)  # five idle polls of each key: not one record
    # With nothing else to commit, what was served goes with offsets alone: a runner killed
    # now leaves its partitions' next owner that word (not a stored due time five polls old).
    await asyncio.sleep(MARK_EVERY + 1)
    said = await asyncio.to_thread(_served_said, kafka_bootstrap, store, 4)
    assert said == [env.clock.now() + 2 * ON_GRID] * 4
    await engine.close()  # its last word on what was served goes with its last offsets

    # The next instance polls each key when it was due next: not at once (its stored due
    # time is five polls old), and without skipping one.
    store = make_store(kafka_bootstrap, prefix, "r2")
    engine = env.make_engine(poller, store=store)
    await engine.__aenter__()
    await wait_owned(store, 4)
    await engine.tick()
    assert {entry.partition: entry.next_due for entry in engine.inspect()} == due
    assert _polls(env) == 3 * 7
    env.clock.advance(30)
    await engine.tick()
    assert _polls(env) == 3 * 8
    # Closed here, before the prefix fixture deletes the topics: closed by the env fixture
    # after that, its last transaction met unknown topics and waited out two 6 s timeouts.
    await engine.close()
