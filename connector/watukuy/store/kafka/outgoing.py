"""Turning one key's commit into the records of its transaction.

Everything of a key goes to the same Kafka partition of the internal topics (the lease), events
and DLQ records are keyed ``poller/partition`` on their own topics. A record too large for its
topic never reaches the producer: it would fail the whole transaction, so an event goes to the
DLQ truncated, with the hash of what was cut, and a parked item is parked cut the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, cast

from watukuy.core.events import Event, canonical_json
from watukuy.core.keys import key_text
from watukuy.core.state import ParkedItem, SnapshotEntry
from watukuy.serde import binary, framing
from watukuy.serde.events import dlq_schema
from watukuy.serde.state import FORMAT_VERSION, ITEM, SCHEMAS
from watukuy.store.base import KeyCommit
from watukuy.store.kafka import records
from watukuy.store.kafka.io import Record
from watukuy.store.kafka.topics import TopicLayout

EncodeEvent = Callable[[Event], bytes]
CONTENT_TYPE = b"application/avro"

# Header pairs every event has, built once (a record's header list is its own; pairs are
# immutable, so records share them).
_CE_TYPE_HEADERS = {
    kind: ("ce_type", f"watukuy.{kind}".encode()) for kind in ("created", "updated", "deleted")
}
_SPEC_VERSION = ("ce_specversion", b"1.0")
_CONTENT_TYPE = ("content-type", CONTENT_TYPE)

_ITEM_SCHEMA = SCHEMAS.current[ITEM]
_ITEM_HEADER = framing.MAGIC + _ITEM_SCHEMA.fingerprint
# The hand-written snapshot entry is only for the schema it was written for.
_ITEM_FIELDS = _ITEM_SCHEMA.canonical == binary.SNAPSHOT_ENTRY_CANONICAL
_ITEM_FORMAT = binary.long_bytes(FORMAT_VERSION)  # an Avro int is written as a long

# What ``Record(...)`` makes, from all five fields, without the named tuple's ``__new__`` (a
# Python function: a frame per record, and a page's records are two an item).
_new_record = cast(
    Callable[[tuple[str, bytes, bytes | None, int | None, Sequence[tuple[str, bytes]]]], Record],
    partial(tuple.__new__, Record),
)

OVERHEAD = 4096  # record batch, key and headers: keep well inside max.message.bytes
ENCODED_KEPT = 65_536  # events measured by `unpublishable` whose value waits for their commit
TRUNCATED_TO = 2048


class Outgoing:
    def __init__(
        self,
        layout: TopicLayout,
        event_topics: dict[str, str],
        max_bytes: dict[str, int],
        source: str,
        encode_event: EncodeEvent,
    ) -> None:
        self.layout = layout
        self.event_topics = event_topics
        self.max_bytes = max_bytes
        self.source = source
        self.encode_event = encode_event
        self.dlq_schema = dlq_schema().schema
        # id(event) -> (event, value): detection measures each event before it takes a sequence
        # number, and its commit reuses the value rather than encoding it again. The event is
        # kept with it so that a reused id() never matches another event.
        self._encoded: dict[int, tuple[Event, bytes]] = {}

    def unpublishable(self, event: Event) -> str | None:
        """Why ``event`` cannot be published (too large for its topic), or ``None``."""
        value = self.encode_event(event)
        limit = self.max_bytes.get(self.event_topics[event.poller], 1_048_588) - OVERHEAD
        if len(value) > limit:
            return f"event of {len(value)} bytes exceeds max.message.bytes of its topic"
        encoded = self._encoded
        if len(encoded) >= ENCODED_KEPT:  # commits that never came (a fenced key): forget them
            encoded.clear()
        encoded[id(event)] = (event, value)
        return None

    def of(
        self, commit: KeyCommit, kafka_partition: int, command_records: Sequence[bytes] = ()
    ) -> list[Record]:
        """The records of ``commit``; ``command_records``: the record keys of the commands it
        applies (tombstoned with it)."""
        state = commit.state
        poller, key_name = state.poller, state.partition
        key = records.state_key(poller, key_name)
        out: list[Record] = []
        if commit.events:
            out += self._events(commit.events)
        if commit.upserts:
            out += self._entries(poller, key_name, commit.upserts, kafka_partition)
        for identity in commit.forget:
            out.append(
                Record(
                    self.layout.items,
                    records.item_key(poller, key_name, identity),
                    None,
                    kafka_partition,
                )
            )
        parked_limit = self.max_bytes.get(self.layout.parked, 1_048_588) - OVERHEAD
        for item in commit.parked:
            value = records.encode_parked(item)
            if len(value) > parked_limit:
                value = records.encode_parked(_cut(item))
            out.append(
                Record(
                    self.layout.parked,
                    records.parked_key(poller, key_name, item.id),
                    value,
                    kafka_partition,
                )
            )
            cursor = json.dumps(_lane_cursor(commit, item.lane), default=str)
            out.append(self.dlq(item, cursor=cursor))
        for parked_id in commit.unpark:
            out.append(
                Record(
                    self.layout.parked,
                    records.parked_key(poller, key_name, parked_id),
                    None,
                    kafka_partition,
                )
            )
        for command_key in command_records:
            out.append(Record(self.layout.state, command_key, None, kafka_partition))
        out.append(Record(self.layout.state, key, records.encode_state(state), kafka_partition))
        return out

    def _entries(
        self, poller: str, key_name: str, upserts: Mapping[str, SnapshotEntry], kafka_partition: int
    ) -> list[Record]:
        """The records of one key's snapshot entries. Every entry of a commit shares
        ``poller/partition/`` in its key and ``format_version``, ``poller``, ``partition`` in its
        value, and the entries of one page share ``seen``, ``scan`` and ``deleted``: each is
        encoded once; the value is written by :mod:`watukuy.serde.binary` (what
        ``encode_item`` writes, byte for byte), or by ``encode_item`` for what it leaves."""
        topic = self.layout.items
        prefix = records.item_key(poller, key_name, "")
        try:
            shared = _ITEM_FIELDS and binary.strings(poller, key_name)
        except UnicodeEncodeError:  # a lone surrogate: encode_item says what is wrong
            shared = None
        if not shared:
            return [
                Record(
                    topic,
                    prefix + records.escape(identity).encode(),
                    records.encode_item(poller, key_name, identity, entry),
                    kafka_partition,
                )
                for identity, entry in upserts.items()
            ]
        head = _ITEM_HEADER + _ITEM_FORMAT + shared
        text, entry_tail = binary.text, binary.entry_tail
        out: list[Record] = []
        last: SnapshotEntry | None = None
        tail: bytes | None = None
        for identity, entry in upserts.items():
            if (
                last is None
                or entry.seen is not last.seen
                or entry.scan is not last.scan
                or entry.deleted is not last.deleted
            ):
                last, tail = entry, entry_tail(entry.seen, entry.scan, entry.deleted)
            try:
                name, version = text(identity), text(entry.version)
            except UnicodeEncodeError:  # a lone surrogate: encode_item says what is wrong
                name = version = None
            if name is None or version is None or tail is None:
                value = records.encode_item(poller, key_name, identity, entry)
            else:
                value = b"".join((head, name, version, tail))
            if "/" in identity or "%" in identity:
                identity = records.escape(identity)
            out.append(_new_record((topic, prefix + identity.encode(), value, kafka_partition, ())))
        return out

    def removal(
        self,
        poller: str,
        key_name: str,
        kafka_partition: int,
        snapshot: Sequence[str],
        parked: Sequence[str],
    ) -> list[Record]:
        out = [
            Record(self.layout.items, records.item_key(poller, key_name, i), None, kafka_partition)
            for i in snapshot
        ]
        out += [
            Record(
                self.layout.parked, records.parked_key(poller, key_name, i), None, kafka_partition
            )
            for i in parked
        ]
        out.append(
            Record(self.layout.state, records.state_key(poller, key_name), None, kafka_partition)
        )
        return out

    def event(self, event: Event) -> Record:
        return self._events([event])[0]

    def _events(self, events: Sequence[Event]) -> list[Record]:
        """The records of one key's events: what they share (topic, key, source, and the
        time, since a page's events share one) is computed once, not per event."""
        first = events[0]
        poller, partition = first.poller, first.partition
        topic = self.event_topics[poller]
        limit = self.max_bytes.get(topic, 1_048_588) - OVERHEAD
        record_key = first.key.encode()
        source = ("ce_source", (self.source + "/" + key_text(poller, partition)).encode())
        encode, types, encoded = self.encode_event, _CE_TYPE_HEADERS, self._encoded
        time: datetime | None = None
        time_header = ("ce_time", b"")
        out: list[Record] = []
        for event in events:
            if event.partition != partition or event.poller != poller:
                out.append(self.event(event))  # not one key's events after all: as they come
                continue
            measured = encoded.pop(id(event), None)
            value = measured[1] if measured is not None and measured[0] is event else encode(event)
            if len(value) > limit:  # not measured first (a retried parked item, say)
                out.append(self._oversize(event, len(value)))
                continue
            if event.time is not time:
                time = event.time
                time_header = ("ce_time", ce_time(time))
            headers = [
                _SPEC_VERSION,
                ("ce_id", event.id.encode()),
                types.get(event.type) or ("ce_type", f"watukuy.{event.type}".encode()),
                source,
                ("ce_subject", event.subject.encode()),
                time_header,
                _CONTENT_TYPE,
            ]
            out.append(_new_record((topic, record_key, value, None, headers)))
        return out

    def dlq(self, item: ParkedItem, *, cursor: str) -> Record:
        topic = self.layout.dlq(item.poller)
        stage = "poll" if item.kind == "invalid" else "handler"
        event_id = None if item.event is None else str(item.event.get("id", ""))
        headers = _triage(item.poller, item.partition, item.kind, stage, item.error, item.attempts)
        headers.append(("watukuy.cursor", cursor.encode()[:1000]))
        if item.subject is not None:
            headers.append(("watukuy.identity", item.subject.encode()))
        if event_id is not None:
            headers.append(("watukuy.event.id", event_id.encode()))
        letter = {
            "poller": item.poller,
            "partition": item.partition,
            "kind": item.kind,
            "stage": stage,
            "error": item.error,
            "item": canonical_json(item.item),
            "attempts": item.attempts,
            "cursor": cursor,
            "identity": item.subject,
            "event_id": event_id,
        }
        value = self._letter(letter, topic, headers)
        return Record(topic, key_text(item.poller, item.partition).encode(), value, None, headers)

    def _oversize(self, event: Event, size: int) -> Record:
        topic = self.layout.dlq(event.poller)
        error = f"event of {size} bytes exceeds max.message.bytes of its topic"
        headers = _triage(event.poller, event.partition, "oversize", "publish", error, 1)
        headers += [
            ("watukuy.identity", event.subject.encode()),
            ("watukuy.event.id", event.id.encode()),
            ("watukuy.sequence", str(event.sequence).encode()),
        ]
        letter = {
            "poller": event.poller,
            "partition": event.partition,
            "kind": "oversize",
            "stage": "publish",
            "error": error,
            "item": canonical_json(event.data),
            "attempts": 1,
            "cursor": None,
            "identity": event.subject,
            "event_id": event.id,
        }
        value = self._letter(letter, topic, headers)
        return Record(topic, event.key.encode(), value, None, headers)

    def _letter(
        self, letter: dict[str, Any], topic: str, headers: list[tuple[str, bytes]]
    ) -> bytes:
        """The DLQ value; an item too large for the DLQ topic too is cut, with its hash."""
        letter |= {"truncated": False, "original_sha256": None, "original_bytes": None}
        item = letter["item"].encode()
        if len(item) + OVERHEAD > self.max_bytes.get(topic, 1_048_588):
            digest = hashlib.sha256(item).hexdigest()
            letter |= {
                "item": item[:TRUNCATED_TO].decode(errors="ignore"),
                "truncated": True,
                "original_sha256": digest,
                "original_bytes": len(item),
            }
            headers += [
                ("watukuy.truncated", b"true"),
                ("watukuy.original.bytes", str(len(item)).encode()),
                ("watukuy.original.sha256", digest.encode()),
            ]
        headers.append(("content-type", CONTENT_TYPE))
        return framing.encode(self.dlq_schema, letter)


