"""The broker the suite runs against is real Kafka: transactions, compaction and groups work."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def read_all(bootstrap: str, topic: str, *, isolation: str, expect_end: bool = True) -> list:
    """Every record of a one-partition topic from the beginning up to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        records = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise RuntimeError(msg.error())
            records.append(msg)
        else:
            if expect_end:
                raise TimeoutError(f"did not reach the end of {topic}")
        return records
    finally:
        consumer.close()


def test_read_committed_sees_only_committed_transactions(kafka_bootstrap, new_topic):
    topic = new_topic("txn")
    producer = Producer(
        {"bootstrap.servers": kafka_bootstrap, "transactional.id": f"txn-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)

    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"committed-1")
    producer.produce(topic, key=b"k", value=b"committed-2")
    producer.commit_transaction(30)

    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"aborted")
    producer.flush(30)
    producer.abort_transaction(30)

    committed = [m.value() for m in read_all(kafka_bootstrap, topic, isolation="read_committed")]
    uncommitted = [
        m.value() for m in read_all(kafka_bootstrap, topic, isolation="read_uncommitted")
    ]
    assert committed == [b"committed-1", b"committed-2"]
    # The aborted record is really in the log; only the isolation level hides it.
    assert b"aborted" in uncommitted


def test_log_cleaner_compacts_overwritten_values_and_tombstones(kafka_bootstrap, new_topic):
    topic = new_topic(
        "compact",
        **{
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100",
            "min.compaction.lag.ms": "0",
        },
    )
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 0})
    for i in range(5):
        producer.produce(topic, key=b"kept", value=f"v{i}".encode())
    producer.produce(topic, key=b"gone", value=b"x")
    producer.produce(topic, key=b"gone", value=None)
    producer.flush(10)

    deadline = time.monotonic() + 60
    seen: list[tuple[bytes, bytes | None]] = []
    while time.monotonic() < deadline:
        # The active segment is never cleaned; a later write rolls it once segment.ms passed.
        time.sleep(1.0)
        producer.produce(topic, key=b"roll", value=b"r")
        producer.flush(10)
        records = read_all(kafka_bootstrap, topic, isolation="read_committed")
        seen = [(m.key(), m.value()) for m in records if m.key() != b"roll"]
        if seen == [(b"kept", b"v4")]:
            break
    assert seen == [(b"kept", b"v4")], f"compaction did not happen within 60s: {seen}"


def test_group_members_split_partitions_and_hand_over_on_leave(
    kafka_bootstrap: str, new_topic: Callable[..., str]
):
    topic = new_topic("group", partitions=4)
    group = f"g-{uuid.uuid4().hex}"

    def member() -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": kafka_bootstrap,
                "group.id": group,
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic])
        return consumer

    def settle(members: list[Consumer], want: Callable[[list[set[int]]], bool]) -> list[set[int]]:
        deadline = time.monotonic() + 45
        owned: list[set[int]] = [set() for _ in members]
        while time.monotonic() < deadline:
            for consumer in members:
                consumer.poll(0.2)
            owned = [{tp.partition for tp in c.assignment()} for c in members]
            if want(owned):
                return owned
        raise AssertionError(f"group did not settle: {owned}")

    a = member()
    settle([a], lambda owned: owned[0] == {0, 1, 2, 3})
    b = member()
    owned = settle([a, b], lambda o: bool(o[0]) and bool(o[1]) and o[0] | o[1] == {0, 1, 2, 3})
    assert owned[0].isdisjoint(owned[1])

    b.close()  # a clean leave: its partitions go back to a without waiting for a timeout
    settle([a], lambda o: o[0] == {0, 1, 2, 3})
    a.close()
