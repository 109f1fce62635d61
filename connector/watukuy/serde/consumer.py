"""Reading events back: decoding records, resolving schemas from the schemas topic, a reader.

Readers never join a consumer group and never commit: they assign every partition of their
topic and read it ``read_committed``, so they see exactly what a transactional consumer sees.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from watukuy.core.errors import ConfigError, Retriable
from watukuy.core.events import Event
from watukuy.core.keys import KeyId
from watukuy.serde import framing
from watukuy.serde.events import Resolve, SchemaNotFound, UndecodableEvent, decode_event

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

log = logging.getLogger("watukuy.serde")

Decoder = Callable[[bytes], Event]

# Producer settings a consumer would only warn about.
_PRODUCER_ONLY = ("linger.ms", "batch.", "compression.", "acks", "transaction.", "message.timeout")
_BATCH = 500


class KafkaRecord(Protocol):
    """What decoding needs of a consumed record (a ``confluent_kafka.Message``)."""

    def error(self) -> KafkaError | None: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...


def event_decoder(
    resolve: Resolve | None = None, registry: SchemaRegistryClient | None = None
) -> Decoder:
    """Decodes both encodings: single-object by ``resolve``, Confluent through ``registry``."""
    if resolve is None and registry is None:
        raise ValueError("pass a resolver (schemas topic), a registry client, or both")
    confluent: Decoder | None = None
    if registry is not None:
        from watukuy.serde.registry import ConfluentEventDecoder  # needs the registry extra

        confluent = ConfluentEventDecoder(registry)

    def decode(raw: bytes) -> Event:
        if raw[:2] == framing.MAGIC and resolve is not None:
            return decode_event(raw, resolve)
        if raw[:1] == b"\x00" and confluent is not None:
            return confluent(raw)
        raise UndecodableEvent(f"unknown encoding (first bytes {raw[:2].hex() or 'none'})")

    return decode


def decode_events(
    records: Iterable[KafkaRecord],
    decoder: Decoder,
    *,
    partition_key: str | None = None,
    skip_undecodable: bool = False,
) -> Iterator[Event]:
    """The events of ``records``, skipping end-of-partition markers and tombstones.

    ``partition_key`` keeps the events of that watukuy partition (record key
    ``poller/<partition_key>``) and skips the rest before decoding them.
    """
    for record in records:
        error = record.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                continue
            raise KafkaException(error)
        value = record.value()
        if value is None:
            continue
        if partition_key is not None:
            key = record.key()
            if key is None or _partition_of(key) != partition_key:
                continue
        try:
            yield decoder(value)
        except (UndecodableEvent, SchemaNotFound) as exc:
            if not skip_undecodable:
                raise
            log.warning("skipping an undecodable record: %s", exc)


def _partition_of(record_key: bytes) -> str | None:
    """The partition of an event's record key; ``None`` for one that is not a key."""
    try:
        return KeyId.parse_bytes(record_key).partition
    except ValueError:
        return None


