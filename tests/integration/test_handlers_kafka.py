"""Handlers and subscribers on the Kafka store read the events topic: an application that builds
an Engine on the same Kafka config gets what a runner process committed, in per-key order, with
``ctx.partition.data`` from its own partitions list."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from integration import pollers
from integration.simulator import VendorSimulator, running_simulator
from tests.integration.kafka_support import (
    delete_prefix,
    make_store,
    read_to_end,
    read_topic,
    unique_prefix,
)
from tests.integration.runners import Runner, runner_env, wait_for, write_config
from watukuy import Engine, Event, define_poller
from watukuy.serde import framing
from watukuy.serde.events import dlq_schema

TENANTS, ITEMS = 4, 6


@pytest.fixture
async def vendor() -> AsyncIterator[tuple[VendorSimulator, str]]:
    sim = VendorSimulator(tenants=TENANTS, items_per_tenant=ITEMS, seed=7, quota=100_000)
    async with running_simulator(sim) as base_url:
        yield sim, base_url


@pytest.fixture
def prefix(kafka_bootstrap: str) -> Any:
    name = unique_prefix()
    yield name
    delete_prefix(kafka_bootstrap, name)


def application_poller(**handler: Any) -> Any:
    """The runner's ``invoices`` (integration.pollers), as an application defines it in code."""
    return define_poller(
        name="invoices",
        partitions=pollers.list_tenants,
        identity=lambda item: item["id"],
        version=lambda item: item["etag"],
        cursor={"strategy": "token", "initial": None},
        fetch=pollers.fetch_items,
        schedule={"min": "1s", "max": "2s"},
        handler=handler or {"attempts": 5, "backoff": "1s", "max_backoff": "2s"},
    )


class Progress:
    """Wakes a waiting test whenever a handler or subscriber took an event."""

    def __init__(self) -> None:
        self._moved = asyncio.Event()

    def moved(self) -> None:
        self._moved.set()

    async def until(self, done: Callable[[], bool]) -> None:
        async with asyncio.timeout(60):
            while not done():
                self._moved.clear()
                await self._moved.wait()


def topic_ids(bootstrap: str, topic: str) -> dict[str, list[str]]:
    read = read_topic(bootstrap, topic, idle=1.0)
    return {key: [e["id"] for e in events] for key, events in read.by_key.items()}


def settled(sim: VendorSimulator, bootstrap: str, topic: str) -> bool:
    """Every item's current version is on the events topic."""
    read = read_topic(bootstrap, topic, idle=1.0)
    for tenant in sim.tenants:
        seen = {e["subject"]: e["version"] for e in read.by_key.get(f"invoices/{tenant.id}", [])}
        if any(seen.get(item["id"]) != item["etag"] for item in sim.items(tenant.id)):
            return False
    return True


