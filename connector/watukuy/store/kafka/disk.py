"""The Kafka thread's side of the local state store (:mod:`.local`): a restore starts from what
the store holds, and the store is kept up to date with what the thread reads and commits.

Records reach it two ways, each keeping the rule of :mod:`.local` (every committed record of
a topic-partition below its stored offset is in the store):

- read: everything the restore reads of the co-partitioned topics, and every state record
  the tail reads once the partition is owned (its commands and this runner's own states),
  each with the offset after it;
- committed: this runner's items and parked records, once their transaction committed, with
  the offset after the last one of each topic-partition (its delivery report). State records
  are left to the tail: other runners write commands there, which only the tail sees.

Reads are put in a write batch per partition as they come (:class:`~.local_writes.Staged`), and
handed to the store's writer thread once per pass of the thread; a restore waits for them to be
written (:meth:`DiskCopy.flush`) before its keys are taken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watukuy.core.clock import SYSTEM_CLOCK, Clock
from watukuy.store.kafka.local import LocalIdentity, LocalState, Put, Staged, state_path
from watukuy.store.kafka.notifications import Record
from watukuy.store.kafka.restore import RestoredKeys
from watukuy.store.kafka.settings import KafkaSettings
from watukuy.store.kafka.topics import TopicInfo, TopicLayout

__all__ = ["DiskCopy", "PartitionOnDisk", "open_disk"]


@dataclass(frozen=True, slots=True)
class PartitionOnDisk:
    """One Kafka partition's item and parked records in the store, as :class:`RestoredKeys`
    reads them (from the event loop, beside the thread's writes)."""

    local: LocalState
    kafka_partition: int
    items_topic: str
    parked_topic: str

    def owned(self, owner: bytes, parked: bool) -> dict[bytes, bytes]:
        topic = self.parked_topic if parked else self.items_topic
        return self.local.owned(self.kafka_partition, topic, owner)

    def items(self, record_keys: Sequence[bytes]) -> list[bytes | None]:
        return self.local.values(self.kafka_partition, self.items_topic, record_keys)


def open_disk(
    settings: KafkaSettings, topics: Mapping[str, TopicInfo], clock: Clock | None = None
) -> DiskCopy | None:
    """The local state store under ``runner.state.dir`` (``None``: none configured), for the
    internal topics as the cluster described them (``topics``)."""
    root = settings.state_dir
    if root is None:
        return None
    layout = settings.layout
    internal = [topics[topic] for topic in (layout.state, layout.items, layout.parked)]
    state, items, parked = (info.topic_id for info in internal)
    identity = LocalIdentity(layout.prefix, (state, items, parked), layout.partitions)
    local = LocalState.open(state_path(root, layout.prefix, settings.runner_id), layout, identity)
    max_age_ms = min(info.delete_retention_ms for info in internal)
    return DiskCopy(local, layout, (clock or SYSTEM_CLOCK).now, max_age_ms=max_age_ms)


class DiskCopy:
    def __init__(
        self,
        local: LocalState,
        layout: TopicLayout,
        now: Callable[[], float],
        *,
        max_age_ms: int,
    ) -> None:
        """``now``: wall-clock seconds (a store's age survives restarts); ``max_age_ms``: how
        long the topics keep tombstones, past which a stored partition is wiped."""
        self.local = local
        self._state, self._items, self._parked = layout.state, layout.items, layout.parked
        self._now = now
        self._max_age_ms = max_age_ms
        self._staged: dict[int, Staged] = {}  # records read since the last write, per partition

    def _now_ms(self) -> int:
        return int(self._now() * 1000)

    # -- restoring ----------------------------------------------------------------------------

    def resume(
        self, kafka_partition: int, bounds: Mapping[str, tuple[int, int]], keys: RestoredKeys
    ) -> tuple[dict[str, int], int] | None:
        """Seed ``keys`` with the state records the store holds of the partition (its item and
        parked records stay on disk: ``keys`` reads a key's when it is taken); where each
        topic's read starts, and how many records the store gave (``None``: read every topic
        from its start; its records still go to the store, and are read from there)."""
        self._staged.pop(kafka_partition, None)
        if not self.local.usable:
            return None
        keys.on_disk = PartitionOnDisk(self.local, kafka_partition, self._items, self._parked)
        resumed = self.local.resume(
            kafka_partition,
            bounds,
            now_ms=self._now_ms(),
            max_age_ms=self._max_age_ms,
            states_only=True,
        )
        if resumed is None:
            # From each topic's start: the store holds that much of it (nothing) from now on,
            # so a read stopped early (a crash, a standby granted) goes on from where it was.
            staged = self._staging(kafka_partition)
            staged.offsets.update({t: start for t, (start, _) in bounds.items()})
            return None
        offsets, stored = resumed
        for _, key, value, stamp in stored:
            keys.apply_state(key, value, stamp)
        return offsets, len(stored)

    @property
    def failed(self) -> bool:
        """A write failed: what the store held is gone, so every partition whose restore
        relied on it must be restored again from the topics."""
        return self.local.failed

    # -- keeping up ---------------------------------------------------------------------------

    def read(
        self,
        kafka_partition: int,
        topic: str,
        key: bytes,
        value: bytes | None,
        stamp: int,
        offset: int,
    ) -> None:
        """A committed record the thread read, in offset order: kept at the next write."""
        staged = self._staging(kafka_partition)
        staged.put(topic, key, value, stamp)
        staged.offsets[topic] = offset + 1

    def read_run(self, kafka_partition: int, topic: str, messages: Sequence[Any]) -> None:
        """Consecutive committed records of one topic-partition as fetched, in offset order:
        kept at the next write."""
        self._staging(kafka_partition).run(topic, messages)

    def reached(self, kafka_partition: int, positions: Mapping[str, int]) -> None:
        """A restore read each topic up to ``positions`` (nothing committed below is unread)."""
        offsets = self._staging(kafka_partition).offsets
        for topic, position in positions.items():
            offsets[topic] = max(position, offsets.get(topic, 0))

    def _staging(self, kafka_partition: int) -> Staged:
        staged = self._staged.get(kafka_partition)
        if staged is None:
            self._staged[kafka_partition] = staged = self.local.staged(kafka_partition)
        return staged

    def write(self) -> None:
        """Hand what was read since the last call to the store's writer, one batch per
        partition."""
        if not self._staged:
            return
        now_ms = self._now_ms()
        for staged in self._staged.values():
            self.local.write_staged(staged, now_ms=now_ms)
        self._staged.clear()

    def flush(self) -> None:
        """Write what was read, and wait until it is written (the keys of a restore read
        their records from the store once it is done)."""
        self.write()
        self.local.drain()

    def committed(
        self, records: Iterable[Record], delivered: Mapping[tuple[str, int], int]
    ) -> None:
        """This runner's transaction committed: keep its items and parked records, with the
        offsets after the last of each topic-partition (``delivered``, when reported)."""
        kept = (self._items, self._parked)
        by_partition: dict[int, list[Put]] = {}
        for record in records:
            kafka_partition = record.kafka_partition
            if record.topic in kept and kafka_partition is not None:
                puts = by_partition.setdefault(kafka_partition, [])
                puts.append((record.topic, record.key, record.value, 0))
        now_ms = self._now_ms()
        for kafka_partition, puts in by_partition.items():
            offsets = {
                topic: delivered[(topic, kafka_partition)]
                for topic in kept
                if (topic, kafka_partition) in delivered
            }
            self.local.write(kafka_partition, puts, offsets, now_ms=now_ms)

    def last_records(self, records: Iterable[Record]) -> dict[int, tuple[str, int]]:
        """Which records of a transaction report their delivery: the last items and parked
        record of each partition, by ``id()``."""
        kept = (self._items, self._parked)
        last: dict[tuple[str, int], int] = {}
        for record in records:
            if record.topic in kept and record.kafka_partition is not None:
                last[(record.topic, record.kafka_partition)] = id(record)
        return {ident: where for where, ident in last.items()}

    def close(self) -> None:
        self.flush()
        self.local.close()