def consumer_config(kafka: str | Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """A reader's consumer config: ``kafka`` is ``bootstrap.servers`` or a librdkafka config."""
    if isinstance(kafka, str):
        base: dict[str, Any] = {"bootstrap.servers": kafka}
    else:
        base = {k: v for k, v in kafka.items() if not k.startswith(_PRODUCER_ONLY)}
    return (
        base
        | {
            "group.id": f"watukuy.reader.{uuid.uuid4().hex[:12]}",  # never joins, never commits
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "logger": logging.getLogger("watukuy.librdkafka"),
        }
        | extra
    )


def partitions_of(consumer: Consumer, topic: str, timeout: float) -> list[int] | None:
    """The partition ids of ``topic``, ``None`` if it does not exist."""
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        raise Retriable(f"kafka: cannot read the metadata of {topic}: {exc}") from None
    found = metadata.topics.get(topic)
    if found is None:
        return None
    if found.error is not None:
        if found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise Retriable(f"kafka: topic {topic}: {found.error.str()}")
    return sorted(found.partitions)


class SchemaTopicResolver:
    """Writer schemas by fingerprint, read from the compacted ``<prefix>.schemas`` topic.

    Records are keyed by the fingerprint's hex, valued by the schema's JSON text. The topic is
    read once on the first unknown fingerprint, then only its new records on the next one.
    Usable as the ``resolve`` of :func:`~watukuy.serde.events.decode_event`.
    """

    def __init__(
        self, kafka: str | Mapping[str, Any], schemas_topic: str, *, timeout: float = 10.0
    ) -> None:
        self.topic = schemas_topic
        self.timeout = timeout
        # A refresh sits on the path of a decode: do not let the broker hold a fetch.
        self._config = consumer_config(kafka, **{"fetch.wait.max.ms": 50})
        self._consumer: Consumer | None = None
        self._schemas: dict[bytes, framing.Schema] = {}
        self._texts: dict[str, str] = {}
        self._next: dict[int, int] = {}  # partition -> next offset to read
        self._lock = threading.Lock()

    def __call__(self, fingerprint: bytes) -> framing.Schema:
        found = self._schemas.get(fingerprint)
        if found is None:
            with self._lock:
                if fingerprint not in self._schemas:
                    self._read()
            found = self._schemas.get(fingerprint)
        if found is None:
            raise SchemaNotFound(f"no schema with fingerprint {fingerprint.hex()} in {self.topic}")
        return found

    @property
    def texts(self) -> dict[str, str]:
        """Fingerprint hex -> schema text, as read so far."""
        return dict(self._texts)

    def refresh(self) -> int:
        """Read the records written since the last read; returns how many schemas are new."""
        with self._lock:
            return self._read()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _read(self) -> int:
        if self._consumer is None:
            self._consumer = Consumer(self._config)
        consumer = self._consumer
        partitions = partitions_of(consumer, self.topic, self.timeout)
        if not partitions:
            return 0
        start = [
            TopicPartition(self.topic, p, self._next.get(p, OFFSET_BEGINNING)) for p in partitions
        ]
        consumer.assign(start)
        pending, before = set(partitions), len(self._schemas)
        deadline = time.monotonic() + self.timeout
        while pending:
            if time.monotonic() > deadline:
                raise Retriable(f"kafka: {self.topic} not read to its end in {self.timeout}s")
            for record in consumer.consume(_BATCH, 0.2):
                error = record.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(record.partition() or 0)
                    elif error.fatal():
                        raise Retriable(f"kafka: {self.topic}: {error.str()}")
                    continue
                offset = record.offset()
                if offset is not None:
                    self._next[record.partition() or 0] = offset + 1
                self._add(record.key(), record.value())
        consumer.unassign()
        return len(self._schemas) - before

    def _add(self, key: bytes | None, value: bytes | None) -> None:
        if value is None:
            return  # a tombstone: schemas are never withdrawn, keep what was read
        try:
            text = value.decode()
            schema = framing.Schema.of(text)
        except Exception as exc:  # a bad record must not stop the others from resolving
            log.warning("%s: skipping an unreadable schema record: %s", self.topic, exc)
            return
        if key is not None and key.decode(errors="replace") != schema.fingerprint_hex:
            log.warning(
                "%s: record key %r is not the fingerprint %s of its schema",
                self.topic,
                key,
                schema.fingerprint_hex,
            )
        self._schemas[schema.fingerprint] = schema
        self._texts[schema.fingerprint_hex] = text


class EventReader:
    """Reads a topic's events, decoded; used by ``watukuy-source tail``.

    ``resolver`` finds single-object writer schemas (a :class:`SchemaTopicResolver`),
    ``registry`` Confluent-framed ones; pass either or both (or a ready ``decoder``).
    """

    def __init__(
        self,
        kafka: str | Mapping[str, Any],
        topic: str,
        *,
        resolver: Resolve | None = None,
        registry: SchemaRegistryClient | None = None,
        decoder: Decoder | None = None,
        from_beginning: bool = True,
        partition_key: str | None = None,
        skip_undecodable: bool = False,
        timeout: float = 10.0,
    ) -> None:
        self.topic = topic
        self.decoder = decoder or event_decoder(resolver, registry)
        self.from_beginning = from_beginning
        self.partition_key = partition_key
        self.skip_undecodable = skip_undecodable
        self.timeout = timeout
        self._config = consumer_config(kafka)
        self._consumer: Consumer | None = None
        self._pending: set[int] = set()

    def read(self, *, follow: bool = False, poll_timeout: float = 0.5) -> Iterator[Event]:
        """The events from the start (or the end); without ``follow``, up to the current end."""
        consumer = self._open()
        while follow or self._pending:
            good = []
            for record in consumer.consume(_BATCH, poll_timeout):
                error = record.error()
                if error is None:
                    good.append(record)
                elif error.code() == KafkaError._PARTITION_EOF:
                    self._pending.discard(record.partition() or 0)
                elif error.fatal():
                    raise KafkaException(error)
                else:
                    log.warning("%s: %s", self.topic, error.str())
            yield from decode_events(
                good,
                self.decoder,
                partition_key=self.partition_key,
                skip_undecodable=self.skip_undecodable,
            )

    def __iter__(self) -> Iterator[Event]:
        return self.read()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __enter__(self) -> EventReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _open(self) -> Consumer:
        if self._consumer is not None:
            return self._consumer
        consumer = Consumer(self._config)
        try:
            partitions = partitions_of(consumer, self.topic, self.timeout)
        except Exception:
            consumer.close()
            raise
        if partitions is None:
            consumer.close()
            raise ConfigError(f"topic {self.topic!r} does not exist")
        start = OFFSET_BEGINNING if self.from_beginning else OFFSET_END
        consumer.assign([TopicPartition(self.topic, p, start) for p in partitions])
        self._consumer, self._pending = consumer, set(partitions)
        return consumer
