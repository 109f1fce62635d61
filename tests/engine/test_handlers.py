"""Delivering events: engine.on handlers (order, context, retries, poison), invalid items,
parked.retry, and engine.subscribe."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Any

import pytest

from tests.engine.support import Env
from watukuy import ConfigError, Engine, Event, MemoryStore


def key(partition: str) -> str:
    return f"invoices/{partition}"


def only(engine: Engine, partition: str) -> Any:
    (entry,) = [i for i in engine.inspect() if i.partition == partition]
    return entry


async def test_handlers_get_events_in_per_key_order_with_the_tenant_as_partition_data(
    env: Env, engine: Engine
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    for round_ in range(2):
        for tenant in env.tenants:
            items = env.sim.items(tenant.id)
            env.sim.update_item(tenant.id, items[round_]["id"], amount=1.0)
            env.sim.create_item(tenant.id)
        env.clock.advance(30)
        await engine.tick()

    for tenant in env.tenants:
        delivered = [
            (e, c)
            for e, c in zip(recorder.events, recorder.contexts, strict=True)
            if e.partition == tenant.id
        ]
        assert [e.sequence for e, _ in delivered] == list(range(1, 15))
        for event, ctx in delivered:
            assert ctx.partition.key == event.partition
            assert ctx.partition.data is tenant  # the very object partitions() returned
            assert ctx.poller == "invoices"
            assert ctx.attempt == 1


async def test_a_failing_handler_is_retried_then_parks_the_event_as_poison(env: Env) -> None:
    engine = env.make_engine(env.make_poller(handler={"attempts": 3, "backoff": "1s"}))
    bad = env.tid(0)
    poison_subject = env.sim.items(bad)[2]["id"]
    broken = True
    calls: list[tuple[str, int, int]] = []
    attempts: Counter[str] = Counter()
    delivered: list[Event] = []

    async def handler(event: Event, ctx: Any) -> None:
        calls.append((event.partition, event.sequence, ctx.attempt))
        attempts[event.id] += 1
        if broken and event.partition == bad and event.subject == poison_subject:
            raise RuntimeError(f"warehouse rejected {event.subject}")
        delivered.append(event)

    engine.on("invoices", handler)
    await engine.tick()

    (parked,) = await engine.parked.list("invoices", partition=bad, kind="poison")
    store = engine.store
    assert isinstance(store, MemoryStore)
    (poison,) = [
        e for e in store.outbox["invoices"] if (e.partition, e.subject) == (bad, poison_subject)
    ]
    assert parked.id == poison.id
    assert (parked.kind, parked.poller, parked.partition, parked.subject) == (
        "poison",
        "invoices",
        bad,
        poison_subject,
    )
    assert parked.attempts == 3
    assert attempts[poison.id] == 3
    assert parked.error == f"RuntimeError: warehouse rejected {poison_subject}"
    assert parked.item == poison.data
    assert await engine.parked.list("invoices", partition=bad, kind="invalid") == []
    assert only(engine, bad).parked == {"invalid": 0, "poison": 1}
    assert only(engine, env.tid(1)).parked == {"invalid": 0, "poison": 0}

    # The key waited for its poison event, then went on in order; the others never waited.
    of_bad = [(seq, attempt) for p, seq, attempt in calls if p == bad]
    assert of_bad == [(1, 1), (2, 1), (3, 1), (3, 2), (3, 3)] + [(s, 1) for s in range(4, 11)]
    assert [e.sequence for e in delivered if e.partition == bad] == [1, 2, *range(4, 11)]
    for other in (env.tid(1), env.tid(2)):
        assert [e.sequence for e in delivered if e.partition == other] == list(range(1, 11))

    # Retried while still broken: stays parked, one more attempt counted.
    assert await engine.parked.retry("invoices", [parked.id], partition=bad) == []
    (still,) = await engine.parked.list("invoices", partition=bad)
    assert still.attempts == 4

    broken = False
    assert await engine.parked.retry("invoices", [parked.id], partition=bad) == [parked.id]

    assert await engine.parked.list("invoices", partition=bad) == []
    assert delivered[-1].id == poison.id
    assert calls[-1] == (bad, poison.sequence, 5)
    assert store.parked[key(bad)] == {}
    assert only(engine, bad).parked == {"invalid": 0, "poison": 0}
    with pytest.raises(ConfigError, match=re.escape(f"no parked item 'nope' in {key(bad)}")):
        await engine.parked.retry("invoices", ["nope"], partition=bad)


def strip_id_of(base: Any, partition: str, subject: str) -> Any:
    """A vendor that sends one item of one tenant without its id."""

    async def fetch(ctx: Any) -> Any:
        result = await base(ctx)
        if ctx.partition.key == partition:
            result["items"] = [
                {k: v for k, v in item.items() if k != "id"} if item.get("id") == subject else item
                for item in result["items"]
            ]
        return result

    return fetch


async def test_an_item_without_identity_is_parked_invalid_without_holding_up_the_key(
    env: Env,
) -> None:
    bad = env.tid(1)
    target = env.sim.items(bad)[4]
    fixed = False

    def identity(item: dict[str, Any]) -> str:
        if "id" not in item and fixed:
            return f"created:{item['created_at']}"
        return item["id"]

    poller = env.make_poller(
        identity=identity, fetch=strip_id_of(env.token_fetch(3), bad, target["id"])
    )
    engine = env.make_engine(poller)
    recorder = env.recorder(engine)

    await engine.tick()

    events = recorder.of(bad)
    assert [e.subject for e in events] == [i["id"] for i in env.sim.items(bad) if i != target]
    assert [e.sequence for e in events] == list(range(1, 10))
    (parked,) = await engine.parked.list("invoices", partition=bad, kind="invalid")
    stripped = {k: v for k, v in target.items() if k != "id"}
    assert (parked.kind, parked.item, parked.attempts, parked.lane) == (
        "invalid",
        stripped,
        1,
        "live",
    )
    assert parked.error == "identity() raised KeyError: 'id'"
    assert only(engine, bad).parked == {"invalid": 1, "poison": 0}
    assert len(recorder.of(env.tid(0))) == 10

    # Later changes of the key flow.
    later = env.sim.items(bad)[0]
    env.sim.update_item(bad, later["id"], amount=3.0)
    env.clock.advance(30)
    await engine.tick()
    assert [(e.subject, e.sequence) for e in recorder.of(bad)[9:]] == [(later["id"], 10)]

    # Retrying an item whose identity still cannot be computed leaves it parked.
    assert await engine.parked.retry("invoices", [parked.id], partition=bad) == []
    (still,) = await engine.parked.list("invoices", partition=bad, kind="invalid")
    assert (still.id, still.attempts, still.error) == (parked.id, 2, parked.error)

    fixed = True
    assert await engine.parked.retry("invoices", [parked.id], partition=bad) == [parked.id]
    assert await engine.parked.list("invoices", partition=bad) == []
    await engine.tick()  # delivers what the retry committed
    (recovered,) = recorder.of(bad)[10:]
    assert (recovered.subject, recovered.type, recovered.sequence, recovered.data) == (
        f"created:{target['created_at']}",
        "created",
        11,
        stripped,
    )
    assert only(engine, bad).parked == {"invalid": 0, "poison": 0}


async def test_items_the_vendor_sends_without_id_are_parked_and_the_key_goes_on(
    env: Env, engine: Engine
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    bad, good = env.tid(2), env.tid(0)
    broken_item = env.sim.update_item(bad, env.sim.items(bad)[1]["id"], amount=5.0)
    env.sim.update_item(good, env.sim.items(good)[1]["id"], amount=5.0)
    env.sim.faults(bad).drop_id = True

    env.clock.advance(30)
    await engine.tick()

    assert [e.partition for e in recorder.take()] == [good]
    (parked,) = await engine.parked.list("invoices", partition=bad, kind="invalid")
    assert parked.item["etag"] == broken_item["etag"]
    assert "id" not in parked.item

    env.sim.faults(bad).drop_id = False
    created = env.sim.create_item(bad)
    env.clock.advance(900)
    await engine.tick()
    assert [(e.partition, e.subject, e.sequence) for e in recorder.take()] == [
        (bad, created["id"], 11)
    ]
    assert len(await engine.parked.list("invoices", partition=bad)) == 1


async def test_subscribe_yields_the_committed_events(env: Env, engine: Engine) -> None:
    store = engine.store
    assert isinstance(store, MemoryStore)
    subscription = engine.subscribe("invoices")
    tenant = env.tid(1)
    env.sim.faults(env.tid(2)).fail_next = 2  # this tenant fails both polls: nothing committed

    await engine.tick()

    received = [await asyncio.wait_for(anext(subscription), 1) for _ in range(20)]
    assert received == store.outbox["invoices"]
    assert {e.partition for e in received} == {env.tid(0), tenant}
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(subscription), 0.05)

    item = env.sim.items(tenant)[0]
    env.sim.update_item(tenant, item["id"], amount=2.0)
    env.clock.advance(30)
    await engine.tick()
    again = await asyncio.wait_for(anext(subscription), 1)
    assert (again.partition, again.subject, again.type, again.sequence) == (
        tenant,
        item["id"],
        "updated",
        11,
    )
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(subscription), 0.05)
    await subscription.aclose()
