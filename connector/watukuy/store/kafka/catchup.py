"""After a partition's keys are restored, on the Kafka thread: the events they published beyond
their stored state (why a state can miss its own events: :mod:`.catchup_rule`).

Which records to read. A state misses events only when a transaction's state records lost
their commit marker while its events kept theirs; that transaction hangs the state partition,
so nothing else commits there until an operator aborts it. Every state record restored was
therefore written before those events: reading each events partition from the time of the
newest state record restored finds them. The time is that record's Kafka timestamp; the
events' are their producer's, and the two may come from two hosts, hence ``SLACK``. A key's
own events are kept only from its own state record's time (less the slack) on.

Normally that window holds the last seconds of the partition's events and nothing the state
does not account for. One reader consumer, assigned and never joining, reads the windows of
every restore at once, as long as no two need the same events partition at the same time
(events topics may have another partition count than the state topic); a restore that would
share one waits for the other to finish.

A window can hold hundreds of thousands of events (a big tenant's backlog, published in the
last ``SLACK`` seconds before its newest state), nearly all of them accounted for by the key's
state. So a key's events are kept undecoded as they come, and looked at from the newest back:
the newest one the state accounts for (its sequence is at most the state's, read by hand from
its head: :mod:`watukuy.serde.event_head`) makes every earlier one irrelevant to the
roll-forward (:func:`.catchup_rule.missed` starts after it), and only those after it are
decoded. And a long window is read from its last ``PROBE`` events first: when each key of its
partition has its newest accounted-for event there, nothing before can change what the keys
missed, and the rest of the window is not read; else it is read from its start after all.
Issue 42: reading and decoding every event of the window tripled the restore of the partition
holding the big tenants (whose events fill the window, up to the moment of their states).

The catch-up never holds a partition for long: if the windows cannot be found or read within
``PATIENCE`` (a broker restarting, a client whose metadata went stale), the partition is owned
without it, with a warning. Its keys then run as they would have before the catch-up existed.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from watukuy.core.errors import NewerRelease, Retriable, StateCorrupted
from watukuy.core.keys import KeyId
from watukuy.serde.event_head import event_sequence, key_head
from watukuy.serde.events import UndecodableEvent, published_event
from watukuy.store.kafka import clients, records
from watukuy.store.kafka.factory import Clock
from watukuy.store.kafka.partitioner import partition_for
from watukuy.store.kafka.restore import RestoredKeys

log = logging.getLogger("watukuy.kafka")

SLACK_MS = 30_000  # clock skew allowed between the host of a state record and of its events
BATCH = 20_000
KEPT = 1_000  # a key's events held undecoded before the ones its state accounts for are dropped
PROBE = 20_000  # a window's last events read first, when it holds more than twice as many
OFFSET_TIMEOUT = 5.0  # seconds an offset query may take (it blocks the Kafka thread)
RETRY_AFTER = 1.0  # seconds before asking again after a failed query (a broker restarting)
PATIENCE = 30.0  # seconds a partition's catch-up may take before the partition goes on without

EventsOf = Callable[[str], tuple[str, int] | None]
"""A poller's events topic and its partition count (``None``: not a poller of this runner)."""

TopicPart = tuple[str, int]


@dataclass(slots=True)
class _CatchUp:
    kafka_partition: int  # of the state topic: the restore this belongs to
    keys: RestoredKeys
    finish: Callable[[], None]
    started: float
    ends: dict[TopicPart, int] = field(default_factory=dict)  # where each window ends
    names: dict[bytes, tuple[str, str]] = field(default_factory=dict)  # key -> poller, name
    parts: dict[bytes, TopicPart] = field(default_factory=dict)  # key -> its events partition
    undecodable: dict[bytes, int] = field(default_factory=dict)  # key -> events left out
    # keys whose newest accounted-for event was found (those before it cannot matter)
    accounted: set[bytes] = field(default_factory=set)
    probed: dict[TopicPart, int] = field(default_factory=dict)  # read from its tail; its start
    # key -> its events read and not looked at yet, undecoded, in the order of the topic
    pending: dict[bytes, list[bytes]] = field(default_factory=dict)
    # key -> its state's sequence and what its events' heads hold of the key (None: its state
    # cannot be read here, so every event of it is decoded, as the state's reader will say)
    floors: dict[bytes, tuple[int, bytes] | None] = field(default_factory=dict)

    def settle(self, key: bytes) -> None:
        """Look at the key's pending events from the newest back: the newest one its state
        accounts for ends the search, and it and every event before it (those kept from
        earlier too) are dropped; those after it are decoded and kept."""
        pending = self.pending.pop(key, None)
        if not pending:
            return
        poller, partition = self.names[key]
        floor = self._floor(key)
        start = 0
        if floor is not None:
            sequence, head = floor
            for at in range(len(pending) - 1, -1, -1):
                found = event_sequence(pending[at], head)
                if found is None:  # not read by hand: as the decoder reads it
                    try:
                        found = published_event(pending[at], poller, partition).sequence
                    except UndecodableEvent:
                        continue  # counted below if it comes after the one looked for
                if found <= sequence:
                    start = at + 1
                    self.keys.published.pop(key, None)
                    self.undecodable.pop(key, None)
                    self.accounted.add(key)
                    break
        for raw in pending[start:]:
            try:
                event = published_event(raw, poller, partition)
            except UndecodableEvent:
                self.undecodable[key] = self.undecodable.get(key, 0) + 1
                continue
            self.keys.published.setdefault(key, []).append(event)

    def settle_all(self) -> None:
        for key in list(self.pending):
            self.settle(key)

    def probe_done(self, tp: TopicPart) -> bool:
        """``tp``'s last events are read: whether that is enough (each of its keys has its
        newest accounted-for event there); if not, what they left is forgotten, to be read
        again from the window's start."""
        keys = [key for key, part in self.parts.items() if part == tp]
        for key in keys:
            self.settle(key)
        if all(key in self.accounted for key in keys):
            return True
        for key in keys:
            self.keys.published.pop(key, None)
            self.undecodable.pop(key, None)
            self.accounted.discard(key)
        return False

    def _floor(self, key: bytes) -> tuple[int, bytes] | None:
        """The key's state's sequence (decoded once), with its events' key head. The state is
        the one :meth:`RestoredKeys.state` decodes later: the restore has read its topics to
        their ends, and nobody else writes the partition's states while it is ours."""
        if key in self.floors:
            return self.floors[key]
        floor = None
        head = key_head(*self.names[key])
        raw = self.keys.states.get(key)
        if head is not None and raw is not None:
            try:
                floor = (records.decode_state(raw).sequence, head)
            except (NewerRelease, StateCorrupted):
                floor = None
        self.floors[key] = floor
        return floor


