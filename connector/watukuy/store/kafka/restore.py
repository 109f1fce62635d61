"""Rebuilding the keys of one Kafka partition from its state, items and parked records.

The reader applies records in offset order, tombstones included, until each topic-partition
reaches the end offset fixed when the lease was granted. What is left is the committed picture
of every key that hashes to the partition, plus the commands nobody has applied yet.

Restoring is a dict write per record: the last value of each record key is kept as the bytes
Kafka gave, and decoded only when the store takes the key in (its state when the partition is
restored, its snapshot and parked items when the engine loads it). Most records of a
compacted topic that is not yet compacted are superseded before anyone reads them, and a
key nobody loads is never decoded at all. Commands are decoded as they come: the engine
applies each one.

Each key's events published after its state are read too (:mod:`.catchup`): the state is rolled
forward over them when it is decoded (see :mod:`.catchup_rule` for why).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from watukuy.core.commands import Command
from watukuy.core.errors import NewerRelease
from watukuy.core.keys import KeyId
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry
from watukuy.store.kafka import records
from watukuy.store.kafka.catchup_rule import PublishedEvent, missed, roll_forward

log = logging.getLogger("watukuy.kafka")

_COMMAND = records.COMMAND_PREFIX.encode()

Raw = dict[bytes, bytes]
"""Record key -> the last value written under it."""


class OnDisk(Protocol):
    """One Kafka partition's item and parked records in the local state store."""

    def owned(self, owner: bytes, parked: bool) -> Raw:
        """The item (or parked) records of one key (``owner``), by record key."""

    def items(self, record_keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of these item records, in their order (``None``: no such record)."""


@dataclass(slots=True)
class RestoredKeys:
    """Everything committed for the keys of one Kafka partition, undecoded."""

    states: Raw = field(default_factory=dict)  # b"poller/partition" -> value
    # Grouped by owner, the record key up to its last ``/`` (``poller/escaped-partition``),
    # so loading one key touches only its own records.
    items: dict[bytes, Raw] = field(default_factory=dict)
    parked: dict[bytes, Raw] = field(default_factory=dict)
    commands: dict[bytes, Command] = field(default_factory=dict)
    # b"poller/partition" -> the Kafka timestamp (ms) of its state record: where the events it
    # may have published beyond that state begin (see .catchup).
    stamps: dict[bytes, int] = field(default_factory=dict)
    # b"poller/partition" -> what its events topic holds of it from about its state's time on.
    published: dict[bytes, list[PublishedEvent]] = field(default_factory=dict)
    _missed: dict[str, list[PublishedEvent]] = field(default_factory=dict)
    # Set when the local state store keeps the partition's item and parked records: they
    # are not held here, and a key's are read from the store when it is taken.
    on_disk: OnDisk | None = None

    # -- applying records (the Kafka thread) ------------------------------------------------

    def apply_state(self, key: bytes, value: bytes | None, timestamp: int = 0) -> None:
        if key.startswith(_COMMAND):
            self._apply_command(key, value)
        elif value is None:
            self.states.pop(key, None)
            self.stamps.pop(key, None)
        else:
            self.states[key] = value
            self.stamps[key] = timestamp

    def apply_item(self, key: bytes, value: bytes | None) -> None:
        if self.on_disk is None:
            _apply_owned(self.items, key, value)

    def apply_parked(self, key: bytes, value: bytes | None) -> None:
        if self.on_disk is None:
            _apply_owned(self.parked, key, value)

    # The same, for consecutive records of one topic as fetched (``Message``\ s, in offset
    # order): what the Kafka thread calls, one loop per run.

    def states_read(self, run: Sequence[Any]) -> None:
        for message in run:
            key = message.key()
            if key is not None:
                self.apply_state(key, message.value(), message.timestamp()[1])

    def items_read(self, run: Sequence[Any]) -> None:
        if self.on_disk is None:
            _apply_owned_run(self.items, run)

    def parked_read(self, run: Sequence[Any]) -> None:
        if self.on_disk is None:
            _apply_owned_run(self.parked, run)

    def _apply_command(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.commands.pop(key, None)
            return
        command = command_of(key, value)
        if command is not None:
            self.commands[key] = command

    def pending_commands(self) -> list[Command]:
        return sorted(self.commands.values(), key=lambda c: (c.issued_at, c.id))

    # -- taking keys in (the event loop) ----------------------------------------------------

    def names(self) -> list[str]:
        """``poller/partition`` of every key with a state record."""
        return [key.decode() for key in self.states]

    def state(self, name: str) -> PartitionState:
        """The key's stored state, its sequence rolled forward over the events it published
        beyond it (:meth:`missed`); ``NewerRelease`` or ``StateCorrupted`` if unreadable."""
        key = name.encode()
        state = records.decode_state(self.states[key])
        published = self.published.get(key)
        if not published:
            return state
        beyond = missed(state.sequence, published)
        if not beyond:
            return state
        self._missed[name] = beyond
        return replace(state, sequence=beyond[-1].sequence)

    def missed(self, name: str) -> list[PublishedEvent]:
        """The events :meth:`state` found the key's stored state did not account for; its
        snapshot is to be rolled forward over them."""
        return self._missed.get(name, [])

    def take(self, name: str) -> tuple[dict[str, SnapshotEntry], dict[str, ParkedItem]]:
        """The key's snapshot (rolled forward as its state was) and parked items, decoded;
        its raw records are then let go.

        Raises (and keeps the raw records) if one of them cannot be read.
        """
        owner = _owner(name)
        items, parked_records = self._owned(owner)
        snapshot: dict[str, SnapshotEntry] = {}
        for value in items.values():
            _, identity, entry = records.decode_item(value)
            snapshot[identity] = entry
        parked: dict[str, ParkedItem] = {}
        for value in parked_records.values():
            item = records.decode_parked(value)
            parked[item.id] = item
        self.items.pop(owner, None)
        self.parked.pop(owner, None)
        beyond = self._missed.pop(name, None)
        if beyond:
            snapshot = roll_forward(snapshot, beyond)
        return snapshot, parked

    def entries(self, name: str, identities: Iterable[str]) -> dict[str, SnapshotEntry] | None:
        """The key's snapshot entries of ``identities`` (those it has), decoded from their own
        records alone, the raw records kept; ``None`` when only :meth:`take` gives them right
        (its snapshot is to be rolled forward first)."""
        if self._missed.get(name):
            return None
        key = KeyId.parse(name)
        wanted = list(identities)
        record_keys = [records.item_key(key.poller, key.partition, i) for i in wanted]
        if self.on_disk is None:
            held = self.items.get(_owner(name), {})
            values = [held.get(record_key) for record_key in record_keys]
        else:
            values = self.on_disk.items(record_keys)
        out: dict[str, SnapshotEntry] = {}
        for identity, value in zip(wanted, values, strict=True):
            if value is not None:
                out[identity] = records.decode_item(value)[2]
        return out

    def parked_of(self, name: str) -> dict[str, ParkedItem]:
        """The key's parked items alone, decoded (its snapshot is not read)."""
        _, parked = self._owned(_owner(name), items=False)
        out: dict[str, ParkedItem] = {}
        for value in parked.values():
            item = records.decode_parked(value)
            out[item.id] = item
        return out

    def record_ids(self, name: str) -> tuple[list[str], list[str]]:
        """Identities and parked ids of the key's records not taken in yet, read from the
        record keys alone (removing a key must not depend on reading its values)."""
        items, parked = self._owned(_owner(name))
        return _last_segments(items), _last_segments(parked)

    def _owned(self, owner: bytes, *, items: bool = True) -> tuple[Raw, Raw]:
        on_disk = self.on_disk
        if on_disk is None:
            return self.items.get(owner, {}), self.parked.get(owner, {})
        return (on_disk.owned(owner, False) if items else {}), on_disk.owned(owner, True)

    def keep_state(self, name: str, value: bytes) -> None:
        """Hold ``value`` as the key's state record (an on_change child put back to sleep,
        :mod:`.view`): what its next :meth:`state` decodes; the events read beyond its restored
        state are accounted for by it."""
        key = name.encode()
        self.states[key] = value
        self.published.pop(key, None)
        self._missed.pop(name, None)

    def forget(self, name: str) -> None:
        owner = _owner(name)
        self.states.pop(name.encode(), None)
        self._missed.pop(name, None)
        self.items.pop(owner, None)
        self.parked.pop(owner, None)


def command_of(key: bytes, value: bytes) -> Command | None:
    """The command in a record; ``None`` (and a log line) for one a newer release wrote.

    It stays in the topic, untouched, for an owner that reads it (a newer release, once the
    upgrade reaches this key's partition); this instance goes on with the others.
    """
    try:
        return records.decode_command(value)
    except NewerRelease as exc:
        log.warning("a command is left for a newer release: %s", exc)
        return None


def _apply_owned(grouped: dict[bytes, Raw], key: bytes, value: bytes | None) -> None:
    owner = records.owner_of(key)
    if value is None:
        of_owner = grouped.get(owner)
        if of_owner is not None:
            of_owner.pop(key, None)
        return
    of_owner = grouped.get(owner)
    if of_owner is None:
        grouped[owner] = of_owner = {}
    of_owner[key] = value


def _apply_owned_run(grouped: dict[bytes, Raw], run: Sequence[Any]) -> None:
    """:func:`_apply_owned` for each record of ``run``, written out: this loop is the cost of a
    restore held in memory, per record (issue 42). A key's records come one after the other (a
    page of them per commit), so its dict is looked up when the owner changes, not per record."""
    owner = b""
    held: Raw | None = None
    for message in run:
        key: bytes | None = message.key()
        if key is None:
            continue
        this = key.rpartition(b"/")[0]  # records.owner_of(key), without the call
        if this != owner:
            owner = this
            held = grouped.get(owner)
        value: bytes | None = message.value()
        if value is not None:
            if held is None:
                grouped[owner] = held = {}
            held[key] = value
        elif held is not None:
            held.pop(key, None)


def _owner(name: str) -> bytes:
    """``poller/partition`` -> the owner part of its item and parked record keys."""
    return records.owner_key(KeyId.parse(name))


def _last_segments(raw: Raw) -> list[str]:
    return [records.last_segment(key) for key in raw]