def ce_time(time: datetime) -> bytes:
    """The ``ce_time`` header: the event's time at the precision of its Avro ``time`` field
    (``timestamp-millis``, which drops the microseconds), so that a consumer comparing the
    two sees one time."""
    return time.isoformat(timespec="milliseconds").replace("+00:00", "Z").encode()


def _cut(item: ParkedItem) -> ParkedItem:
    """A parked item too large for its topic, cut to a head and its hash: the whole item would
    fail the key's transaction, again at every retry. Such an item cannot be retried from its
    parked copy (it stays parked); the DLQ letter says what was cut."""
    return item.cut(canonical_json(item.item).encode(), TRUNCATED_TO)


def _lane_cursor(commit: KeyCommit, lane: str) -> object:
    state = commit.state
    by_name = {"live": state.live, "backfill": state.backfill, "reconcile": state.reconcile}
    return by_name.get(lane, state.live).cursor


def _triage(
    poller: str, partition: str, kind: str, stage: str, error: str, attempts: int
) -> list[tuple[str, bytes]]:
    error_class, _, message = error.partition(": ")
    if not message:
        error_class, message = "Error", error
    return [
        ("watukuy.poller", poller.encode()),
        ("watukuy.partition", partition.encode()),
        ("watukuy.kind", kind.encode()),
        ("watukuy.stage", stage.encode()),
        ("watukuy.error.class", error_class.encode()[:200]),
        ("watukuy.error.message", message.encode()[:2000]),
        ("watukuy.attempts", str(attempts).encode()),
    ]
