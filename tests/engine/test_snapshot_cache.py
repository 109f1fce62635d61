"""Snapshots held by the keys polled last, up to a budget: a key loads its snapshot when a
page needs it, and what is published is the same whether it was held or loaded again."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.engine.support import simulated
from watukuy.core.poll import fresh_state
from watukuy.core.poller import Partition, Poller
from watukuy.core.state import SnapshotEntry
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.snapshots import Snapshots
from watukuy.store.base import KeyCommit, StoredKey
from watukuy.store.memory import MemoryStore

pytestmark = pytest.mark.unit


class CountingStore(MemoryStore):
    """A memory store that counts the loads that read a snapshot, per key."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshot_loads: Counter[str] = Counter()

    async def load(self, poller: str, partition: str, *, snapshot: bool = True) -> StoredKey | None:
        if snapshot:
            self.snapshot_loads[f"{poller}/{partition}"] += 1
        return await super().load(poller, partition, snapshot=snapshot)


def _entry(n: int) -> SnapshotEntry:
    return SnapshotEntry(version=f"v{n}", seen=0.0)


async def _stored_runtime(store: MemoryStore, poller: Poller, key: str, entries: int) -> KeyRuntime:
    runtime = KeyRuntime(poller, Partition(key), fresh_state(poller, key, 0.0))
    upserts = {f"item-{i}": _entry(i) for i in range(entries)}
    await store.commit([KeyCommit(state=runtime.state, upserts=upserts)])
    return runtime


async def test_a_key_loads_its_snapshot_once_and_the_oldest_unlocked_are_let_go() -> None:
    async with simulated(1, 1, 1) as env:
        poller = env.make_poller()
        store = CountingStore()
        a, b, c = [await _stored_runtime(store, poller, k, 3) for k in ("a", "b", "c")]
        snapshots = Snapshots(store, budget=6)
        assert len(await snapshots.hold(a)) == 3
        assert len(await snapshots.hold(a)) == 3
        assert (snapshots.loads, snapshots.hits) == (1, 1)
        async with b.lock:  # b is being polled: never let go
            await snapshots.hold(b)
            await snapshots.hold(c)  # 9 > 6: the oldest unlocked one (a) goes
        assert a.snapshot is None and b.snapshot is not None and c.snapshot is not None
        assert snapshots.entries == 6 and snapshots.keys == 2

        await store.commit([KeyCommit(state=a.state, upserts={"item-9": _entry(9)})])
        assert "item-9" in await snapshots.hold(a)  # loaded again: what was committed since
        assert store.snapshot_loads["invoices/a"] == 2


async def test_a_budget_of_one_entry_publishes_what_an_unbounded_cache_does() -> None:
    published = []
    for budget in (1, 1_000_000):
        async with simulated(3, 12, 5) as env:
            store = CountingStore()
            engine = env.make_engine(env.make_poller(limit=5), store=store, snapshot_cache=budget)
            async with engine:
                await engine.tick()
                for tenant in env.tenants:
                    items = env.sim.items(tenant.id)
                    env.sim.update_item(tenant.id, items[0]["id"], amount=1234)
                    env.sim.create_item(tenant.id)
                for _ in range(3):
                    env.clock.advance(600)
                    await engine.tick()
            events = store.outbox["invoices"]
            published.append(sorted((e.partition, e.subject, e.type, e.sequence) for e in events))
            if budget == 1:  # let go after every poll: each page with items loaded it again
                assert min(store.snapshot_loads.values()) >= 2
    assert published[0] == published[1]
    assert len(published[0]) == 3 * 12 + 3 * 2
