"""Rebuilding the keys of one Kafka partition from its state, items and parked records.

The reader applies records in offset order, tombstones included, until each topic-partition
reaches the end offset fixed when the lease was granted. What is left is the committed picture
of every key that hashes to the partition, plus the commands nobody has applied yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from watukuy.core.errors import StateCorrupted
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry
from watukuy.store.base import Command
from watukuy.store.kafka import records


@dataclass(slots=True)
class RestoredKeys:
    """Everything committed for the keys of one Kafka partition."""

    states: dict[str, PartitionState] = field(default_factory=dict)
    snapshots: dict[str, dict[str, SnapshotEntry]] = field(default_factory=dict)
    parked: dict[str, dict[str, ParkedItem]] = field(default_factory=dict)
    commands: dict[bytes, Command] = field(default_factory=dict)

    def apply_state(self, key: bytes, value: bytes | None) -> None:
        if records.is_command(key):
            if value is None:
                self.commands.pop(key, None)
            else:
                self.commands[key] = records.decode_command(key, value)
            return
        name = key.decode()
        if value is None:
            self.states.pop(name, None)
        else:
            self.states[name] = records.decode_state(value)

    def apply_item(self, key: bytes, value: bytes | None) -> None:
        owner, identity = _split(key, "snapshot")
        if value is None:
            self.snapshots.get(owner, {}).pop(identity, None)
            return
        decoded_owner, decoded_identity, entry = records.decode_item(value)
        self.snapshots.setdefault(decoded_owner, {})[decoded_identity] = entry

    def apply_parked(self, key: bytes, value: bytes | None) -> None:
        owner, parked_id = _split(key, "parked")
        if value is None:
            self.parked.get(owner, {}).pop(parked_id, None)
            return
        item = records.decode_parked(value)
        self.parked.setdefault(f"{item.poller}/{item.partition}", {})[item.id] = item

    def pending_commands(self) -> list[Command]:
        return sorted(self.commands.values(), key=lambda c: (c.issued_at, c.id))


def _split(key: bytes, what: str) -> tuple[str, str]:
    """``poller/escaped-partition/escaped-rest`` -> (``poller/partition``, rest)."""
    parts = key.decode().split("/")
    if len(parts) != 3:
        raise StateCorrupted(f"unreadable {what} record key {key!r}")
    poller, partition, rest = parts
    return f"{poller}/{records.unescape(partition)}", records.unescape(rest)
