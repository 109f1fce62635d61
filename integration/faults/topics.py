"""The fault suite's own Kafka clients on a scenario's topics: read them raw to their end,
list, compact and delete a prefix's topics."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # documented, not in __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

QUIET = {"log_level": 2}
"""The harness's own clients keep librdkafka's connection errors to themselves: a broker
outage is what some scenarios are about, the runners' logs tell it."""


@dataclass(frozen=True)
class Raw:
    """One record as it is on the topic: nothing decoded."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]

    def header(self, name: str) -> str | None:
        found = [value for key, value in self.headers if key == name]
        return found[-1].decode(errors="replace") if found else None


def read_raw(
    bootstrap: str, topics: Sequence[str], *, committed: bool = True, timeout: float = 120
) -> list[Raw]:
    """Every record of ``topics`` up to their current end (read_committed unless told), in
    offset order per partition; a topic that does not exist has none."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            **QUIET,
            "group.id": f"fault-read-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 * 1024 * 1024,
        }
    )
    try:
        wanted: list[TopicPartition] = []
        for topic in topics:
            found = consumer.list_topics(topic, timeout=15).topics.get(topic)
            if found is not None and found.error is None:
                wanted += [TopicPartition(topic, p, -2) for p in found.partitions]
        if not wanted:
            return []
        consumer.assign(wanted)
        pending = {(tp.topic, tp.partition) for tp in wanted}
        out: list[Raw] = []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{sorted(pending)[:3]} not read to the end")
            for message in consumer.consume(1000, 0.5):
                error = message.error()
                where = (message.topic() or "", message.partition() or 0)
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(where)
                    continue
                headers = tuple(_header(pair) for pair in message.headers() or [])
                key = _bytes(message.key())
                out.append(Raw(*where, message.offset() or 0, key, message.value(), headers))
        return out
    finally:
        consumer.close()


def _header(pair: Any) -> tuple[str, bytes]:
    name, value = pair
    return str(name), _bytes(value) or b""


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def topics_of(bootstrap: str, prefix: str) -> list[str]:
    """Every topic whose name starts with ``<prefix>.``, internal ones included."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    return sorted(t for t in admin.list_topics(timeout=15).topics if t.startswith(prefix + "."))


def delete_prefix(bootstrap: str, prefix: str) -> None:
    """Delete every topic of ``prefix``, as far as the broker lets it (best effort)."""
    names = topics_of(bootstrap, prefix)
    if names:
        admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        for future in admin.delete_topics(names).values():
            with contextlib.suppress(Exception):
                future.result(timeout=30)


def compact_often(bootstrap: str, topics: Sequence[str]) -> None:
    """Make the log cleaner compact ``topics`` within seconds: a segment a second, cleaned as
    soon as anything in it is dirty, tombstones kept one second."""
    settings = {
        "segment.ms": "1000",
        "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0",
        "max.compaction.lag.ms": "1000",
        "delete.retention.ms": "1000",
    }
    resources = [
        ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in settings.items()
            ],
        )
        for topic in topics
    ]
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    for future in admin.incremental_alter_configs(resources).values():
        future.result(timeout=30)
