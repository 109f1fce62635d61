"""The committed picture of the keys this instance owns, as the Kafka store keeps it.

Holding Kafka partition p of ``<prefix>.state`` is owning every key that hashes to p (under a
lease generation). For those keys the view keeps what was restored and everything committed
since: each key's state (decoded when its partition is restored), its snapshot and parked
items (decoded from the raw restore when the key is first taken), and the commands waiting
for them. A commit changes the view only once Kafka has accepted its transaction
(:meth:`OwnedKeys.applied`, by the same rule as the memory store: :mod:`watukuy.store.apply`).

A key whose stored value comes from a newer release is not held: the view remembers why, and
refuses it with ``NewerRelease`` until its partition moves (see :mod:`watukuy.core.errors`).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, replace

from watukuy.core.commands import Command
from watukuy.core.errors import Fenced, NewerRelease
from watukuy.core.keys import key_text
from watukuy.core.onchange import sleeps
from watukuy.core.schedule import resumed
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry, only_rescheduled
from watukuy.store import apply as commit_rule
from watukuy.store.base import KeyCommit, StoredKey
from watukuy.store.kafka import records
from watukuy.store.kafka.partitioner import partition_for
from watukuy.store.kafka.restore import RestoredKeys

__all__ = ["Checked", "OwnedKeys"]


@dataclass(frozen=True, slots=True)
class Checked:
    """A commit entry found fit to send: where it goes, under which lease, and as written
    (with the snapshot entries an earlier catch-up could not write)."""

    kafka_partition: int
    generation: int
    written: KeyCommit
    command_records: list[bytes]


class OwnedKeys:
    """The view of the owned keys; ``kafka_partitions``: how many ``<prefix>.state`` has."""

    def __init__(self, kafka_partitions: int) -> None:
        self._kafka_partitions = kafka_partitions
        self.owned: dict[int, int] = {}  # Kafka partition -> lease generation
        self.restoring: set[int] = set()  # assigned, not restored (taken in) yet
        self._states: dict[str, PartitionState] = {}
        # Each key's state as last written (restored, or committed since): an idle poll's
        # state that differs from it only as idle polls move a key is not written (see
        # :meth:`hold_back`), so the two part until the key's next write.
        self._written: dict[str, PartitionState] = {}
        self._unloaded: set[str] = set()  # restored, not loaded by the engine since
        # Kafka partition -> keys asleep: on_change children waiting for a trigger, whose state
        # stays the raw bytes of their restore's state record until asked for (:meth:`_woken`)
        # rather than two decoded values each: a million of them cost about a third as much.
        self._asleep: dict[int, set[bytes]] = {}
        self._snapshots: dict[str, dict[str, SnapshotEntry]] = {}
        self._parked: dict[str, dict[str, ParkedItem]] = {}
        self._raw: dict[int, RestoredKeys] = {}  # Kafka partition -> what it restored
        self._newer: dict[str, str] = {}  # key -> why it waits for a newer release
        self._read: set[str] = set()  # keys on disk read once (no newer release there)
        # key -> snapshot entries rolled forward at restore whose write failed: the key's next
        # commit carries them (see KafkaStore._catch_up).
        self._rolled: dict[str, dict[str, SnapshotEntry]] = {}
        # command id -> (Kafka partition, record key), from receipt until a commit applies it
        # or the partition goes: the engine knows commands by id, their records are ours.
        self._command_records: dict[str, tuple[int, bytes]] = {}

    # -- where keys live ----------------------------------------------------------------------

    def kafka_partition_of(self, key: str) -> int:
        """The Kafka partition of ``key`` (its text form ``poller/partition``)."""
        return partition_for(key, self._kafka_partitions)

    def owns(self, poller: str, partition: str) -> bool:
        return self.kafka_partition_of(key_text(poller, partition)) in self.owned

    # -- partitions coming and going ----------------------------------------------------------

    def take_in(
        self,
        kafka_partition: int,
        generation: int,
        keys: RestoredKeys,
        served_until: float | None = None,
    ) -> None:
        """A restored partition becomes the picture of its keys: each key's state is decoded
        now (one per key), its snapshot and parked items when the key is taken.

        ``served_until``: the previous owner made every poll due before it (what it last
        said with its commits): the keys' due times move on past the idle polls it did not
        write (:func:`~watukuy.core.schedule.resumed`). ``None``: it did not say (a release
        before this one, or no owner yet); the due times are kept as written.

        ``StateCorrupted`` if a state cannot be read (the store must stop, not guess).
        """
        self.forget({kafka_partition})  # whatever an earlier lease of it left
        asleep = self._asleep[kafka_partition] = set()
        for raw_key in list(keys.states):
            key = raw_key.decode()
            try:
                state = keys.state(key)
            except NewerRelease as exc:
                # Told by the engine when it loads the key (rate-limited): it waits there.
                self._newer[key] = str(exc)
                continue
            if sleeps(state) and raw_key not in keys.published:
                asleep.add(raw_key)  # the dict's own bytes: nothing more is kept for it
                continue
            self._written[key] = state
            # A takeover: whatever still holds the previous epoch can no longer commit.
            taken = replace(state, epoch=state.epoch + 1)
            if served_until is not None and state.schedule.next_due < served_until:
                taken = replace(taken, schedule=resumed(state.schedule, served_until))
            self._states[key] = taken
            self._unloaded.add(key)
        self._raw[kafka_partition] = keys
        self.owned[kafka_partition] = generation
        for record_key, command in keys.commands.items():
            self._command_records[command.id] = (kafka_partition, record_key)

    def revoke(self, kafka_partitions: Sequence[int]) -> None:
        gone = set(kafka_partitions)
        self.restoring -= gone
        for kafka_partition in gone:
            self.owned.pop(kafka_partition, None)
        self.forget(gone)

    def forget(self, kafka_partitions: set[int]) -> None:
        """Drop the picture of every key of ``kafka_partitions``, decoded or still raw."""
        for kafka_partition in kafka_partitions:
            self._raw.pop(kafka_partition, None)
            self._asleep.pop(kafka_partition, None)
        held = self._states.keys() | self._snapshots.keys() | self._newer.keys()
        for key in [k for k in held if self.kafka_partition_of(k) in kafka_partitions]:
            self._drop(key)
            self._rolled.pop(key, None)
        gone = [
            i
            for i, (kafka_partition, _) in self._command_records.items()
            if kafka_partition in kafka_partitions
        ]
        for command_id in gone:
            del self._command_records[command_id]

    def _drop(self, key: str) -> None:
        asleep = self._asleep.get(self.kafka_partition_of(key))
        if asleep:
            asleep.discard(key.encode())
        self._read.discard(key)
        self._states.pop(key, None)
        self._written.pop(key, None)
        self._unloaded.discard(key)
        self._snapshots.pop(key, None)
        self._parked.pop(key, None)
        self._newer.pop(key, None)

    # -- reading ------------------------------------------------------------------------------

    def state(self, key: str) -> PartitionState | None:
        return self._woken(key)

    def _woken(self, key: str) -> PartitionState | None:
        """The key's state, decoded now if it was asleep (it stays awake until a commit
        leaves it waiting again, :meth:`applied`)."""
        state = self._states.get(key)
        if state is not None:
            return state
        kafka_partition = self.kafka_partition_of(key)
        asleep = self._asleep.get(kafka_partition)
        raw_key = key.encode()
        if not asleep or raw_key not in asleep:
            return None
        asleep.discard(raw_key)
        stored = self._raw[kafka_partition].state(key)
        self._written[key] = stored
        taken = self._states[key] = replace(stored, epoch=stored.epoch + 1)
        return taken

    def load(self, key: str, *, snapshot: bool = True) -> StoredKey | None:
        self._unloaded.discard(key)
        state = self._woken(key)
        if state is None:
            self._refuse_newer(key)
            return None
        if not snapshot and self._on_disk(key):
            return StoredKey(state=state, snapshot={}, parked=self._parked_of(key))
        entries, parked = self.taken(key)
        if not snapshot:
            return StoredKey(state=state, snapshot={}, parked=dict(parked))
        snapshot_of = entries
        rolled = self._rolled.get(key, {})  # rolled forward, not written yet
        return StoredKey(state=state, snapshot=snapshot_of | rolled, parked=dict(parked))

    def entries(self, key: str, identities: Iterable[str]) -> dict[str, SnapshotEntry]:
        """The key's committed entries of ``identities``: point reads of the local state
        store, or of the snapshot held here (decoded from the restore on first use, as
        :meth:`load` does); ``NewerRelease`` if one was written by a newer release."""
        if self._woken(key) is None:
            self._refuse_newer(key)
            return {}
        wanted = list(identities)
        found = None
        if self._on_disk(key):
            raw = self._raw[self.kafka_partition_of(key)]
            try:
                found = raw.entries(key, wanted)
            except NewerRelease as exc:
                self._waits_for_newer(key, exc)
                raise
        if found is None:  # held here, or to be rolled forward as a whole first
            snapshot, _ = self.taken(key)
            found = {i: snapshot[i] for i in wanted if i in snapshot}
        rolled = self._rolled.get(key)  # rolled forward, not written yet
        if rolled:
            found.update((i, rolled[i]) for i in wanted if i in rolled)
        return found

    def _parked_of(self, key: str) -> dict[str, ParkedItem]:
        """A key's parked items, read from the local state store alone (its snapshot stays
        there); ``NewerRelease`` if one comes from a newer release."""
        self._refuse_newer(key)
        raw = self._raw[self.kafka_partition_of(key)]
        try:
            return raw.parked_of(key)
        except NewerRelease as exc:
            self._waits_for_newer(key, exc)
            raise

    def taken(self, key: str) -> tuple[dict[str, SnapshotEntry], dict[str, ParkedItem]]:
        """The key's snapshot and parked items, decoded from the restore on first use.

        ``NewerRelease`` if one of them comes from a newer release: the key then waits like
        one whose state does (it is no longer loaded, polled or written here).
        """
        loaded = self._snapshots.get(key)
        if loaded is not None:
            return loaded, self._parked.get(key, {})
        self._refuse_newer(key)
        raw = self._raw.get(self.kafka_partition_of(key))
        try:
            snapshot, parked = ({}, {}) if raw is None else raw.take(key)
        except NewerRelease as exc:
            self._waits_for_newer(key, exc)
            raise
        if raw is not None and raw.on_disk is not None:
            # The local state store has them: read again from there each time, never held.
            self._read.add(key)
            return snapshot, parked
        self._snapshots[key] = snapshot
        self._parked[key] = parked
        return snapshot, parked

    def _on_disk(self, key: str) -> bool:
        raw = self._raw.get(self.kafka_partition_of(key))
        return raw is not None and raw.on_disk is not None and key not in self._snapshots

    def _waits_for_newer(self, key: str, exc: NewerRelease) -> None:
        """One of ``key``'s records is a newer release's: the key is no longer loaded, polled
        or written here, and says why when asked."""
        self._newer[key] = str(exc)
        self._states.pop(key, None)
        self._written.pop(key, None)

    def _refuse_newer(self, key: str) -> None:
        reason = self._newer.get(key)
        if reason is not None:
            raise NewerRelease(reason)

    def record_ids(self, key: str) -> tuple[list[str], list[str]]:
        """Identities and parked ids of every record the key has (loaded or still raw)."""
        if key in self._snapshots:
            return list(self._snapshots[key]), list(self._parked.get(key, {}))
        raw = self._raw.get(self.kafka_partition_of(key))
        return ([], []) if raw is None else raw.record_ids(key)

    def unloaded_due(self, pollers: Container[str]) -> float | None:
        """The earliest due time of the keys of ``pollers`` restored and not loaded since
        (not paused): the engine does not hold them yet, so what it says it served does not
        speak of them."""
        dues = [
            state.schedule.next_due
            for key in self._unloaded
            if (state := self._states.get(key)) is not None
            and state.paused is None
            and state.poller in pollers
        ]
        return min(dues, default=None)

    def speaks_for(self) -> dict[int, int]:
        """The owned partitions (-> lease generation) whose every key this instance can read:
        a key a newer release wrote is not polled here, and its due time is not known, so
        nothing is said of its partition's polls."""
        unread = {self.kafka_partition_of(key) for key in self._newer}
        return {p: generation for p, generation in self.owned.items() if p not in unread}

    def states_of(self, poller: str, *, waiting: bool = True) -> list[PartitionState]:
        """The states of ``poller``'s keys; ``waiting=False`` leaves out those asleep (every
        one an on_change child waiting for a trigger), which are not decoded for it."""
        out = [s for s in self._states.values() if s.poller == poller]
        if not waiting:
            return out
        owner = f"{poller}/".encode()
        for kafka_partition, asleep in self._asleep.items():
            raw = self._raw[kafka_partition]
            for raw_key in asleep:
                if raw_key.startswith(owner):
                    stored = raw.state(raw_key.decode())
                    out.append(replace(stored, epoch=stored.epoch + 1))
        return out

    # -- commands -----------------------------------------------------------------------------

    def received(self, kafka_partition: int, command: Command, record_key: bytes) -> bool:
        """A command sent to a key of ``kafka_partition``: kept if this instance owns it."""
        if kafka_partition not in self.owned:
            return False
        self._command_records[command.id] = (kafka_partition, record_key)
        return True

    def command_key(self, poller: str, partition: str, command_id: str) -> bytes:
        """Where the command waits: as received, or (received by an earlier owner) where
        every sender writes it."""
        where = self._command_records.get(command_id)
        return records.command_key(poller, partition, command_id) if where is None else where[1]

    # -- writing ------------------------------------------------------------------------------

    def check(self, entry: KeyCommit) -> Checked:
        """``entry`` may be sent: its key is owned, held, and at the epoch it carries."""
        key = entry.key
        kafka_partition = self.kafka_partition_of(key)
        generation = self.owned.get(kafka_partition)
        if generation is None:
            raise Fenced(f"{key}: owned by another instance")
        # NewerRelease: its newer value must survive this instance. A key whose records are on
        # disk has those the commit overwrites read for it (its parked ones were read when it
        # was activated), unless its whole snapshot was read once.
        if not self._on_disk(key):
            self.taken(key)
        elif (entry.upserts or entry.forget) and key not in self._read:
            self.entries(key, [*entry.upserts, *entry.forget])
        commit_rule.check_epoch(entry, self._woken(key))
        rolled = self._rolled.get(key)
        written = entry if rolled is None else replace(entry, upserts=rolled | entry.upserts)
        state = entry.state
        commands = [self.command_key(state.poller, state.partition, i) for i in entry.commands]
        return Checked(kafka_partition, generation, written, commands)

    def idle(self, entry: KeyCommit) -> bool:
        """Whether ``entry`` need not be written: an idle poll's page that builds on the key's
        committed state and changes nothing but what idle polls move of its state since it
        was last written (:func:`~watukuy.core.state.only_rescheduled`). Whoever restores the
        key next finds its due time again from the time this instance says it made every
        poll due before (:meth:`take_in`)."""
        written = self._written.get(entry.key)
        return (
            written is not None
            and entry.fenced
            and (entry.run is None or entry.run.after is None)
            and not (entry.events or entry.upserts or entry.forget or entry.parked)
            and not (entry.unpark or entry.commands or entry.sends)
            and entry.key not in self._rolled
            and only_rescheduled(written, entry.state)
        )

    def hold_back(self, entry: KeyCommit) -> None:
        """Take in an :meth:`idle` ``entry`` without writing it: ``Fenced`` if the key is not
        owned here, or under another epoch, as a write would be."""
        key = entry.key
        if self.kafka_partition_of(key) not in self.owned:
            raise Fenced(f"{key}: owned by another instance")
        commit_rule.check_epoch(entry, self._woken(key))
        self._states[key] = entry.state

    def applied(self, entry: KeyCommit) -> None:
        """Kafka accepted ``entry``: the view moves on with it."""
        key = entry.key
        self._rolled.pop(key, None)
        for command_id in entry.commands:
            self._command_records.pop(command_id, None)
        if self.kafka_partition_of(key) not in self.owned:
            return
        self._written[key] = entry.state
        if self._on_disk(key) and self._sleep(key, entry.state):
            return
        if self._on_disk(key):  # the thread wrote its records there before telling us
            self._states[key] = entry.state
            return
        snapshot, parked = self.taken(key)
        self._states[key] = commit_rule.apply(entry, snapshot, parked)

    def _sleep(self, key: str, state: PartitionState) -> bool:
        """Put a key whose commit left it waiting for a trigger back to sleep: its state kept
        as bytes (:meth:`_woken` gives it back as it is: the epoch it carries is the one its
        wake adds). ``False`` if it is not such a key."""
        raw = self._raw.get(self.kafka_partition_of(key))
        if raw is None or not sleeps(state) or key in self._rolled:
            return False
        raw.keep_state(key, records.encode_state(replace(state, epoch=state.epoch - 1)))
        self._states.pop(key, None)
        self._written.pop(key, None)
        self._asleep[self.kafka_partition_of(key)].add(key.encode())
        return True

    def removed(self, key: str, command: str | None) -> None:
        """Kafka accepted the removal of ``key`` (and of the command that asked for it)."""
        if command is not None:
            self._command_records.pop(command, None)
        self._drop(key)
        raw = self._raw.get(self.kafka_partition_of(key))
        if raw is not None:
            raw.forget(key)

    def rolling(self, key: str, upserts: dict[str, SnapshotEntry]) -> None:
        """Snapshot entries rolled forward at restore, being written: the key's commits carry
        them and its loads see them until one of those writes is accepted."""
        self._rolled[key] = upserts

    def rolled(self, key: str, upserts: dict[str, SnapshotEntry]) -> None:
        """The catch-up write of ``upserts`` was accepted."""
        if self._rolled.get(key) is upserts:
            del self._rolled[key]

    def roll_later(self, key: str, upserts: dict[str, SnapshotEntry]) -> bool:
        """A catch-up write failed: the key's next commit carries ``upserts`` (``False``: the
        key is gone meanwhile, nothing to carry)."""
        if self._woken(key) is None:
            self._rolled.pop(key, None)
            return False
        self._rolled[key] = upserts
        return True
