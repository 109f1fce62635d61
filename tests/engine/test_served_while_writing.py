"""What an engine says it served (``Store.served_until``) while a write outside a poll waits
for its transaction: never past the due time that write asks for. The key's next owner moves
its stored due time on from what was said (``core.schedule.resumed``, applied by the Kafka
store's restore), so a claim said while a trigger's, or a new child's, commit waited behind
another transaction went out with it and moved the poll it asked for a whole interval on: a
failover's survivor held the victim's new children due ten minutes later (CI, stop 53).

A second ``engine.tick()`` while the first waits for the write stands for ``run()``'s loop,
which says what was served while commands apply in tasks of their own."""

from __future__ import annotations

import asyncio

from tests.engine.support import Env, HeldCommits
from tests.engine.test_child_streams import CHILDREN, Vendor, pollers
from watukuy import Engine, FakeClock
from watukuy.core.schedule import resumed


async def test_a_trigger_waiting_for_its_commit_is_not_said_served(env: Env) -> None:
    store = HeldCommits()
    slow = {"min": "10m", "max": "1h"}
    engine = env.make_engine(env.make_poller(schedule=slow), store=store)
    await engine.tick()  # every key polled: due again in ten minutes
    tenant = env.tid(0)
    env.clock.advance(5)
    asked = env.clock.now()
    store.hold(lambda entry: entry.state.partition == tenant)
    triggering = asyncio.create_task(engine.trigger("invoices", partition=tenant))
    await asyncio.wait_for(store.waiting.wait(), timeout=5)

    env.clock.advance(1)
    await engine.tick()
    said = store.said[-1]
    store.release()
    await asyncio.wait_for(triggering, timeout=5)

    stored = store.states[f"invoices/{tenant}"].schedule
    assert stored.next_due == asked
    assert said <= asked
    assert resumed(stored, said).next_due == asked  # the next owner polls it as asked


async def test_a_child_created_while_its_commit_waits_is_not_said_served() -> None:
    vendor = Vendor(
        tenants={"acme": {}, "globex": {}},
        projects={"acme": [{"id": "P1"}, {"id": "P2"}], "globex": [{"id": "P1"}]},
    )
    clock, store = FakeClock(), HeldCommits()
    engine = Engine(pollers(vendor), store=store, clock=clock)
    try:
        await engine.tick()  # the projects are polled; their commit sends the children's creation
        created = clock.now()
        store.hold(lambda entry: entry.state.poller == "tracker.issues")
        applying = asyncio.create_task(engine.tick())  # the creation waits for its commit
        await asyncio.wait_for(store.waiting.wait(), timeout=5)

        clock.advance(1)
        await engine.tick()
        said = store.said[-1]
        store.release()
        await asyncio.wait_for(applying, timeout=5)

        assert said <= created
        assert sorted(entry.state.partition for entry in store.held) == CHILDREN
        for entry in store.held:
            assert entry.state.schedule.next_due == created  # due at once
            assert resumed(entry.state.schedule, said).next_due == created  # for the next owner
    finally:
        await engine.close()
