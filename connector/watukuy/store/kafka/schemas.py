"""Writer schemas, keyed by fingerprint, in ``<prefix>.schemas``: consumers without a registry
resolve the events they read there.

The topic is compacted and keyed by content, so publishing a schema again (each start) changes
nothing, and neither a transaction nor idempotence is needed (a retried write is the same
record again; their order does not matter): a plain producer of its own writes them and waits
until every broker in sync has them. The store's transactional producer is left alone
meanwhile, so the start's group join and restores go on in the Kafka thread while they are
written (a transaction of their own there held the thread, and the assignment, 0.4-1.5 s at a
start); and an idempotent producer waits for its producer id, which librdkafka asks for 0.5 s
after it starts when no broker is connected yet (every time, here).
Every schema is acknowledged before the start returns, so before any event that uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka import Message as KafkaMessage

from watukuy.core.errors import Retriable
from watukuy.store.kafka import clients

__all__ = ["PLAIN", "SOON", "publish_schemas"]

PLAIN = {"enable.idempotence": False, "acks": "all"}

SOON = {
    "retry.backoff.ms": 10,
    "retry.backoff.max.ms": 100,
    "topic.metadata.refresh.fast.interval.ms": 10,
}
"""How soon a write to a partition without a leader yet is tried again."""


def publish_schemas(
    kafka: Mapping[str, Any], topic: str, texts: Mapping[str, str], timeout: float
) -> None:
    """Write ``texts`` (fingerprint hex -> schema text) to ``topic`` and wait until they are
    acknowledged (blocking: call it in a thread). Raises :class:`Retriable` when one is not."""
    if not texts:
        return
    failed: list[str] = []

    def delivered(error: KafkaError | None, message: KafkaMessage) -> None:
        if error is not None:
            failed.append(error.str())

    # Asked again soon: at a new deployment's start the broker is still making the topic's
    # partitions writable, and librdkafka's defaults wait 100 ms, then longer, between tries.
    producer = Producer(clients.idempotent_config(kafka) | PLAIN | SOON)
    for fingerprint_hex, text in sorted(texts.items()):
        producer.produce(topic, text.encode(), fingerprint_hex.encode(), on_delivery=delivered)
    remaining = producer.flush(timeout)
    if remaining or failed:
        why = failed[0] if failed else f"{remaining} not delivered within {timeout:g}s"
        raise Retriable(f"could not write the writer schemas to {topic}: {why}")