async def test_an_application_handler_receives_every_event_a_runner_process_committed(
    kafka_bootstrap: str,
    prefix: str,
    vendor: tuple[VendorSimulator, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim, vendor_url = vendor
    topic = f"{prefix}.events.invoices"
    config = write_config(tmp_path / "runner-1.yaml", kafka_bootstrap, prefix, "runner-1")
    env = runner_env(vendor_url, WATUKUY_SCHEDULE_MAX="2s")
    runner = Runner("runner-1", config, env, tmp_path / "runner-1.log").start()
    try:
        # The runner alone publishes every item of every tenant before the application exists.
        await asyncio.to_thread(
            wait_for, lambda: settled(sim, kafka_bootstrap, topic), 90, "the runner's events"
        )
        first = await asyncio.to_thread(topic_ids, kafka_bootstrap, topic)
        assert sum(map(len, first.values())) == TENANTS * ITEMS

        monkeypatch.setenv("WATUKUY_VENDOR_URL", vendor_url)
        slow = sim.tenants[0].id
        delivered: dict[str, list[Event]] = defaultdict(list)
        contexts: list[Any] = []
        attempts: list[tuple[int, float]] = []
        when_done: dict[tuple[str, int], float] = {}
        progress = Progress()

        async def handler(event: Event, ctx: Any) -> None:
            if event.partition == slow and event.sequence == 3 and ctx.attempt < 3:
                attempts.append((ctx.attempt, time.monotonic()))
                raise RuntimeError("the warehouse is busy")
            delivered[event.key].append(event)
            contexts.append(ctx)
            when_done[(event.partition, event.sequence)] = time.monotonic()
            progress.moved()

        # Same Kafka config as the runner: a normal instance that also polls its share.
        store = make_store(kafka_bootstrap, prefix, "app", partitions=8)
        engine = Engine([application_poller()], store=store, owner="app")
        engine.on("invoices", handler)
        subscription = engine.subscribe("invoices")
        subscribed: dict[str, list[str]] = defaultdict(list)

        async def collect() -> None:
            async for event in subscription:
                subscribed[event.key].append(event.id)
                progress.moved()

        async with engine, asyncio.TaskGroup() as group:
            running = group.create_task(engine.run())
            collecting = group.create_task(collect())
            # More events while both instances poll: committed by whichever owns the key.
            for tenant in sim.tenants:
                sim.update_item(tenant.id, sim.items(tenant.id)[0]["id"], amount=1.5)
                sim.create_item(tenant.id)
            await asyncio.to_thread(
                wait_for, lambda: settled(sim, kafka_bootstrap, topic), 90, "the new events"
            )
            expected = await asyncio.to_thread(topic_ids, kafka_bootstrap, topic)
            total = sum(map(len, expected.values()))
            assert total == TENANTS * (ITEMS + 2)
            await progress.until(
                lambda: (
                    sum(map(len, delivered.values())) == total
                    and sum(map(len, subscribed.values())) == total
                )
            )
            await engine.stop()
            await running
            collecting.cancel()
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]

    # Exactly the ids on the topic, key by key, in sequence; the runner's first ones included.
    assert {k: [e.id for e in v] for k, v in delivered.items()} == expected
    assert dict(subscribed) == expected
    for key, events in delivered.items():
        assert [e.sequence for e in events] == list(range(1, len(events) + 1)), key
        assert [e.id for e in events[: len(first[key])]] == first[key]

    # ctx.partition is the application's own listing of the tenant, with its data.
    tenants = {t.id: t for t in sim.tenants}
    assert len(contexts) == total
    for ctx in contexts:
        tenant = tenants[ctx.partition.key]
        assert ctx.partition.data == {"slug": tenant.slug, "token": tenant.token}

    # The failing handler held only its key: #3 of the slow tenant came after two failures and
    # a backoff, while every other tenant's first events went through meanwhile.
    assert [a for a, _ in attempts] == [1, 2]
    recovered = when_done[(slow, 3)]
    assert recovered - attempts[0][1] >= 2.5  # 1s, then 2s of backoff
    for tenant in sim.tenants[1:]:
        assert max(when_done[(tenant.id, s)] for s in range(1, ITEMS + 1)) < recovered


async def test_a_consumer_only_application_copies_a_poison_event_to_the_dlq_and_goes_on(
    kafka_bootstrap: str,
    prefix: str,
    vendor: tuple[VendorSimulator, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim, vendor_url = vendor
    topic = f"{prefix}.events.invoices"
    config = write_config(tmp_path / "runner-1.yaml", kafka_bootstrap, prefix, "runner-1")
    runner = Runner("runner-1", config, runner_env(vendor_url), tmp_path / "runner-1.log").start()
    try:
        await asyncio.to_thread(
            wait_for, lambda: settled(sim, kafka_bootstrap, topic), 90, "the runner's events"
        )
        expected = await asyncio.to_thread(topic_ids, kafka_bootstrap, topic)
        monkeypatch.setenv("WATUKUY_VENDOR_URL", vendor_url)
        bad = sim.tenants[1]
        delivered: dict[str, list[int]] = defaultdict(list)
        progress = Progress()

        def handler(event: Event, ctx: Any) -> None:
            if event.partition == bad.id and event.sequence == 2:
                raise ValueError(f"cannot store {event.subject}")
            delivered[event.key].append(event.sequence)
            progress.moved()

        # Outside the runners' group: it holds no key and polls nothing, it only consumes.
        store = make_store(kafka_bootstrap, prefix, "app", partitions=8, use_group=False)
        poller = application_poller(attempts=2, backoff="200ms")
        engine = Engine([poller], store=store, owner="app")
        engine.on("invoices", handler)
        async with engine, asyncio.TaskGroup() as group:
            running = group.create_task(engine.run())
            await progress.until(lambda: sum(map(len, delivered.values())) == TENANTS * ITEMS - 1)
            assert engine.inspect() == []  # no key of its own
            await engine.stop()
            await running
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]

    for tenant in sim.tenants:
        gone = [2] if tenant is bad else []
        assert delivered[f"invoices/{tenant.id}"] == [
            s for s in range(1, ITEMS + 1) if s not in gone
        ]

    dlq = await asyncio.to_thread(read_to_end, kafka_bootstrap, [f"{prefix}.dlq.invoices"])
    (letter,) = dlq
    body = framing.decode(letter.value or b"", dlq_schema().schema)
    poison_id = expected[f"invoices/{bad.id}"][1]
    assert letter.key == f"invoices/{bad.id}".encode()
    assert letter.headers["watukuy.kind"] == b"poison"
    assert letter.headers["watukuy.stage"] == b"handler"
    assert letter.headers["watukuy.event.id"] == poison_id.encode()
    assert letter.headers["watukuy.attempts"] == b"2"
    assert (body["kind"], body["event_id"], body["attempts"]) == ("poison", poison_id, 2)
    assert body["error"].startswith("ValueError: cannot store ")
    raw = (letter.value or b"") + b"".join(letter.headers.values())
    assert bad.token.encode() not in raw  # the tenant's data stays out of Kafka
