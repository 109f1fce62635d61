"""A read_committed consumer of one events topic in a thread: what has arrived, and when.

Scenarios use it to wait until the runners caught up and to time a recovery (the first event
committed after a fault healed); the verifier reads the topic again from the start on its own.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Mapping

from confluent_kafka import Consumer, TopicPartition

from integration.faults.topics import QUIET
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder


class EventWatch:
    def __init__(self, bootstrap: str, prefix: str, poller: str, *, timeout: float = 90) -> None:
        self.topic = f"{prefix}.events.{poller}"
        self.poller = poller
        self._resolver = SchemaTopicResolver(
            {"bootstrap.servers": bootstrap, **QUIET}, f"{prefix}.schemas"
        )
        self._decode = event_decoder(resolve=self._resolver)
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                **QUIET,
                "group.id": f"fault-watch-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        deadline = time.monotonic() + timeout
        while True:
            found = self._consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
            if found is not None and found.error is None and found.partitions:
                break
            if time.monotonic() > deadline:
                self._consumer.close()
                raise TimeoutError(f"{self.topic} was not created within {timeout:g}s")
            time.sleep(0.5)
        self._consumer.assign([TopicPartition(self.topic, p, -2) for p in found.partitions])
        self._lock = threading.Lock()
        self._versions: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        self._arrivals: list[tuple[float, str]] = []  # (monotonic time consumed, record key)
        self.count = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="event-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            value = message.value()
            if value is None:
                continue
            try:
                event = self._decode(value)
            except Exception as exc:  # noted, not fatal: the verifier reads everything again
                self.errors.append(str(exc))
                continue
            key = f"{event.poller}/{event.partition}"
            with self._lock:
                self._versions[key][event.subject].add(event.version)
                self._arrivals.append((time.monotonic(), key))
                self.count += 1

    def has_all(self, finals: Mapping[str, Mapping[str, str]]) -> bool:
        """Whether every ``{tenant: {item: version}}`` has arrived."""
        with self._lock:
            for tenant, items in finals.items():
                seen = self._versions.get(f"{self.poller}/{tenant}", {})
                if any(version not in seen.get(item, ()) for item, version in items.items()):
                    return False
        return True

    def missing(self, finals: Mapping[str, Mapping[str, str]]) -> list[tuple[str, str, str]]:
        """``(tenant, item, version)`` of ``finals`` that have not arrived."""
        with self._lock:
            return [
                (tenant, item, version)
                for tenant, items in finals.items()
                for item, version in items.items()
                if version not in self._versions.get(f"{self.poller}/{tenant}", {}).get(item, ())
            ]

    def first_after(self, since: float, keys: set[str] | None = None) -> float | None:
        """The monotonic time the first event (of ``keys``, if given) came after ``since``."""
        with self._lock:
            for at, key in self._arrivals:
                if at > since and (keys is None or key in keys):
                    return at
        return None

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {k: sum(len(v) for v in items.values()) for k, items in self._versions.items()}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()
        self._resolver.close()
