"""A tenant's backlog does not wait for each commit: the next page is fetched while earlier
ones wait for theirs, and a page the store refuses rolls the tenant back to what was committed
(nothing published twice, nothing skipped, sequences without a gap).

The store here commits after a delay, as a transaction does, and keeps the store contract for
pages in flight with the store's own rule (:class:`PageRuns`); it can refuse a chosen commit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from tests.engine.support import Env, run_until, simulated, wait_for
from watukuy import Event, MemoryStore
from watukuy.core.errors import Retriable
from watukuy.store.apply import PageRuns
from watukuy.store.base import KeyCommit


class SlowStore(MemoryStore):
    def __init__(self, delay: float = 0.05, refuse: tuple[str, int] | None = None) -> None:
        super().__init__()
        self.delay = delay
        self.refuse = refuse  # (key, n): that key's n-th commit fails
        self.calls: Counter[str] = Counter()
        self.waiting: Counter[str] = Counter()
        self.most_waiting: Counter[str] = Counter()
        self.runs = PageRuns()

    async def commit(self, batch: Sequence[KeyCommit]) -> None:
        keys = [entry.key for entry in batch]
        numbered = []
        for key in keys:
            self.calls[key] += 1
            numbered.append((key, self.calls[key]))
            self.waiting[key] += 1
            self.most_waiting[key] = max(self.most_waiting[key], self.waiting[key])
        try:
            await asyncio.sleep(self.delay)
            refused = self.refuse in numbered
            if refused or not all(self.runs.admits(e.key, e.run) for e in batch):
                for entry in batch:
                    self.runs.refused(entry.key, entry.run)
                raise Retriable("the transaction failed")
            await super().commit(batch)
        finally:
            for key in keys:
                self.waiting[key] -= 1


def committed(store: MemoryStore) -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for event in store.outbox["invoices"]:
        out[event.partition].append((event.sequence, event.subject))
    return out


async def test_a_backlog_is_fetched_while_its_pages_wait_for_their_commit(env: Env) -> None:
    store = SlowStore()
    engine = env.make_engine(env.make_poller(limit=2), store=store)

    await engine.tick()

    events = committed(store)
    for tenant in env.tenants:
        items = env.sim.items(tenant.id)
        assert events[tenant.id] == [(n, item["id"]) for n, item in enumerate(items, 1)]
        assert store.most_waiting[f"invoices/{tenant.id}"] > 1  # pages overlapped
        assert len(env.sim.log(tenant.id)) == 5  # 10 items, pages of 2, each asked once


async def test_one_page_in_flight_per_key_commits_each_before_the_next_fetch(env: Env) -> None:
    store = SlowStore()
    engine = env.make_engine(env.make_poller(limit=2), store=store, pages_in_flight=1)

    await engine.tick()

    for tenant in env.tenants:
        assert store.most_waiting[f"invoices/{tenant.id}"] == 1
        assert [s for s, _ in committed(store)[tenant.id]] == list(range(1, 11))


async def test_a_refused_page_rolls_the_tenant_back_to_what_was_committed(env: Env) -> None:
    tenant = env.tid(0)
    store = SlowStore(refuse=(f"invoices/{tenant}", 2))  # its second page's commit fails
    engine = env.make_engine(env.make_poller(limit=2), store=store)

    await engine.tick()

    items = env.sim.items(tenant)
    assert committed(store)[tenant] == [(1, items[0]["id"]), (2, items[1]["id"])]
    assert {i.partition: i.sequence for i in engine.inspect()}[tenant] == 2
    env.clock.advance(30)
    await engine.tick()

    # Every item once, in order, numbered without a gap: the refused page and the pages sent
    # after it were fetched again from the committed cursor.
    assert committed(store)[tenant] == [(n, item["id"]) for n, item in enumerate(items, 1)]
    asked = Counter(entry.query.get("cursor") for entry in env.sim.log(tenant))
    assert asked[None] == 1  # the first page committed: never asked again
    assert sorted(asked.values(), reverse=True)[0] == 2  # the refused page was asked twice
    for other in env.tenants[1:]:
        assert [s for s, _ in committed(store)[other.id]] == list(range(1, 11))


async def test_a_poll_cancelled_with_pages_in_flight_gives_their_room_back(env: Env) -> None:
    store = SlowStore(delay=0.5)
    engine = env.make_engine(env.make_poller(limit=2), store=store, pages_in_flight_total=3)
    ticking = asyncio.create_task(engine.tick())
    await asyncio.sleep(0.2)  # every tenant has a page waiting for its commit
    assert sum(store.waiting.values()) == 3  # the runner's bound holds the rest back
    ticking.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await ticking

    store.delay = 0.0
    for tenant in env.tenants:  # polled at once, and ends only if the room was given back
        await asyncio.wait_for(engine.trigger("invoices", partition=tenant.id), timeout=10)
    await asyncio.wait_for(engine.tick(), timeout=10)

    for tenant in env.tenants:
        assert [s for s, _ in committed(store)[tenant.id]] == list(range(1, 11))


class DecidingStore(SlowStore):
    """Records when each event is decided (the store is asked whether it can publish it)."""

    def __init__(self, seen: list[tuple[str, str]]) -> None:
        super().__init__(delay=0.0)
        self.seen = seen

    def unpublishable(self, event: Event) -> str | None:
        self.seen.append((event.partition, "decide"))
        return super().unpublishable(event)


async def test_the_next_page_is_asked_for_while_this_one_is_decided(env: Env) -> None:
    seen: list[tuple[str, str]] = []
    fetch = env.token_fetch(2)

    async def recording(ctx: Any) -> Any:
        seen.append((ctx.partition.key, "fetch"))
        return await fetch(ctx)

    store = DecidingStore(seen)
    engine = env.make_engine(env.make_poller(limit=2, fetch=recording), store=store)

    await engine.tick()

    tenant = env.tid(0)
    steps = [what for partition, what in seen if partition == tenant]
    # Five pages of two: the second fetch starts before the first page's two events are
    # decided, and no fetch is made beyond the last page.
    assert steps[:2] == ["fetch", "fetch"]
    assert steps.count("fetch") == 5 and steps.count("decide") == 10
    assert [s for s, _ in committed(store)[tenant]] == list(range(1, 11))


# -- a backlog past max_pages ---------------------------------------------------------------


def _fetches(env: Env, order: list[str]) -> Any:
    fetch = env.token_fetch(2)

    async def recording(ctx: Any) -> Any:
        order.append(ctx.partition.key)
        return await fetch(ctx)

    return recording


async def test_a_backlog_goes_on_past_max_pages_without_waiting_for_its_commits(env: Env) -> None:
    tenant = env.tid(0)
    env.hidden.update(t.id for t in env.tenants[1:])  # no other key waits for a turn
    store = SlowStore()
    engine = env.make_engine(env.make_poller(limit=2, max_pages=1), store=store)

    await run_until(engine, lambda: len(committed(store)[tenant]) == 10)

    # A poll is one page, and the next one began while the pages before it were committing.
    assert store.most_waiting[f"invoices/{tenant}"] > 1
    assert committed(store)[tenant] == [
        (n, item["id"]) for n, item in enumerate(env.sim.items(tenant), 1)
    ]
    assert len(env.sim.log(tenant)) == 5  # each page asked for once


async def test_a_backlog_at_max_pages_gives_a_key_waiting_for_a_slot_its_turn(env: Env) -> None:
    first, second = env.tid(0), env.tid(1)
    env.hidden.add(env.tid(2))
    order: list[str] = []
    poller = env.make_poller(limit=2, max_pages=1, fetch=_fetches(env, order))
    store = SlowStore()
    engine = env.make_engine(poller, store=store, max_concurrency=1)

    await run_until(engine, lambda: all(len(committed(store)[t]) == 10 for t in (first, second)))

    # One slot: each poll of one page gives the slot to the other key, which was waiting.
    assert order[:6] in ([first, second] * 3, [second, first] * 3)
    assert store.most_waiting[f"invoices/{first}"] == 1


async def test_a_backlog_at_max_pages_gives_way_to_an_operation_on_its_key() -> None:
    async with simulated(tenants=1, items=80, seed=3) as env:
        tenant = env.tid(0)
        store = SlowStore()
        engine = env.make_engine(env.make_poller(limit=2, max_pages=1), store=store)
        running = asyncio.create_task(engine.run())
        try:
            await wait_for(lambda: bool(committed(store)[tenant]))
            await asyncio.wait_for(engine.pause("invoices", partition=tenant), timeout=5)
            paused_at = len(committed(store)[tenant])
            await asyncio.sleep(0.3)
        finally:
            await engine.stop()
            await asyncio.wait_for(running, timeout=5)

    # The pause came between two polls, not after the whole backlog, and nothing after it.
    assert paused_at < 80
    assert len(committed(store)[tenant]) == paused_at


async def test_a_cancelled_tick_leaves_every_key_due_polled_or_not() -> None:
    async with simulated(tenants=8, items=4, seed=5) as env:
        release = asyncio.Event()
        fetch = env.token_fetch(2)

        async def stuck(ctx: Any) -> Any:
            await release.wait()
            return await fetch(ctx)

        engine = env.make_engine(env.make_poller(limit=2, fetch=stuck))
        ticking = asyncio.create_task(engine.tick())
        await asyncio.sleep(0.1)  # four keys fetch, the other four wait for a slot
        ticking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticking

        # None was polled, and each is still due: the next tick polls all eight.
        assert [i.next_due for i in engine.inspect() if i.next_due is None] == []
        release.set()
        await asyncio.wait_for(engine.tick(), timeout=10)
        assert [len(env.sim.log(t.id)) for t in env.tenants] == [2] * 8  # two pages each


async def test_a_poll_waiting_only_for_its_commit_gives_its_turn_to_the_next_key() -> None:
    # One turn, every key's poll one page, every commit 1 s: a turn held through the commit
    # would poll the eight keys one after another, one commit waiting at a time (8 s). Given
    # back once the page is sent, every key is fetched while the commits before it wait.
    async with simulated(tenants=8, items=4, seed=7) as env:
        store = CountingSlowStore(delay=1.0)
        engine = env.make_engine(env.make_poller(limit=10), store=store, max_concurrency=1)

        await run_until(engine, lambda: len(committed(store)) == 8, seconds=6.0)

        assert store.most_at_once > 4  # keys' commits overlapped: each was fetched meanwhile
        for tenant in env.tenants:
            items = env.sim.items(tenant.id)
            assert committed(store)[tenant.id] == [(n, i["id"]) for n, i in enumerate(items, 1)]
            assert len(env.sim.log(tenant.id)) == 1  # one page, asked once


class CountingSlowStore(SlowStore):
    """A :class:`SlowStore` that counts the commits waiting at once, all keys together."""

    def __init__(self, delay: float) -> None:
        super().__init__(delay)
        self.at_once = 0
        self.most_at_once = 0

    async def commit(self, batch: Sequence[KeyCommit]) -> None:
        self.at_once += 1
        self.most_at_once = max(self.most_at_once, self.at_once)
        try:
            await super().commit(batch)
        finally:
            self.at_once -= 1
