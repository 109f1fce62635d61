"""A commit whose events were published but whose state records were lost, on the real broker.

Kafka can leave a transaction half-marked after a broker SIGKILL (events partitions committed,
state and items partitions hanging); an operator's abort then drops the key's state share.
The fault suite's clients reproduce what is left (``lose-state``: the transaction's state,
items and parked records are never produced). What a user must see: the next owner does not
publish those changes again, and keeps counting after them.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from integration.faults.clients import Fault, FaultyClients
from tests.integration.kafka_support import (
    delete_prefix,
    make_store,
    read_topic,
    unique_prefix,
    wait_owned,
)
from watukuy.core.changes import detect
from watukuy.core.observe import Observer
from watukuy.core.poll import fresh_state
from watukuy.core.poller import define_poller
from watukuy.store.base import KeyCommit, StoredKey
from watukuy.store.kafka.store import KafkaStore

POLLER = define_poller(
    name="ledger",
    fetch=lambda ctx: [],
    identity=lambda item: item["id"],
    version=lambda item: item["v"],
)
PARTITIONS = 2
KEYS = ["acme", "globex", "initech"]
NOW = datetime.now(UTC).timestamp()  # snapshot entries are seen at the poll's time

pytestmark = pytest.mark.integration


class CaughtUp(Observer):
    def __init__(self) -> None:
        self.keys: list[tuple[str, str, int]] = []

    def state_caught_up(self, poller: str, partition: str, events: int) -> None:
        self.keys.append((poller, partition, events))


def _store(
    bootstrap: str,
    prefix: str,
    clients: FaultyClients | None = None,
    observer: Observer | None = None,
) -> KafkaStore:
    store = make_store(
        bootstrap, prefix, partitions=PARTITIONS, clients=clients, observers=observer
    )
    store.bind({POLLER.name: POLLER})
    return store


async def _poll(store: KafkaStore, key: str, items: list[dict[str, Any]], now: float) -> int:
    """What the engine does with a page: detect against the stored picture, commit; the
    number of events published."""
    loaded = await store.load(POLLER.name, key)
    stored = loaded or StoredKey(fresh_state(POLLER, key, now), {}, {})
    found = detect(
        POLLER, key, items, stored.snapshot, lane="live", sequence=stored.state.sequence, now=now
    )
    state = replace(stored.state, sequence=found.sequence)
    await store.commit([KeyCommit(state=state, events=found.events, upserts=found.upserts)])
    return len(found.events)


@pytest.mark.parametrize("event_partitions", [PARTITIONS, 3], ids=["co-partitioned", "3-of-2"])
async def test_a_lost_state_share_is_rolled_forward_and_nothing_is_published_twice(
    kafka_bootstrap: str, event_partitions: int, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = unique_prefix()
    topic = f"{prefix}.events.{POLLER.name}"
    if event_partitions != PARTITIONS:  # an events topic need not be co-partitioned
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        for future in admin.create_topics([NewTopic(topic, event_partitions, 1)]).values():
            future.result(timeout=30)
    page_one = [{"id": "a", "v": "1"}, {"id": "b", "v": "1"}]
    page_two = [{"id": "a", "v": "2"}, {"id": "b", "v": "1"}, {"id": "c", "v": "1"}]
    # Every key's first commit lands; the next transaction (the second key's second page)
    # loses its state share.
    losing = FaultyClients([Fault("lose-state", "begin", after=len(KEYS))], prefix=prefix)
    first = _store(kafka_bootstrap, prefix, losing)
    stores = [first]
    try:
        await first.start()
        await wait_owned(first, PARTITIONS)
        for key in KEYS:
            assert await _poll(first, key, page_one, NOW) == 2
        assert await _poll(first, "globex", page_two, NOW + 1) == 2  # a@2, c@1: state lost
        assert losing.struck == [f"lose-state@begin in transaction {len(KEYS) + 1}"]
        await first.close()

        caplog.set_level(logging.WARNING, logger="watukuy.kafka")
        caught_up = CaughtUp()  # what watukuy_caught_up_events counts
        second = _store(kafka_bootstrap, prefix, observer=caught_up)
        stores.append(second)
        await second.start()
        await wait_owned(second, PARTITIONS)
        globex = await second.load(POLLER.name, "globex")
        assert globex is not None
        assert globex.state.sequence == 4
        assert {i: e.version for i, e in globex.snapshot.items()} == {"a": "2", "b": "1", "c": "1"}
        for key in ("acme", "initech"):  # whole commits: untouched
            other = await second.load(POLLER.name, key)
            assert other is not None and other.state.sequence == 2
        warned = [r.getMessage() for r in caplog.records if "rolled" in r.getMessage()]
        assert len(warned) == 1 and warned[0].startswith("ledger/globex: ")
        assert "missed 2 event(s) it had published (sequence 3 to 4)" in warned[0]
        assert caught_up.keys == [("ledger", "globex", 2)]

        # The key polls the same page again: nothing new; then a real change: sequence 5.
        assert await _poll(second, "globex", page_two, NOW + 2) == 0
        assert await _poll(second, "globex", [{"id": "b", "v": "2"}], NOW + 3) == 1
        await second.close()

        # What the catch-up wrote holds for the next owner, with nothing left to roll.
        caplog.clear()
        third = _store(kafka_bootstrap, prefix)
        stores.append(third)
        await third.start()
        await wait_owned(third, PARTITIONS)
        again = await third.load(POLLER.name, "globex")
        assert again is not None and again.state.sequence == 5
        assert {i: e.version for i, e in again.snapshot.items()} == {"a": "2", "b": "2", "c": "1"}
        assert not [r for r in caplog.records if "rolled" in r.getMessage()]

        read = await asyncio.to_thread(read_topic, kafka_bootstrap, topic, idle=1.0)
        assert read.sequences("ledger/globex") == [1, 2, 3, 4, 5]
        assert len(set(read.ids())) == len(read.ids()) == 2 + 5 + 2
    finally:
        for store in stores:
            await store.close()
        await asyncio.to_thread(delete_prefix, kafka_bootstrap, prefix)
