"""Command records for other instances' keys, written by a producer of their own.

A command (a REST operation, a webhook's ``wake``) is answered only once its record is in
Kafka. Through the Kafka thread it waited for that thread's next round (up to 50 ms idle) and
for a transaction of its own; a webhook's answer (issue 46: p99 within 20 ms) cannot afford
either, and a thread polled faster costs an idle runner CPU. An idempotent producer with
``acks=all`` writes them straight away instead: a record not in a transaction is readable by
the owner's ``read_committed`` tail as soon as it is acknowledged, and the order of one
writer's records for a key is kept (one partition, idempotence). Built through the store's
client factory, so the fault suite's clients can fail it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError

from watukuy.core.errors import Retriable
from watukuy.store.kafka import clients
from watukuy.store.kafka.factory import ClientFactory, ConfluentClients
from watukuy.store.kafka.notifications import Record

__all__ = ["CommandWriter"]


class CommandWriter:
    def __init__(
        self, kafka: Mapping[str, Any], factory: ClientFactory | None, timeout: float
    ) -> None:
        self._kafka = kafka
        self._factory = factory or ConfluentClients()
        self._timeout = timeout
        self._producer: Any = None
        self._made = threading.Lock()

    def _made_producer(self) -> Any:
        with self._made:  # made at the first command: most runners never send one
            if self._producer is None:
                self._producer = self._factory.producer(clients.idempotent_config(self._kafka))
            return self._producer

    async def warm(self, topic: str) -> None:
        """Make the producer and learn ``topic``'s leaders now, not at the first command (a
        webhook's answer would pay half a second of it)."""
        producer = await asyncio.to_thread(self._made_producer)
        try:
            await asyncio.to_thread(producer.list_topics, topic, self._timeout)
        except Exception:  # the first command asks again; nothing is lost meanwhile
            return

    async def send(self, record: Record) -> None:
        """``record`` written, once the broker acknowledged it; ``Retriable`` otherwise."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def delivered(error: KafkaError | None, _: Any) -> None:
            loop.call_soon_threadsafe(_settle, future, error, record.topic)

        producer = self._made_producer()
        options: dict[str, Any] = {"on_delivery": delivered}
        if record.kafka_partition is not None:
            options["partition"] = record.kafka_partition
        producer.produce(record.topic, record.value, record.key, **options)
        await asyncio.to_thread(producer.flush, self._timeout)  # serves the delivery report
        if not future.done():
            raise Retriable(f"a command to {record.topic} was not acknowledged in time")
        await future

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await asyncio.to_thread(producer.flush, self._timeout)


def _settle(future: asyncio.Future[None], error: KafkaError | None, topic: str) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(Retriable(f"a command to {topic} failed: {error.str()}"))
