"""Events, their ids, and the default fingerprint of an item."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

EventType = Literal["created", "updated", "deleted"]


@dataclass(frozen=True, slots=True)
class Event:
    """A change of one item of one partition, as published."""

    id: str
    poller: str
    partition: str
    subject: str
    type: EventType
    version: str
    sequence: int
    time: datetime
    lane: str
    schema_version: int
    data: Any

    @property
    def key(self) -> str:
        """The Kafka record key: ordering is per ``poller/partition``."""
        return f"{self.poller}/{self.partition}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["time"] = self.time.isoformat().replace("+00:00", "Z")
        return out


def event_id(poller: str, partition: str, identity: str, version: str, kind: str = "") -> str:
    """Stable id of one item version in one partition.

    The same version seen twice has one id (consumers can deduplicate on it); two partitions
    never share an id because the partition is part of the hash. A deletion gets an id of its
    own so it never collides with the last version's event.
    """
    material = "\x00".join((poller, partition, identity, version, kind))
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def fingerprint(item: Any) -> str:
    """Default version of an item without ``version``: a hash of its canonical JSON."""
    return hashlib.sha256(canonical_json(item).encode()).hexdigest()[:32]


def utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
