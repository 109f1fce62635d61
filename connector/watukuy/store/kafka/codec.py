"""How the Kafka store writes and reads its pollers' events: topics, envelopes, encodings.

Per poller: the events topic its events go to, the Avro envelope they are written with
(single-object encoding, or the Confluent wire format when a schema registry is configured,
registered before the first commit), and the writer schemas published to ``<prefix>.schemas``
so consumers without a registry can resolve them. Records themselves are built by
:mod:`.outgoing`; this module knows only what each poller's events need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from watukuy.core.events import Event
from watukuy.core.poller import Poller
from watukuy.serde import state as state_schemas
from watukuy.serde.consumer import Decoder, SchemaTopicResolver, event_decoder
from watukuy.serde.data import DataSchema
from watukuy.serde.events import EventSchemas, WriterSchema, dlq_schema, encode_event
from watukuy.serde.registry import ConfluentEventEncoder, registry_client
from watukuy.store.kafka.settings import KafkaSettings
from watukuy.store.kafka.topics import TopicInfo

__all__ = ["EventCodec"]


class EventCodec:
    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings
        self.layout = settings.layout
        # What each poller's events need, filled per poller (at start, or when one is added).
        self.event_topics: dict[str, str] = {}  # poller -> its events topic
        self.max_bytes: dict[str, int] = {}  # topic -> max.message.bytes
        self.topics: dict[str, TopicInfo] = {}
        self._schemas = EventSchemas()
        self._registry_encoders: dict[str, ConfluentEventEncoder] = {}

    def learned(self, infos: dict[str, TopicInfo]) -> None:
        """Topics as created or found: their partition counts and size limits."""
        self.topics.update(infos)
        self.max_bytes.update({name: info.max_message_bytes for name, info in infos.items()})

    def declare(self, poller: Poller) -> WriterSchema:
        """Where ``poller``'s events go and with which envelope; returns that envelope."""
        name = poller.name
        self.event_topics[name] = self.layout.events(name, poller.topic)
        data = None if poller.schema is None else DataSchema.load(poller.schema, f"poller '{name}'")
        return self._schemas.add(name, data)

    def register(self, pollers: Sequence[Poller]) -> None:
        """Registry mode: register each envelope now, so a bad registry fails here, not at the
        first commit (blocking I/O: called in a thread)."""
        url = self.settings.registry_url
        if url is None:
            return
        client = registry_client(url, self.settings.registry_auth)
        for poller in pollers:
            encoder = ConfluentEventEncoder(client, self.event_topics[poller.name])
            encoder.schema_id(self._schemas.writer(poller.name))
            self._registry_encoders[poller.name] = encoder

    def encode(self, event: Event) -> bytes:
        """Items were checked against their data schema when polled, hence ``validated``."""
        encoder = self._registry_encoders.get(event.poller)
        if encoder is not None:
            return encoder.encode(event, self._schemas, validated=True)
        return encode_event(event, self._schemas, validated=True)

    def schema_texts(self) -> dict[str, str]:
        """Every writer schema this store writes with, by fingerprint: events, DLQ, state."""
        texts = {**self._schemas.published(), dlq_schema().fingerprint_hex: dlq_schema().text}
        texts |= {s.fingerprint_hex: s.canonical for s in state_schemas.SCHEMAS.current.values()}
        return texts

    def events_of(self, poller: str) -> tuple[str, int] | None:
        """(Called on the Kafka thread.) ``poller``'s events topic and its partition count."""
        topic = self.event_topics.get(poller)
        info = None if topic is None else self.topics.get(topic)
        return None if info is None else (info.name, info.partitions)

    def written_topics(self) -> list[str]:
        """Every topic the runners write in transactions: the internal ones, and each known
        poller's events and DLQ topics."""
        pollers = sorted(self.event_topics)
        return [
            *self.layout.internal(),
            *(self.event_topics[p] for p in pollers),
            *(self.layout.dlq(p) for p in pollers),
        ]

    def decoder(self) -> tuple[Decoder, Callable[[], None]]:
        """A decoder of events as this store writes them, and how to close it (in a thread)."""
        settings = self.settings
        resolver = SchemaTopicResolver(settings.kafka, self.layout.schemas)
        registry = None
        if settings.registry_url is not None:
            registry = registry_client(settings.registry_url, settings.registry_auth)
        return event_decoder(resolver, registry), resolver.close