class EventsCatchUp:
    def __init__(self, reader: Consumer, offsets: Consumer, events_of: EventsOf, clock: Clock):
        """``reader`` reads the windows (assigned, read_committed); ``offsets`` (never
        assigned) answers where they begin and end."""
        self._reader = reader
        self._offsets = offsets
        self._events_of = events_of
        self._clock = clock
        self._waiting: deque[_CatchUp] = deque()
        self._reading: dict[TopicPart, _CatchUp] = {}
        self._last_check = 0.0
        self._retry_at = 0.0

    @property
    def busy(self) -> bool:
        return bool(self._waiting or self._reading)

    @property
    def reading(self) -> bool:
        """Events are being read (what :meth:`read` may wait for)."""
        return bool(self._reading)

    def begin(self, kafka_partition: int, keys: RestoredKeys, finish: Callable[[], None]) -> None:
        """Read what ``keys`` published beyond their states, then call ``finish``."""
        self._waiting.append(_CatchUp(kafka_partition, keys, finish, self._clock.monotonic()))
        self._start_waiting()

    def drop(self, kafka_partitions: Iterable[int]) -> None:
        """The restores of ``kafka_partitions`` were given up: stop their catch-ups."""
        gone = set(kafka_partitions)
        self._waiting = deque(c for c in self._waiting if c.kafka_partition not in gone)
        stopped = [tp for tp, c in self._reading.items() if c.kafka_partition in gone]
        for tp in stopped:
            del self._reading[tp]
        self._unassign(stopped)

    def read(self, wait: float = 0.0) -> None:
        """Apply what the reader fetched, waiting up to ``wait`` seconds for it; finish the
        catch-ups whose windows are read."""
        self._start_waiting()
        if not self._reading:
            return
        self._give_up_slow_reads()
        messages: list[Any] = self._reader.consume(BATCH, wait)
        touched: set[TopicPart] = set()
        for message in messages:
            tp = (message.topic(), message.partition())
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("reading %s[%d]: %s", tp[0], tp[1], error)
                touched.add(tp)
                continue
            catching = self._reading.get(tp)
            if catching is not None:
                self._apply(catching, message)
                touched.add(tp)
        now = self._clock.monotonic()
        if now - self._last_check >= 0.5:  # an end-of-partition event may be missed
            self._last_check = now
            touched |= set(self._reading)
        self._check_read(touched)

    # -- planning -------------------------------------------------------------------------

    def _start_waiting(self) -> None:
        if not self._waiting or self._clock.monotonic() < self._retry_at:
            return
        waiting: deque[_CatchUp] = deque()
        while self._waiting:
            catching = self._waiting.popleft()
            if self._clock.monotonic() < self._retry_at:
                waiting.append(catching)
                continue
            try:
                windows = self._windows(catching)
            except Retriable as exc:
                if self._clock.monotonic() - catching.started > PATIENCE:
                    self._give_up(catching, str(exc))
                    continue
                log.info(
                    "partition %d: cannot read its events yet: %s", catching.kafka_partition, exc
                )
                self._refresh_metadata(catching)
                self._retry_at = self._clock.monotonic() + RETRY_AFTER
                waiting.append(catching)
                continue
            if any(tp in self._reading for tp in windows):
                waiting.append(catching)  # another restore reads one of them: after it
                continue
            if not windows:
                catching.finish()
                continue
            catching.ends = {tp: end for tp, (_, end) in windows.items()}
            starts = {}
            for tp, (start, end) in windows.items():
                self._reading[tp] = catching
                if end - start > 2 * PROBE:
                    catching.probed[tp] = start
                    start = end - PROBE
                starts[tp] = start
            self._reader.incremental_assign(
                [TopicPartition(t, part, start) for (t, part), start in starts.items()]
            )
        self._waiting = waiting

    def _windows(self, catching: _CatchUp) -> dict[TopicPart, tuple[int, int]]:
        """Each events partition to read for ``catching``, with its first and end offsets."""
        keys = catching.keys
        if not keys.stamps:
            return {}
        since = max(keys.stamps.values()) - SLACK_MS
        wanted: set[TopicPart] = set()
        for key in keys.stamps:
            try:
                key_id = KeyId.parse_bytes(key)
            except ValueError:  # not a key's state record: no events of its own
                continue
            topic = self._events_of(key_id.poller)
            if topic is None:
                continue
            catching.names[key] = (key_id.poller, key_id.partition)
            catching.parts[key] = part = (topic[0], partition_for(key_id.text, topic[1]))
            wanted.add(part)
        if not wanted:
            return {}
        try:
            starts = self._offsets.offsets_for_times(
                [
                    TopicPartition(t, kafka_partition, since)
                    for t, kafka_partition in sorted(wanted)
                ],
                OFFSET_TIMEOUT,
            )
            windows: dict[TopicPart, tuple[int, int]] = {}
            for tp in starts:
                if tp.error is not None:
                    raise KafkaException(tp.error)
                if tp.offset < 0:  # nothing written since
                    continue
                _low, end = self._offsets.get_watermark_offsets(
                    TopicPartition(tp.topic, tp.partition), OFFSET_TIMEOUT, cached=False
                )
                if end > tp.offset:
                    windows[(tp.topic, tp.partition)] = (tp.offset, end)
        except KafkaException as exc:
            raise Retriable(f"finding the events to catch up with: {exc}") from exc
        return windows

    def _refresh_metadata(self, catching: _CatchUp) -> None:
        topics = {t[0] for t in (self._events_of(p) for p, _ in catching.names.values()) if t}
        for topic in sorted(topics):
            clients.refresh_metadata(self._offsets, topic, OFFSET_TIMEOUT)

    def _give_up(self, catching: _CatchUp, why: str) -> None:
        log.warning(
            "partition %d: gave up reading what its keys published beyond their stored state"
            " after %.0fs (%s); its keys run without that check this time",
            catching.kafka_partition,
            self._clock.monotonic() - catching.started,
            why,
        )
        catching.settle_all()
        catching.finish()

    def _give_up_slow_reads(self) -> None:
        now = self._clock.monotonic()
        slow = {id(c): c for c in self._reading.values() if now - c.started > PATIENCE}
        for catching in slow.values():
            stopped = [tp for tp, c in self._reading.items() if c is catching]
            for tp in stopped:
                del self._reading[tp]
            self._unassign(stopped)
            self._give_up(catching, "its events were not read to their end")

    # -- reading --------------------------------------------------------------------------

    def _apply(self, catching: _CatchUp, message: Any) -> None:
        key = message.key()
        value = message.value()
        if value is None or key not in catching.names:
            return
        if message.timestamp()[1] < catching.keys.stamps.get(key, 0) - SLACK_MS:
            return  # before its state: accounted for, or of an earlier life of the key
        pending = catching.pending.get(key)
        if pending is None:
            catching.pending[key] = pending = []
        pending.append(value)
        if len(pending) >= KEPT:
            catching.settle(key)

    def _check_read(self, touched: set[TopicPart]) -> None:
        if not touched:
            return
        positions = self._reader.position(
            [TopicPartition(t, kafka_partition) for t, kafka_partition in touched]
        )
        read: list[TopicPart] = []
        for tp in positions:
            at = (tp.topic, tp.partition)
            catching = self._reading.get(at)
            if catching is None or tp.offset < catching.ends[at]:
                continue
            start = catching.probed.pop(at, None)
            if start is None or catching.probe_done(at):
                read.append(at)
            else:  # its tail was not enough: the whole window after all
                self._unassign([at])
                self._reader.incremental_assign([TopicPartition(at[0], at[1], start)])
        finished: list[_CatchUp] = []
        for at in read:
            catching = self._reading.pop(at)
            del catching.ends[at]
            if not catching.ends:
                finished.append(catching)
        self._unassign(read)
        for catching in finished:
            catching.settle_all()
            if catching.undecodable:
                log.warning(
                    "partition %d: %d record(s) of its events topics are not watukuy events of"
                    " its keys; they were left out of the catch-up",
                    catching.kafka_partition,
                    sum(catching.undecodable.values()),
                )
            catching.finish()

    def _unassign(self, tps: Iterable[TopicPart]) -> None:
        drop = [TopicPartition(t, kafka_partition) for t, kafka_partition in tps]
        if drop:
            self._reader.incremental_unassign(drop)
