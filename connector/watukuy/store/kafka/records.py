"""What each internal record looks like on the wire: keys, values, and their decoding.

Record keys follow the layout in DESIGN.md: ``poller/partition`` for state,
``poller/partition/identity`` for snapshot entries, ``poller/partition/id`` for parked items,
``cmd/poller/partition/<uuid>`` for commands. A partition key or an identity may itself hold
``/``, so those segments are percent-escaped (``/`` and ``%`` only); the co-partitioning hash
is always taken over the plain ``poller/partition``, which every value also carries.

Values are JSON for now (issue 6 moves them to versioned Avro). A record that cannot be
decoded raises :class:`StateCorrupted`: the store must not guess at state.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from watukuy.core.errors import StateCorrupted
from watukuy.core.events import Event
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry
from watukuy.store.base import Command

COMMAND_PREFIX = "cmd/"
COMMAND_OPS = frozenset(
    {"trigger", "pause", "resume", "backfill", "replay", "reset_cursor", "reconcile", "remove"}
)


def escape(segment: str) -> str:
    return segment.replace("%", "%25").replace("/", "%2F")


def unescape(segment: str) -> str:
    return segment.replace("%2F", "/").replace("%25", "%")


def key_of(poller: str, partition: str) -> str:
    """The store key and the co-partitioning hash input."""
    return f"{poller}/{partition}"


def state_key(poller: str, partition: str) -> bytes:
    return key_of(poller, partition).encode()


def item_key(poller: str, partition: str, identity: str) -> bytes:
    return f"{poller}/{escape(partition)}/{escape(identity)}".encode()


def parked_key(poller: str, partition: str, parked_id: str) -> bytes:
    return f"{poller}/{escape(partition)}/{escape(parked_id)}".encode()


def _dump(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=str).encode()


def _load(raw: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateCorrupted(f"unreadable {what} record: {exc}") from exc
    if not isinstance(value, dict):
        raise StateCorrupted(f"unreadable {what} record: not an object")
    return value


def encode_state(state: PartitionState) -> bytes:
    return _dump(state.to_dict())


def decode_state(raw: bytes) -> PartitionState:
    return PartitionState.from_dict(_load(raw, "state"))


def encode_item(poller: str, partition: str, identity: str, entry: SnapshotEntry) -> bytes:
    return _dump({"poller": poller, "partition": partition, "identity": identity, **asdict(entry)})


def decode_item(raw: bytes) -> tuple[str, str, SnapshotEntry]:
    value = _load(raw, "snapshot")
    try:
        key = key_of(value.pop("poller"), value.pop("partition"))
        identity = value.pop("identity")
        return key, identity, SnapshotEntry(**value)
    except (KeyError, TypeError) as exc:
        raise StateCorrupted(f"unreadable snapshot record: {exc!r}") from exc


def encode_parked(item: ParkedItem) -> bytes:
    return _dump(item.to_dict())


def decode_parked(raw: bytes) -> ParkedItem:
    return ParkedItem.from_dict(_load(raw, "parked"))


def encode_event(event: Event) -> bytes:
    return _dump(event.to_dict())


def command_key(command: Command) -> bytes:
    return f"{COMMAND_PREFIX}{command.poller}/{escape(command.partition)}/{command.id}".encode()


def encode_command(command: Command) -> bytes:
    body = asdict(command)
    body.pop("record_key")
    return _dump(body)


def is_command(record_key: bytes | None) -> bool:
    return record_key is not None and record_key.startswith(COMMAND_PREFIX.encode())


def decode_command(key: bytes, raw: bytes) -> Command:
    value = _load(raw, "command")
    value.pop("record_key", None)
    try:
        command = Command(**value, record_key=key)
    except TypeError as exc:
        raise StateCorrupted(f"unreadable command record: {exc!r}") from exc
    if command.op not in COMMAND_OPS:
        raise StateCorrupted(f"unknown command op {command.op!r}")
    return command
