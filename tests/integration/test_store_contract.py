"""The Store contract, run against both stores: ``MemoryStore`` and ``KafkaStore`` on the broker.

One section per interface of :mod:`watukuy.store.base`: ``KeyStates``, ``Commands``,
``Ownership`` (``Lifecycle`` is what the harness does; ``EventFeeds`` has its own suites,
tests/engine for the memory store's and tests/integration/test_handlers_kafka.py for Kafka's).

Each test speaks only the ``Store`` protocol. A *restore* is a second store instance over
the same durable state: for Kafka a fresh ``KafkaStore`` on the same topics (the first one
closed), reading every record back; for the memory store the same object, which is all a
new engine over it would see. What only a compacted topic can show (tombstones, not absent
writes) is asked of the harness, which answers from the records themselves.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.integration.kafka_support import (
    delete_prefix,
    latest_values,
    make_store,
    read_topic,
    unique_prefix,
)
from watukuy.core.errors import ConfigError, Fenced, Retriable
from watukuy.core.events import Event
from watukuy.core.poll import fresh_state
from watukuy.core.poller import define_poller
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry
from watukuy.store.base import Command, KeyCommit, PageRun, Store
from watukuy.store.kafka import records
from watukuy.store.memory import MemoryStore

NOW = 1_750_000_000.0
POLLER = define_poller(name="contract", fetch=lambda ctx: [], identity=lambda item: item["id"])
# Partition keys and identities with "/" and "%": record keys escape them, the contract not.
KEY = "t/1%"
OTHER = "t-2"


@dataclass
class Harness:
    """Opens store instances over one durable state and reads what it holds."""

    name: str
    opened: Callable[[], Any]  # async () -> a started Store owning every key
    records: Callable[[str], Any]  # async (key) -> {record: latest value or None}
    events: Callable[[], Any]  # async () -> ids of the committed events
    stores: list[Store] = field(default_factory=list)

    async def open(self) -> Store:
        """A new instance: the previous one is closed first (its restore is what we test)."""
        for previous in self.stores:
            await previous.close()
        self.stores = [await self.opened()]
        return self.stores[0]

    async def close(self) -> None:
        for store in self.stores:
            await store.close()
        self.stores = []


def memory_harness() -> Harness:
    store = MemoryStore()
    store.bind({POLLER.name: POLLER})

    async def opened() -> Store:
        await store.start()
        return store  # a new engine over the same object sees what the last one committed

    async def kept(key: str) -> dict[str, object]:
        name = f"{POLLER.name}/{key}"
        out: dict[str, object] = {}
        if name in store.states:
            out[f"state {name}"] = store.states[name]
        for identity, entry in store.snapshots.get(name, {}).items():
            out[f"item {identity}"] = entry
        for parked_id, item in store.parked.get(name, {}).items():
            out[f"parked {parked_id}"] = item
        return out

    async def events() -> list[str]:
        return [event.id for event in store.outbox[POLLER.name]]

    return Harness("memory", opened, kept, events)


def kafka_harness(bootstrap: str, prefix: str) -> Harness:
    async def opened() -> Store:
        # Without a group (as the CLI holds partitions): no rebalance to wait for.
        store = make_store(bootstrap, prefix, partitions=2, use_group=False)
        store.bind({POLLER.name: POLLER})
        await store.start()
        async with asyncio.timeout(60):
            await store.acquire([0, 1])
        return store

    async def kept(key: str) -> dict[str, object]:
        mine = records.state_key(POLLER.name, key)
        escaped = records.item_key(POLLER.name, key, "").rstrip(b"/")
        out: dict[str, object] = {}
        for topic in ("state", "items", "parked"):
            latest = await asyncio.to_thread(latest_values, bootstrap, f"{prefix}.{topic}")
            for record, value in latest.items():
                if record == mine or record.startswith(escaped + b"/"):
                    out[f"{topic} {record.decode()}"] = value
        return out

    async def events() -> list[str]:
        read = await asyncio.to_thread(read_topic, bootstrap, f"{prefix}.events.{POLLER.name}")
        return read.ids()

    return Harness("kafka", opened, kept, events)


@pytest.fixture(params=["memory", "kafka"])
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    if request.param == "memory":
        made = memory_harness()
        yield made
        await made.close()
        return
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    prefix = unique_prefix()
    made = kafka_harness(bootstrap, prefix)
    try:
        yield made
    finally:
        await made.close()
        await asyncio.to_thread(delete_prefix, bootstrap, prefix)


# -- what the tests commit ------------------------------------------------------------------


def state(key: str, **changes: Any) -> PartitionState:
    return replace(fresh_state(POLLER, key, NOW), **changes)


def event(key: str, sequence: int, subject: str) -> Event:
    return Event(
        id=uuid.uuid4().hex,
        poller=POLLER.name,
        partition=key,
        subject=subject,
        type="created",
        version="v1",
        sequence=sequence,
        time=datetime.fromtimestamp(NOW, UTC),
        lane="live",
        schema_version=1,
        data={"id": subject},
    )


def parked(key: str, parked_id: str) -> ParkedItem:
    return ParkedItem(
        id=parked_id,
        poller=POLLER.name,
        partition=key,
        kind="invalid",
        item={"id": parked_id},
        error="ValueError: no amount",
        attempts=1,
        parked_at=NOW,
    )


ENTRY = SnapshotEntry(version="v1", seen=NOW, scan=0)


async def load(store: Store, key: str) -> Any:
    return await store.load(POLLER.name, key)


# -- KeyStates: load, commit, remove, partitions, states_of ----------------------------------


async def test_a_restore_sees_exactly_what_was_committed(harness: Harness) -> None:
    store = await harness.open()
    assert await load(store, KEY) is None  # never stored
    first = state(KEY, sequence=2, live=replace(state(KEY).live, cursor={"page": "a/b"}))
    events = [event(KEY, 1, "a/b%c"), event(KEY, 2, "d")]
    await store.commit(
        [KeyCommit(state=first, events=events, upserts={"a/b%c": ENTRY, "d": ENTRY})]
    )
    second = replace(first, sequence=3)
    third = event(KEY, 3, "e")
    await store.commit(
        [KeyCommit(state=second, events=[third], upserts={"e": ENTRY}, forget=["d"])]
    )

    store = await harness.open()
    stored = await load(store, KEY)
    assert stored is not None
    assert replace(stored.state, epoch=0) == second  # a restore may move the epoch on
    assert stored.state.epoch >= second.epoch
    assert stored.snapshot == {"a/b%c": ENTRY, "e": ENTRY}
    assert stored.parked == {}
    assert await store.partitions(POLLER.name) == [KEY]
    assert [s.key for s in store.states_of(POLLER.name)] == [f"{POLLER.name}/{KEY}"]
    assert sorted(await harness.events()) == sorted(e.id for e in [*events, third])


async def test_entries_are_read_one_by_one_as_committed(harness: Harness) -> None:
    store = await harness.open()
    newer = SnapshotEntry(version="v2", seen=NOW + 1, scan=0)
    await store.commit([KeyCommit(state=state(KEY), upserts={"a/b%c": ENTRY, "d": ENTRY})])
    await store.commit([KeyCommit(state=state(KEY, sequence=1), upserts={"d": newer})])
    await store.commit([KeyCommit(state=state(OTHER), upserts={"a/b%c": newer})])

    wanted = ["d", "a/b%c", "never"]
    assert store.entries(POLLER.name, KEY, wanted) == {"d": newer, "a/b%c": ENTRY}
    await store.commit([KeyCommit(state=state(KEY, sequence=2), forget=["a/b%c"])])
    assert store.entries(POLLER.name, KEY, wanted) == {"d": newer}

    store = await harness.open()  # restored: read from what the topics hold
    assert store.entries(POLLER.name, KEY, wanted) == {"d": newer}
    assert store.entries(POLLER.name, OTHER, wanted) == {"a/b%c": newer}
    assert store.entries(POLLER.name, "never-stored", wanted) == {}


async def test_a_batch_is_committed_whole_or_not_at_all(harness: Harness) -> None:
    store = await harness.open()
    await store.commit([KeyCommit(state=state(KEY)), KeyCommit(state=state(OTHER))])
    store = await harness.open()
    current = (await load(store, KEY)).state
    other = (await load(store, OTHER)).state

    # The current holder's epoch is accepted; a stale writer's (any other epoch) is refused,
    # and with it everything else in its batch.
    await store.commit([KeyCommit(state=replace(current, sequence=1))])
    stale = replace(current, epoch=current.epoch - 1, sequence=99)
    with pytest.raises(Fenced, match="stale"):
        await store.commit(
            [
                KeyCommit(state=replace(other, sequence=7), upserts={"x": ENTRY}),
                KeyCommit(state=stale, events=[event(KEY, 99, "x")]),
            ]
        )
    # An unfenced write (pausing a key the listing dropped) is not checked.
    await store.commit([KeyCommit(state=replace(other, paused="removed"), fenced=False)])

    store = await harness.open()
    mine, theirs = await load(store, KEY), await load(store, OTHER)
    assert mine.state.sequence == 1
    assert theirs.state.sequence == 0 and theirs.snapshot == {}
    assert theirs.state.paused == "removed"
    assert await harness.events() == []


async def test_pages_in_flight_commit_in_order_and_none_after_a_refused_one(
    harness: Harness,
) -> None:
    store = await harness.open()
    await store.commit([KeyCommit(state=state(KEY))])
    store = await harness.open()
    current = (await load(store, KEY)).state

    def page(n: int, run: PageRun, *, epoch: int | None = None) -> KeyCommit:
        numbered = replace(current, sequence=n, epoch=current.epoch if epoch is None else epoch)
        subject = f"item-{n}"
        return KeyCommit(numbered, [event(KEY, n, subject)], {subject: ENTRY}, run=run)

    # Sent together, each built on the one before: all committed, in the order sent.
    await asyncio.gather(
        store.commit([page(1, PageRun(1))]),
        store.commit([page(2, PageRun(2, after=1))]),
        store.commit([page(3, PageRun(3, after=2))]),
    )
    # The second page of the next run is refused (a stale epoch): the one built on it too.
    answers = await asyncio.gather(
        store.commit([page(4, PageRun(4))]),
        store.commit([page(5, PageRun(5, after=4), epoch=current.epoch - 1)]),
        store.commit([page(6, PageRun(6, after=5))]),
        return_exceptions=True,
    )
    assert answers[0] is None
    assert isinstance(answers[1], Fenced)
    assert isinstance(answers[2], Retriable)
    await store.commit([page(5, PageRun(7))])  # a new run, from what was committed

    store = await harness.open()
    stored = await load(store, KEY)
    assert stored.state.sequence == 5
    assert sorted(stored.snapshot) == [f"item-{n}" for n in range(1, 6)]
    committed = await harness.events()
    assert len(committed) == len(set(committed)) == 5


async def test_parked_items_are_kept_until_unparked(harness: Harness) -> None:
    store = await harness.open()
    await store.commit(
        [KeyCommit(state=state(KEY), parked=[parked(KEY, "p/1"), parked(KEY, "p2")])]
    )
    store = await harness.open()
    stored = await load(store, KEY)
    assert stored.parked == {"p/1": parked(KEY, "p/1"), "p2": parked(KEY, "p2")}

    await store.commit([KeyCommit(state=stored.state, unpark=["p/1"])])
    store = await harness.open()
    assert list((await load(store, KEY)).parked) == ["p2"]


async def test_a_removed_key_stays_removed_and_its_records_are_tombstones(
    harness: Harness,
) -> None:
    store = await harness.open()
    await store.commit(
        [
            KeyCommit(
                state=state(KEY),
                upserts={"a/b%c": ENTRY, "d": ENTRY},
                parked=[parked(KEY, "p/1")],
            ),
            KeyCommit(state=state(OTHER), upserts={"a/b%c": ENTRY}),
        ]
    )
    store = await harness.open()  # removing a key restored, not only one in memory
    before = await harness.records(KEY)
    assert len(before) == 4  # state, two snapshot entries, one parked item
    await store.remove(POLLER.name, KEY)

    store = await harness.open()
    assert await load(store, KEY) is None
    assert await store.partitions(POLLER.name) == [OTHER]
    assert (await load(store, OTHER)).snapshot == {"a/b%c": ENTRY}
    after = await harness.records(KEY)
    assert all(value is None for value in after.values())
    if harness.name == "kafka":
        # Compaction keeps a tombstone for every record the key had, so a restore after
        # compaction cannot find an older value of any of them.
        assert set(after) == set(before)
    else:
        assert after == {}


# -- Commands: send_command, take_commands, and the commit or remove that applies one ---------


async def test_commands_are_handed_over_until_a_commit_applies_them(harness: Harness) -> None:
    store = await harness.open()
    await store.commit([KeyCommit(state=state(KEY))])
    pause = Command.issue("pause", POLLER.name, KEY, {}, NOW)
    if harness.name == "memory":
        # One process owns every key: there is no other owner to hand a command to.
        with pytest.raises(ConfigError, match="no owner"):
            await store.send_command(pause)
        assert store.take_commands() == []
        return

    resume = Command.issue("resume", POLLER.name, KEY, {}, NOW + 1)
    await store.send_command(pause)
    await store.send_command(resume)
    received = await _commands(store, 2)
    assert [(c.op, c.id) for c in received] == [("pause", pause.id), ("resume", resume.id)]

    # Applying one tombstones it in the same commit; the other is handed over again after a
    # restore, once.
    stored = await load(store, KEY)
    applied = received[0]
    await store.commit([KeyCommit(state=stored.state, commands=[applied.id])])
    store = await harness.open()
    again = await _commands(store, 1)
    assert [(c.op, c.id, c.args) for c in again] == [("resume", resume.id, {})]
    assert store.take_commands() == []


async def test_a_remove_command_is_gone_with_its_key(harness: Harness) -> None:
    store = await harness.open()
    await store.commit([KeyCommit(state=state(KEY)), KeyCommit(state=state(OTHER))])
    remove = Command.issue("remove", POLLER.name, KEY, {}, NOW)
    if harness.name == "memory":
        await store.remove(POLLER.name, KEY, remove.id)  # nothing waits for it: still fine
        assert await store.partitions(POLLER.name) == [OTHER]
        return
    await store.send_command(remove)
    (received,) = await _commands(store, 1)
    await store.remove(POLLER.name, KEY, received.id)

    store = await harness.open()
    assert await load(store, KEY) is None
    await asyncio.sleep(0.5)  # a command left over would be handed over by now
    assert store.take_commands() == []


async def _commands(store: Store, count: int) -> list[Command]:
    got: list[Command] = []
    async with asyncio.timeout(30):
        while len(got) < count:
            got += store.take_commands()
            await asyncio.sleep(0.05)
    return sorted(got, key=lambda c: c.issued_at)


# -- Ownership: owns, and the epoch a takeover moves on ---------------------------------------


async def test_an_owner_owns_every_key_it_holds(harness: Harness) -> None:
    store = await harness.open()  # both harnesses hold every key (Kafka: both partitions)
    changes: list[None] = []
    store.watch(lambda: changes.append(None))
    assert store.owns(POLLER.name, KEY) and store.owns(POLLER.name, OTHER)


async def test_a_restore_takes_over_with_a_new_epoch_on_kafka(harness: Harness) -> None:
    """What makes a left-over writer stale on Kafka: each restore is a takeover. The memory
    store is one object that nobody takes over: its epoch stays."""
    store = await harness.open()
    await store.commit([KeyCommit(state=state(KEY))])
    before = (await load(store, KEY)).state
    store = await harness.open()
    after = (await load(store, KEY)).state
    if harness.name == "kafka":
        assert after.epoch == before.epoch + 1
        with pytest.raises(Fenced, match="stale"):
            await store.commit([KeyCommit(state=before)])
    else:
        assert after.epoch == before.epoch
        await store.commit([KeyCommit(state=before)])
