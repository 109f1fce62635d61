"""The Kafka store under injected client faults, in process, on the real broker.

The store is given the fault suite's client factory (integration/faults/clients.py): real
confluent-kafka clients that fail at a chosen point of a chosen transaction, or lose their
assignment, the same way every run. What a user would see is checked: the error the commit
raises, what a read_committed and a read_uncommitted reader find on the events topic, and
the store owning (and restoring) its partitions again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from integration.faults.clients import Fault, FaultyClients
from integration.faults.hanging import producers
from tests.integration.kafka_support import delete_prefix, read_topic, unique_prefix, wait_owned
from watukuy.core.errors import Fenced, Retriable
from watukuy.core.events import Event
from watukuy.core.observe import Observer
from watukuy.core.poll import fresh_state
from watukuy.core.poller import define_poller
from watukuy.core.state import ParkedItem
from watukuy.store.base import KeyCommit
from watukuy.store.kafka.store import KafkaSettings, KafkaStore
from watukuy.store.kafka.topics import TopicLayout

NOW = 1_750_000_000.0
POLLER = define_poller(name="faulty", fetch=lambda ctx: [], identity=lambda item: item["id"])
PARTITIONS = 2


class Seen(Observer):
    def __init__(self) -> None:
        self.restores = 0
        self.lost: list[tuple[int, ...]] = []

    def restore_done(self, kafka_partition: int, keys: int, records: int, seconds: float) -> None:
        self.restores += 1

    def leases_lost(self, kafka_partitions: tuple[int, ...], lost: bool) -> None:
        if lost:
            self.lost.append(kafka_partitions)


class Store:
    """A started KafkaStore in a group of its own, on the injecting factory."""

    def __init__(
        self,
        bootstrap: str,
        prefix: str,
        faults: Sequence[Fault],
        runner_id: str = "r1",
        **options: Any,
    ):
        self.bootstrap = bootstrap
        self.topic = f"{prefix}.events.{POLLER.name}"
        self.clients = FaultyClients(faults, prefix=prefix)
        self.seen = Seen()
        settings = KafkaSettings(
            kafka={"bootstrap.servers": bootstrap},
            layout=TopicLayout(prefix, PARTITIONS, 1),
            runner_id=runner_id,
            session_timeout=6.0,
            transaction_timeout=6.0,
            **options,
        )
        self.store = KafkaStore(settings, self.seen, clients=self.clients)
        self.store.bind({POLLER.name: POLLER})

    async def commit(self, key: str, sequence: int, *, parked: str | None = None) -> str:
        """One event of ``key`` in one commit, with an item parked (and a DLQ copy); its id."""
        loaded = await self.store.load(POLLER.name, key)
        base = fresh_state(POLLER, key, NOW) if loaded is None else loaded.state
        entry = KeyCommit(
            state=replace(base, sequence=sequence),
            events=[_event(key, sequence)],
            parked=[] if parked is None else [_parked(key, parked)],
        )
        await self.store.commit([entry])
        return entry.events[0].id

    def ids(self, *, committed: bool) -> list[str]:
        return read_topic(self.bootstrap, self.topic, committed=committed, idle=1.0).ids()

    def writers(self) -> set[str]:
        """The producer ids that wrote to the events topic, as Kafka's own tool lists them."""
        rows = [producers(self.bootstrap, self.topic, p) for p in range(PARTITIONS)]
        return {cells[0] for partition in rows for cells in partition}


def _event(key: str, sequence: int) -> Event:
    return Event(
        id=uuid.uuid4().hex,
        poller=POLLER.name,
        partition=key,
        subject=f"item-{sequence}",
        type="created",
        version="v1",
        sequence=sequence,
        time=datetime.fromtimestamp(NOW, UTC),
        lane="live",
        schema_version=1,
        data={"id": f"item-{sequence}"},
    )


def _parked(key: str, parked_id: str) -> ParkedItem:
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


@pytest.fixture
async def started(kafka_bootstrap: str) -> AsyncIterator[Any]:
    prefix = unique_prefix()
    made: list[Store] = []

    async def start(faults: Sequence[Fault], owned: int = PARTITIONS, **options: Any) -> Store:
        store = Store(kafka_bootstrap, prefix, faults, **options)
        made.append(store)
        await store.store.start()
        await wait_owned(store.store, owned)
        return store

    try:
        yield start
    finally:
        for store in made:
            await store.store.close()
        await asyncio.to_thread(delete_prefix, kafka_bootstrap, prefix)


async def _owned_again(store: Store, restores_before: int) -> None:
    """Until every partition is owned again through a new restore (bounded)."""
    again = asyncio.Event()

    def check() -> None:
        owned = len(store.store.owned_kafka_partitions()) == PARTITIONS
        if owned and store.seen.restores >= restores_before + PARTITIONS:
            again.set()

    store.store.watch(check)
    check()
    async with asyncio.timeout(60):
        await again.wait()


async def test_an_abortable_error_at_commit_fails_that_commit_and_the_retry_lands_once(
    started: Any,
) -> None:
    store: Store = await started([Fault("abortable", "commit")])

    with pytest.raises(Retriable, match="kafka transaction failed"):
        await store.commit("t1", 1)
    assert store.clients.struck == ["abortable@commit in transaction 1"]
    # The records had reached the broker: the failed transaction was aborted, not left open.
    aborted = await asyncio.to_thread(store.ids, committed=False)
    assert len(aborted) == 1
    assert await asyncio.to_thread(store.ids, committed=True) == []

    retried = await store.commit("t1", 1)
    assert await asyncio.to_thread(store.ids, committed=True) == [retried]
    assert await asyncio.to_thread(store.ids, committed=False) == [*aborted, retried]
    # The producer whose transaction failed never wrote again: the retry came from another
    # producer id (clients.fresh_transactional_id says why).
    assert store.clients.producers == 2
    assert len(await asyncio.to_thread(store.writers)) == 2


