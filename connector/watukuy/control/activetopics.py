"""KIP-558's active topics: the topics each connector has published to (its events topic and,
once an item was parked, its dead-letter topic), for ``GET /connectors/{name}/topics``.

As in Connect, they live in the status topic, one compacted record per connector and topic
(``topic/<connector>/<topic>``), so any instance answers and a restart forgets nothing. A
runner writes one when a key it owns publishes to a topic the view does not list yet; ``PUT
.../topics/reset`` tombstones them all, and the next publish lists the topic again.

A key "published" when its sequence (events) or its parked count (dead letters) grew since this
runner last looked; at the first look, when either is above zero (a key's first poll often
publishes before the first look). So a runner that starts, or takes a key over, lists again
the topics its keys published to before a reset. Pure: the status topic reads and writes the
records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from watukuy.control.jsonrecord import json_record
from watukuy.core.errors import StateCorrupted
from watukuy.core.events import canonical_json
from watukuy.core.inspect import PollerInspect

__all__ = ["ActiveTopics", "Published", "TopicRecord", "decode_topic", "topic_record"]

TOPIC_PREFIX = "topic/"
FORMAT_VERSION = 1

TopicKind = Literal["events", "dlq"]


@dataclass(frozen=True, slots=True)
class Published:
    """A poller published to its events or its dead-letter topic."""

    poller: str
    kind: TopicKind


@dataclass(frozen=True, slots=True)
class TopicRecord:
    connector: str
    topic: str
    discovered: float | None
    """When it was first published to (seconds since the epoch); ``None``: a tombstone."""


def topic_record(connector: str, topic: str, now: float | None) -> tuple[bytes, bytes | None]:
    """The status topic's record listing ``topic`` for ``connector`` (``now=None``: removing
    it)."""
    key = f"{TOPIC_PREFIX}{connector}/{topic}".encode()
    if now is None:
        return key, None
    value = {"format_version": FORMAT_VERSION, "connector": connector, "topic": topic, "at": now}
    return key, canonical_json(value).encode()


def decode_topic(key: bytes, value: bytes | None) -> TopicRecord | None:
    """The record's listing; ``None`` when ``key`` is not a topic record. Raises
    :class:`StateCorrupted` for a value it cannot read."""
    text = key.decode("utf-8", errors="replace")
    if not text.startswith(TOPIC_PREFIX):
        return None
    connector, slash, topic = text[len(TOPIC_PREFIX) :].partition("/")
    if not slash:
        return None
    if value is None:
        return TopicRecord(connector, topic, None)
    record = json_record(value, f"status record of topic {topic}", FORMAT_VERSION)
    at = record.get("at")
    if not isinstance(at, int | float):
        raise StateCorrupted(f"unreadable status record of topic {topic}: no time")
    return TopicRecord(connector, topic, float(at))


class ActiveTopics:
    """The listings as read from the status topic, and this runner's baseline of its keys."""

    def __init__(self) -> None:
        self._listed: dict[str, dict[str, float]] = {}
        self._seen: dict[tuple[str, str], tuple[int, int]] = {}

    def apply(self, record: TopicRecord) -> None:
        topics = self._listed.setdefault(record.connector, {})
        if record.discovered is None:
            topics.pop(record.topic, None)
        else:
            topics.setdefault(record.topic, record.discovered)

    def of(self, connector: str) -> list[str]:
        """The topics listed for ``connector``, by name."""
        return sorted(self._listed.get(connector, {}))

    def published(self, inspections: Iterable[PollerInspect]) -> set[Published]:
        """What this runner's keys published since the last call (see the module's text)."""
        found: set[Published] = set()
        for key in inspections:
            now = (key.sequence, sum(key.parked.values()))
            before = self._seen.get((key.poller, key.partition), (0, 0))
            self._seen[(key.poller, key.partition)] = now
            if now[0] > before[0]:
                found.add(Published(key.poller, "events"))
            if now[1] > before[1]:
                found.add(Published(key.poller, "dlq"))
        return found
