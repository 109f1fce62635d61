"""Helpers of the Kafka store tests: stores on a unique prefix, waiting for ownership, and a
read_committed verifier of what reached an events topic."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from integration.faults.topics import read_raw
from watukuy.core.observe import Observer
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder
from watukuy.store.kafka.factory import ClientFactory
from watukuy.store.kafka.store import KafkaSettings, KafkaStore
from watukuy.store.kafka.topics import TopicLayout


def unique_prefix() -> str:
    return f"wt-{uuid.uuid4().hex[:8]}"


def make_store(
    bootstrap: str,
    prefix: str,
    runner: str = "r1",
    *,
    clients: ClientFactory | None = None,
    observers: Observer | None = None,
    **options: Any,
) -> KafkaStore:
    options.setdefault("session_timeout", 6.0)
    options.setdefault("transaction_timeout", 6.0)
    layout = TopicLayout(
        prefix=prefix,
        partitions=options.pop("partitions", 4),
        replication_factor=options.pop("replication_factor", 1),
    )
    return KafkaStore(
        KafkaSettings(
            kafka={"bootstrap.servers": bootstrap}, layout=layout, runner_id=runner, **options
        ),
        observers,
        clients=clients,
    )


async def wait_owned(store: KafkaStore, count: int) -> None:
    """Until ``count`` partitions are restored and owned (bounded by a timeout)."""
    owned = asyncio.Event()

    def check() -> None:
        if len(store.owned_kafka_partitions()) == count:
            owned.set()

    store.watch(check)
    check()
    async with asyncio.timeout(60):
        await owned.wait()


def delete_prefix(bootstrap: str, prefix: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix + ".")]
    if names:
        for future in admin.delete_topics(names).values():
            with contextlib.suppress(Exception):
                future.result(timeout=30)


@dataclass
class Read:
    """What a consumer found on a topic: values per record key, in offset order per partition."""

    by_key: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    count: int = 0

    def sequences(self, key: str) -> list[int]:
        return [v["sequence"] for v in self.by_key[key]]

    def ids(self) -> list[str]:
        return [v["id"] for values in self.by_key.values() for v in values]


def read_topic(
    bootstrap: str, topic: str, *, committed: bool = True, idle: float = 2.0, total: float = 60.0
) -> Read:
    """Read an events topic from the start until nothing new came for ``idle`` seconds.

    Values are decoded the way any consumer without a registry would: the writer schema comes
    from ``<prefix>.schemas`` by the fingerprint in each value.
    """
    schemas_topic = topic.split(".events.")[0] + ".schemas"
    resolver = SchemaTopicResolver(bootstrap, schemas_topic)
    decode = event_decoder(resolve=resolver)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verify-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.partition.eof": False,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        consumer.assign([TopicPartition(topic, p, -2) for p in metadata.partitions])
        read = Read()
        started = last = time.monotonic()
        while time.monotonic() - last < idle and time.monotonic() - started < total:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            last = time.monotonic()
            if message.value() is None:
                continue
            read.by_key[message.key().decode()].append(decode(message.value()).to_dict())
            read.count += 1
        return read
    finally:
        consumer.close()
        resolver.close()


def in_sequence(values: Iterable[int]) -> bool:
    values = list(values)
    return values == list(range(1, len(values) + 1))


@dataclass(frozen=True)
class Stored:
    topic: str
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]


def read_to_end(bootstrap: str, topics: list[str], *, committed: bool = True) -> list[Stored]:
    """Every record of ``topics`` up to their current end, in offset order per partition."""
    return [
        Stored(r.topic, r.offset, r.key, r.value, dict(r.headers))
        for r in read_raw(bootstrap, topics, committed=committed, timeout=60)
    ]


def latest_values(bootstrap: str, topic: str) -> dict[bytes, bytes | None]:
    """What compaction would keep: the last value of each key (``None`` for a tombstone)."""
    return {r.key: r.value for r in read_to_end(bootstrap, [topic]) if r.key is not None}


def open_transaction(bootstrap: str, topic: str, partition: int, key: bytes) -> Producer:
    """A transaction left open on one partition, as a broker restart leaves one: a record
    written, never committed. A broker restart's stays open for ever; this one for the
    producer's ten-minute timeout, far longer than the test (the caller keeps the producer and
    aborts it at the end, by then a no-op at the partition)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"{topic}.hanging",
            "transaction.timeout.ms": 600_000,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=key, value=b"never committed", partition=partition)
    assert producer.flush(30) == 0
    return producer
