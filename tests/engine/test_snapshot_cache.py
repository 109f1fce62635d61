"""Snapshots held by the keys that needed them last, up to a budget. A live page reads only
its own items' entries from the store; a reconcile page (or an operation) loads the whole
snapshot. What is published is the same whether it was held, loaded again, or read entry by
entry."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import pytest

from tests.engine.support import Env, simulated
from watukuy.core.poll import fresh_state
from watukuy.core.poller import Partition, Poller
from watukuy.core.state import SnapshotEntry
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.snapshots import Snapshots
from watukuy.store.base import KeyCommit, StoredKey
from watukuy.store.memory import MemoryStore

pytestmark = pytest.mark.unit


class CountingStore(MemoryStore):
    """A memory store that counts the loads that read a whole snapshot, and the entries read
    one by one, per key."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshot_loads: Counter[str] = Counter()
        self.entry_reads: Counter[str] = Counter()

    async def load(self, poller: str, partition: str, *, snapshot: bool = True) -> StoredKey | None:
        if snapshot:
            self.snapshot_loads[f"{poller}/{partition}"] += 1
        return await super().load(poller, partition, snapshot=snapshot)

    def entries(
        self, poller: str, partition: str, identities: Iterable[str]
    ) -> dict[str, SnapshotEntry]:
        wanted = list(identities)
        self.entry_reads[f"{poller}/{partition}"] += len(wanted)
        return super().entries(poller, partition, wanted)


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


async def _changed_then_reconciled(env: Env, store: CountingStore, budget: int) -> list[Any]:
    """Polls of every tenant after a change, a creation and a deletion each, then a
    reconcile pass: what is published, in order."""
    poller = env.make_poller(limit=5, reconcile="1h")
    engine = env.make_engine(poller, store=store, snapshot_cache=budget)
    async with engine:
        await engine.tick()
        for tenant in env.tenants:
            items = env.sim.items(tenant.id)
            env.sim.update_item(tenant.id, items[0]["id"], amount=1234)
            env.sim.delete_item(tenant.id, items[1]["id"])
            env.sim.create_item(tenant.id)
        for _ in range(3):
            env.clock.advance(600)
            await engine.tick()
        live_reads = sum(store.entry_reads.values())
        live_loads = sum(store.snapshot_loads.values())
        for tenant in env.tenants:
            await engine.reconcile("invoices", partition=tenant.id)
        for _ in range(4):  # a pass of pages of 5
            await engine.tick()
    events = store.outbox["invoices"]
    return [
        sorted((e.partition, e.subject, e.type, e.sequence) for e in events),
        live_reads,
        live_loads,
    ]


async def test_live_pages_read_their_own_entries_and_a_reconcile_loads_the_whole() -> None:
    async with simulated(3, 12, 5) as env:
        store = CountingStore()
        published, live_reads, live_loads = await _changed_then_reconciled(env, store, 1_000_000)
    # Live pages read the entries of the items they hold (12 seen, then the changed ones,
    # every page of 5 after the first poll of each tenant), never a whole snapshot.
    assert live_loads == 0
    assert live_reads >= 3 * 12
    # The reconcile pass loaded each tenant's snapshot, and found the deletion with it.
    assert sorted(store.snapshot_loads.values()) == [1, 1, 1]
    deleted = [p for p in published if p[2] == "deleted"]
    assert len(deleted) == 3
    assert {p[2] for p in published} == {"created", "updated", "deleted"}


async def test_a_budget_of_one_entry_publishes_what_an_unbounded_cache_does() -> None:
    published = []
    for budget in (1, 1_000_000):
        async with simulated(3, 12, 5) as env:
            store = CountingStore()
            events, _, _ = await _changed_then_reconciled(env, store, budget)
            published.append(events)
    assert published[0] == published[1]
    # 12 items created per tenant, one update, one creation and one deletion each.
    assert len(published[0]) == 3 * 12 + 3 * 3
