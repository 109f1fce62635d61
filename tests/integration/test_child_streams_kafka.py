"""Child streams on the Kafka store, against a real broker: the commands that create a child
partition are written in its parent's transaction, and the child key's owner applies them once,
even when the owner changes between the parent's commit and the child's creation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from tests.integration.kafka_support import latest_values, make_store, read_topic, wait_owned
from watukuy import Engine, FakeClock, ParentSpec, Partition, Poller, define_poller
from watukuy.store.kafka import records

PARTITIONS = 4
PROJECTS = {"acme": ["P1", "P2", "P3"], "globex": ["P1"]}
CHILDREN = sorted(f"{tenant}/{p}" for tenant, ids in PROJECTS.items() for p in ids)


class Vendor:
    def __init__(self) -> None:
        self.issue_fetches: list[str] = []
        self.gone: set[str] = set()

    def listing(self) -> list[Partition]:
        return [Partition(t, {"slug": t}) for t in PROJECTS if t not in self.gone]

    async def projects(self, ctx: Any) -> dict[str, Any]:
        return {"items": [{"id": p} for p in PROJECTS[ctx.partition.key]], "cursor": None}

    async def issues(self, ctx: Any) -> dict[str, Any]:
        self.issue_fetches.append(ctx.partition.key)
        return {"items": [{"id": f"{ctx.partition.parents[0]}-1"}], "cursor": None}

    def pollers(self) -> list[Poller]:
        return [
            define_poller(
                name="tracker.projects",
                partitions=self.listing,
                identity=lambda item: item["id"],
                fetch=self.projects,
                cursor={"strategy": "none"},
                schedule={"min": "10m", "max": "1h"},
            ),
            define_poller(
                name="tracker.issues",
                parent=ParentSpec("tracker.projects", key=lambda item: item["id"]),
                identity=lambda item: item["id"],
                fetch=self.issues,
                cursor={"strategy": "none"},
                schedule={"min": "10m", "max": "1h"},
            ),
        ]


async def _running(
    vendor: Vendor, bootstrap: str, prefix: str, runner: str
) -> tuple[Engine, Callable[[], Awaitable[None]]]:
    store = make_store(bootstrap, prefix, runner, partitions=PARTITIONS)
    engine = Engine(vendor.pollers(), store=store)
    await engine.__aenter__()
    await wait_owned(store, PARTITIONS)
    return engine, engine.close


async def test_a_child_created_by_a_parent_commit_is_applied_once_across_owners(
    kafka_bootstrap: str, prefix: str
) -> None:
    vendor = Vendor()
    # The first owner polls the parents and stops before it takes the commands they sent.
    first, close = await _running(vendor, kafka_bootstrap, prefix, "r1")
    try:
        await first.tick()
        assert sorted(first.listed("tracker.projects")) == ["acme", "globex"]
    finally:
        await close()
    assert vendor.issue_fetches == []

    # The next owner finds the commands in the state topic and creates every child, at once.
    second, close = await _running(vendor, kafka_bootstrap, prefix, "r2")
    try:
        async with asyncio.timeout(60):
            while sorted(set(vendor.issue_fetches)) != CHILDREN:
                await second.tick()
                await asyncio.sleep(0.2)
        created = {s.partition: s.created for s in second.store.states_of("tracker.issues")}
    finally:
        await close()
    assert sorted(created) == CHILDREN

    # A third owner restores them: nothing is created again, nothing polled again.
    third, close = await _running(vendor, kafka_bootstrap, prefix, "r3")
    try:
        for _ in range(5):
            await third.tick()
            await asyncio.sleep(0.2)
        again = {s.partition: s.created for s in third.store.states_of("tracker.issues")}
        held = sorted(i.partition for i in third.inspect() if i.poller == "tracker.issues")
    finally:
        await close()
    assert again == created
    assert held == CHILDREN
    assert sorted(vendor.issue_fetches) == CHILDREN  # each child polled once

    state = await asyncio.to_thread(latest_values, kafka_bootstrap, f"{prefix}.state")
    commands = {k: v for k, v in state.items() if k.startswith(records.COMMAND_PREFIX.encode())}
    assert len(commands) == len(CHILDREN)  # one creation per child was ever written...
    assert all(v is None for v in commands.values())  # ...and taken away when applied
    events = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.tracker.issues")
    assert sorted(events.by_key) == [f"tracker.issues/{c}" for c in CHILDREN]
    assert all(events.sequences(key) == [1] for key in events.by_key)


async def test_children_of_a_removed_tenant_are_deleted_from_kafka_after_retain(
    kafka_bootstrap: str, prefix: str
) -> None:
    vendor = Vendor()
    clock = FakeClock(time.time())
    store = make_store(kafka_bootstrap, prefix, "r1", partitions=PARTITIONS)
    live = [p if p.parent is None else replace(p, retain=3600.0) for p in vendor.pollers()]
    engine = Engine(live, store=store, clock=clock)
    await engine.__aenter__()
    try:
        await wait_owned(store, PARTITIONS)
        async with asyncio.timeout(60):
            while sorted(s.partition for s in store.states_of("tracker.issues")) != CHILDREN:
                await engine.tick()
                await asyncio.sleep(0.2)
        vendor.gone.add("acme")  # the tenant leaves the listing
        await engine.partitions.list("tracker.projects")
        await engine.partitions.list("tracker.issues")
        paused = {s.partition: s.paused for s in store.states_of("tracker.issues")}
        assert paused == {
            "acme/P1": "removed",
            "acme/P2": "removed",
            "acme/P3": "removed",
            "globex/P1": None,
        }

        clock.advance(3600)
        await engine.partitions.list("tracker.issues")
        left = sorted(s.partition for s in store.states_of("tracker.issues"))
    finally:
        await engine.close()
    assert left == ["globex/P1"]
    state = await asyncio.to_thread(latest_values, kafka_bootstrap, f"{prefix}.state")
    kept = [k for k, v in state.items() if v is not None and b"tracker.issues/acme" in k]
    assert kept == []  # every record of the expired children is tombstoned
