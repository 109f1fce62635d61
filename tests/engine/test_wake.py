"""A webhook's ``wake`` (issue 46): a command record for the key's owner that polls the key now,
on a schedule that would not poll it for minutes, and is timed from the webhook to the commit
it causes. Several wakes before that poll make one poll, not one each."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tests.engine.support import Env, wait_for
from watukuy import MemoryStore
from watukuy.core.commands import Command
from watukuy.core.observe import Observer
from watukuy.store.base import KeyCommit

pytestmark = pytest.mark.unit


class Inbox(MemoryStore):
    """Commands sent come back to this engine, as Kafka hands a key's owner its records."""

    async def send_command(self, command: Command) -> None:
        self._handed.append(command)


class Wakes(Observer):
    def __init__(self) -> None:
        self.served: list[tuple[str, str, float]] = []
        self.polls: list[str] = []

    def wake_served(self, poller: str, partition: str, seconds: float) -> None:
        self.served.append((poller, partition, seconds))

    def poll_decided(
        self, poller: str, partition: str, lane: str, kind: object, seconds: float
    ) -> None:
        self.polls.append(partition)


async def test_a_wake_polls_the_key_now_once_and_is_timed_to_its_commit(env: Env) -> None:
    store, wakes = Inbox(), Wakes()
    engine = env.make_engine(env.make_poller(schedule={"min": "15m", "max": "15m"}), store=store,
                             observers=[wakes])  # fmt: skip
    tenant = env.tid(0)
    async with engine:
        await engine.tick()  # every key's first poll
        wakes.polls.clear()
        env.clock.advance(60)
        await engine.tick()
        assert wakes.polls == []  # not due for 14 minutes
        env.sim.update_item(tenant, env.sim.items(tenant)[0]["id"], amount=2.0)
        issued = env.clock.now()
        for _ in range(3):  # the vendor sent three webhooks for it
            await store.send_command(Command.issue("wake", "invoices", tenant, {}, issued))
        env.clock.advance(0.25)
        await engine.tick()
    assert wakes.polls == [tenant]  # once, not three times; no other tenant
    assert [(p, k) for p, k, _ in wakes.served] == [("invoices", tenant)]
    assert wakes.served[0][2] == pytest.approx(0.25)


async def test_a_command_for_a_connector_this_engine_has_not_taken_yet_waits_for_it(
    env: Env,
) -> None:
    """A connector written over REST reaches each engine through the configs topic, apart from
    the first commands for its keys: one that arrives first is tried again, not dropped."""
    store, wakes = Inbox(), Wakes()
    engine = env.make_engine(env.make_poller(), store=store, observers=[wakes])
    later = env.make_poller(name="later", schedule={"min": "15m", "max": "15m"})
    tenant = env.tid(1)
    async with engine:
        await engine.tick()
        await store.send_command(Command.issue("wake", "later", tenant, {}, env.clock.now()))
        await engine.tick()  # "later" is not defined here yet
        await engine.add_poller(later)
        await engine.tick()  # its first polls
        wakes.polls.clear()
        env.clock.advance(2.0)  # past the command's retry
        await engine.tick()
    assert wakes.polls == [tenant]


class BusyInbox(Inbox):
    """Commands sent tell the engine at once, as the Kafka store does when its thread reads
    one; while ``free`` is cleared, commits wait for it (a slow transaction)."""

    def __init__(self) -> None:
        super().__init__()
        self.free = asyncio.Event()
        self.free.set()

    async def send_command(self, command: Command) -> None:
        await super().send_command(command)
        for changed in self._watchers:
            changed()

    async def commit(self, batch: Sequence[KeyCommit]) -> None:
        await self.free.wait()
        await super().commit(batch)


async def test_a_wake_that_arrives_while_run_applies_another_is_applied_at_once(
    env: Env,
) -> None:
    # run() applies the commands it finds, then sleeps until its next deadline (up to 1 s
    # on): a command the store reported while the pass applied another must not wait for it.
    store, wakes = BusyInbox(), Wakes()
    engine = env.make_engine(env.make_poller(schedule={"min": "15m", "max": "15m"}), store=store,
                             observers=[wakes])  # fmt: skip
    first, second = env.tid(0), env.tid(1)
    loop = asyncio.get_running_loop()
    async with engine:
        await engine.tick()  # every key's first poll: none is due for 15 minutes
        wakes.polls.clear()
        running = asyncio.create_task(engine.run())
        try:
            await asyncio.sleep(0.1)  # run() sleeps until its deadline
            store.free.clear()
            now = env.clock.now()
            await store.send_command(Command.issue("wake", "invoices", first, {}, now))
            await asyncio.sleep(0.05)  # run()'s pass is applying it: its commit waits
            await store.send_command(Command.issue("wake", "invoices", second, {}, now))
            store.free.set()
            released = loop.time()
            await wait_for(lambda: second in wakes.polls, 3.0)
            took = loop.time() - released
        finally:
            await engine.stop()
            await asyncio.wait_for(running, timeout=5)
    assert sorted(wakes.polls) == sorted([first, second])
    assert took < 0.5, f"the second wake was polled {took:.2f}s after the first was applied"
