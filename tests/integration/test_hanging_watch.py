"""The runner's watch for hanging transactions (watukuy.store.kafka.hanging), on the real
broker: a transaction left open on an events partition, as a broker restart leaves one, is
found once it has stayed open past the limit, logged with the abort that ends it, counted for
the metric, and forgotten once aborted. Its clock is a test's, so nobody waits a minute."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.clock import ManualClock
from tests.integration.kafka_support import delete_prefix, open_transaction, unique_prefix
from watukuy.core.observe import Observer
from watukuy.store.kafka.hanging import HangingTransactions
from watukuy.store.kafka.hanging_rule import HANGING_MARGIN

TIMEOUT = 5.0  # the runners' transaction timeout


class Hanging(Observer):
    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, ...]] = {}

    def transactions_hanging(self, topic: str, kafka_partitions: tuple[int, ...]) -> None:
        self.seen[topic] = kafka_partitions


@pytest.fixture
def topic(kafka_bootstrap: str) -> Iterator[str]:
    prefix = unique_prefix()
    name = f"{prefix}.events.invoices"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(name, 2, 1)]).values():
        future.result(30)
    yield name
    delete_prefix(kafka_bootstrap, prefix)


def committed(bootstrap: str, topic: str, partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}.live"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"committed", partition=partition)
    producer.commit_transaction(30)


async def test_an_open_transaction_past_the_limit_is_reported_and_forgotten_once_aborted(
    kafka_bootstrap: str, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    await asyncio.to_thread(committed, kafka_bootstrap, topic, 0)
    stuck = await asyncio.to_thread(open_transaction, kafka_bootstrap, topic, 1, b"t_0001")
    clock, observer = ManualClock(), Hanging()
    missing = f"{topic}.not-created-yet"  # a poller's DLQ before its first dead letter
    watch = HangingTransactions(
        {"bootstrap.servers": kafka_bootstrap},
        lambda: [topic, missing],
        observer,
        transaction_timeout=TIMEOUT,
        clock=clock.monotonic,
    )
    caplog.set_level(logging.ERROR, logger="watukuy.kafka")
    try:
        first = await watch.check()
        assert first is not None and first.hanging == ()
        assert observer.seen == {topic: (), missing: ()}

        clock.sleep(TIMEOUT + HANGING_MARGIN - 1)
        assert (await watch.check()) is not None and observer.seen[topic] == ()

        clock.sleep(2)
        found = await watch.check()
        assert found is not None
        assert [(t.topic, t.kafka_partition, t.start_offset) for t in found.hanging] == [
            (topic, 1, 0)
        ]
        assert observer.seen == {topic: (1,), missing: ()}
        [error] = [r.getMessage() for r in caplog.records]
        assert f"{topic}[1] has had a transaction open for at least 66s" in error
        assert (
            f"kafka-transactions.sh --bootstrap-server {kafka_bootstrap} abort --topic {topic}"
            " --partition 1 --start-offset 0"
        ) in error

        clock.sleep(30)  # still there: counted, not logged again so soon
        await watch.check()
        assert observer.seen[topic] == (1,) and len(caplog.records) == 1
    finally:
        await asyncio.to_thread(stuck.abort_transaction, 30)

    clock.sleep(30)
    # The abort returns once the coordinator has it; its markers reach the partition a moment
    # later (under load, after the next check), and only then does the last stable offset move.
    for _ in range(50):
        ended = await watch.check()
        if ended is not None and ended.hanging == ():
            break
        await asyncio.sleep(0.2)
    assert ended is not None and ended.hanging == ()
    assert observer.seen[topic] == ()