@pytest.mark.parametrize("point", ["begin", "commit"])
async def test_a_fatal_error_fences_the_commit_replaces_the_producer_and_restores_again(
    started: Any, point: str
) -> None:
    # after=1: the second transaction with data, so that the key has a committed state to be
    # restored from.
    store: Store = await started([Fault("fatal", point, after=1)])
    first = await store.commit("t1", 1)
    restores = store.seen.restores
    assert restores == PARTITIONS

    with pytest.raises(Fenced, match="the producer was fenced"):
        await store.commit("t1", 2)
    assert store.clients.struck == [f"fatal@{point} in transaction 2"]
    assert store.clients.producers == 2
    await _owned_again(store, restores)
    assert store.seen.lost == [tuple(range(PARTITIONS))]  # every lease was given up at once
    restored = await store.store.load(POLLER.name, "t1")
    assert restored is not None and restored.state.sequence == 1

    second = await store.commit("t1", 2)
    assert await asyncio.to_thread(store.ids, committed=True) == [first, second]


async def test_a_fatal_error_met_by_a_revocation_leaves_no_partition_without_an_owner(
    started: Any,
) -> None:
    # A second runner joins while the first has a commit pending: the first's revocation
    # flushes it, the commit is fenced inside the group's callback, and the first gives up
    # every lease. It must hold again whatever the group still assigns it: before, it left
    # and rejoined the group from inside the callback, librdkafka kept the partition it was
    # not giving back assigned to it, and no one held that partition again.
    first: Store = await started([Fault("fatal", "commit", after=1)], commit_interval=30.0)
    await first.commit("t1", 1)
    pending = asyncio.create_task(first.commit("t1", 2))
    await asyncio.sleep(0.5)
    second: Store = await started([], owned=1, runner_id="r2")
    with pytest.raises(Fenced, match="the producer was fenced"):
        async with asyncio.timeout(30):
            await pending
    assert first.clients.struck == ["fatal@commit in transaction 2"]

    async def shared() -> tuple[list[int], list[int]]:
        while True:
            held = first.store.owned_kafka_partitions(), second.store.owned_kafka_partitions()
            if sorted([*held[0], *held[1]]) == list(range(PARTITIONS)):
                return held
            await asyncio.sleep(0.1)

    async with asyncio.timeout(6.0 * 2):  # well within two session timeouts
        mine, theirs = await shared()
    assert len(mine) == len(theirs) == 1


async def test_a_lost_assignment_drops_pending_work_and_the_store_owns_its_keys_again(
    started: Any,
) -> None:
    # A long commit interval keeps the second commit pending while the assignment is lost.
    store: Store = await started([], commit_interval=30.0)
    first = await store.commit("t1", 1)  # the first request goes out at once
    restores = store.seen.restores

    pending = asyncio.create_task(store.commit("t1", 2))
    await asyncio.sleep(0.5)
    assert not pending.done()
    store.clients.lose_assignment()
    with pytest.raises(Fenced, match="moved to another owner"):
        async with asyncio.timeout(30):
            await pending

    await _owned_again(store, restores)  # notifications reach the loop in order: lost first
    assert store.seen.lost == [tuple(range(PARTITIONS))]
    # Nothing of the dropped commit was written, committed or not.
    assert await asyncio.to_thread(store.ids, committed=False) == [first]
    restored = await store.store.load(POLLER.name, "t1")
    assert restored is not None and restored.state.sequence == 1


async def test_a_dlq_fault_strikes_only_the_transaction_that_carries_a_dead_letter(
    started: Any,
) -> None:
    store: Store = await started([Fault("abortable", "dlq")])
    first = await store.commit("t1", 1)  # no dead letter: let through
    with pytest.raises(Retriable, match="kafka transaction failed"):
        await store.commit("t1", 2, parked="bad-1")
    assert store.clients.struck == ["abortable@dlq in transaction 2"]
    second = await store.commit("t1", 2, parked="bad-1")
    assert await asyncio.to_thread(store.ids, committed=True) == [first, second]


async def test_a_send_offsets_that_never_returns_is_given_up_and_the_retry_lands_once(
    started: Any,
) -> None:
    # librdkafka #5456: send_offsets_to_transaction can block past its timeout for good after
    # a broker restart. A hold far past the timeout (6 s here) stands in for it.
    store: Store = await started([Fault("hold", "send_offsets", times=1, seconds=120.0)])
    with pytest.raises(Retriable, match="send_offsets_to_transaction did not return within 6s"):
        async with asyncio.timeout(60):
            await store.commit("t1", 1)
    assert store.clients.struck == ["hold@send_offsets in transaction 1"]
    assert store.clients.producers == 2  # the stuck one was replaced

    retried = await store.commit("t1", 1)
    assert await asyncio.to_thread(store.ids, committed=True) == [retried]
    restored = await store.store.load(POLLER.name, "t1")
    assert restored is not None and restored.state.sequence == 1
