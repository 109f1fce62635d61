"""Restore and tail, on the Kafka thread: an assigned partition's keys read back from the
co-partitioned topics (state, items, parked) up to their end, then its commands as they come.

One assigned (never joining) consumer, the tail, reads every restore at once and the commands
afterwards. Two more never-assigned consumers answer offset queries without queueing behind the
tail's fetches: one read_committed (the last stable offset), one read_uncommitted (the high
watermark), so a takeover can wait until the previous owner's open transaction has ended.

Once a partition's topics are read, :mod:`.catchup` reads what its keys published beyond their
states; then the partition is owned and the store told.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from watukuy.core.errors import Retriable
from watukuy.logs import log_context
from watukuy.store.kafka import clients, records
from watukuy.store.kafka.catchup import EventsCatchUp
from watukuy.store.kafka.disk import DiskCopy
from watukuy.store.kafka.factory import Clock
from watukuy.store.kafka.hanging_rule import HANGING_MARGIN, REPORT_EVERY, abort_command
from watukuy.store.kafka.lease import Lease, Leases, LeaseState
from watukuy.store.kafka.notifications import CommandReceived, Notify, Restored
from watukuy.store.kafka.offsets import Bounds, bounds_now
from watukuy.store.kafka.restore import RestoredKeys, command_of
from watukuy.store.kafka.standby import Standbys
from watukuy.store.kafka.topics import TopicLayout

log = logging.getLogger("watukuy.kafka")

# While a restore is in progress the thread reads back to back, in large batches, waiting only
# for records not fetched yet; once every restore is done it reads commands without waiting
# (the pump's group poll paces it). Issue 13: at 2,000 records and a 20 ms group poll per turn,
# half of a 1M-record restore was spent waiting.
RESTORE_BATCH = 20_000
RESTORE_WAIT = 0.02  # seconds a restore read waits for the records it has not got yet
STALLED = 10.0  # seconds a restore may read nothing before it is looked at
TAIL_BATCH = 2_000


def co_partitioned(layout: TopicLayout) -> tuple[str, str, str]:
    return (layout.state, layout.items, layout.parked)


@dataclass(slots=True)
class _Restoring:
    lease: Lease
    ends: dict[str, int]
    started: float
    keys: RestoredKeys = field(default_factory=RestoredKeys)
    records: int = 0  # read from the topics
    from_disk: int = 0  # given by the local state store
    starts: dict[str, int] = field(default_factory=dict)  # where the store had each topic
    catching_up: bool = False  # its topics are read; its events are being read
    served_until: float | None = None  # what the partition's last owner said it served
    read_to: tuple[int, ...] = ()  # the positions last seen
    moved_at: float = 0.0  # when they last moved (or the restore began)


class Restores:
    """The restores in progress and waiting, and the tail that reads them and the commands."""

    def __init__(
        self,
        layout: TopicLayout,
        leases: Leases,
        notify: Notify,
        clock: Clock,
        *,
        served: Callable[[int], float | None] = lambda kafka_partition: None,
        tail: Consumer,
        stable: Consumer,
        written: Consumer,
        catchup: EventsCatchUp,
        transaction_timeout: float = 10.0,
        bootstrap: str = "<bootstrap>",
        disk: DiskCopy | None = None,
        standbys: Standbys | None = None,
    ) -> None:
        """``disk``: the local state store's copy; a restore starts from it and the records
        read are kept there. ``served``: what a partition's last owner said it served, asked
        once its transactions are over (:mod:`.served`)."""
        self._layout = layout
        self._served = served
        self._disk = disk
        self.standbys = standbys
        # Past this, an open transaction is not one the coordinator will end (it aborts after
        # transaction.timeout.ms, checking every 10 s by default): it hangs.
        self._hanging_after = transaction_timeout + HANGING_MARGIN
        self._bootstrap = bootstrap
        self._hanging_logged: dict[tuple[str, int], float] = {}  # (topic, partition)
        self._leases = leases
        self._notify = notify
        self._clock = clock
        self.tail = tail
        self._stable = stable  # never assigned: last stable offsets
        self._written = written  # never assigned, read_uncommitted: high watermarks
        self._catchup = catchup
        self._restoring: dict[int, _Restoring] = {}
        self._waiting: deque[Lease] = deque()  # granted, not yet settled
        self._unsettled_since: dict[int, float] = {}
        self._unsettled_logged: dict[int, float] = {}
        self._last_restore_check = 0.0
        # Compared with every record's topic: looked up once.
        self._state, self._items, self._parked = co_partitioned(layout)

    @property
    def reading(self) -> bool:
        """A restore is in progress: :meth:`read` does the waiting, in large batches."""
        return bool(self._restoring)

    @property
    def busy(self) -> bool:
        """A restore is in progress or waiting to start."""
        return bool(self._restoring or self._waiting)

    def queue(self, lease: Lease) -> None:
        """Restore ``lease``'s partition once no transaction of the previous owner is open."""
        self._waiting.append(lease)

    def start_settled(self) -> None:
        """Start the restores whose partitions have settled; the others wait. The ends of
        every waiting partition are asked at once (one by one, 32 partitions of three topics
        took most of a second)."""
        leases = [w for w in self._waiting if self._leases.get(w.kafka_partition) == w]
        self._waiting = deque()  # the others were revoked meanwhile
        if not leases:
            return
        topics = co_partitioned(self._layout)
        wanted = [(topic, lease.kafka_partition) for lease in leases for topic in topics]
        try:
            bounds = bounds_now(self._stable, self._written, wanted, self._clock)
        except Retriable as exc:
            # The cluster is out of reach (a broker restarting): the leases wait and the next
            # turn asks again; the thread must not die of it.
            for lease in leases:
                with log_context(generation=lease.generation):
                    self._log_unsettled(lease.kafka_partition, "cannot read its end yet: %s", exc)
            self._waiting.extend(leases)
            return
        for lease in leases:
            with log_context(generation=lease.generation):
                settled = self._settled(lease, bounds)
                if settled is not None:
                    self._begin(lease, settled)
                else:
                    self._waiting.append(lease)

    def drop(self, kafka_partitions: Sequence[int]) -> None:
        """``kafka_partitions`` are no longer ours: stop restoring and reading them."""
        for kafka_partition in kafka_partitions:
            self._restoring.pop(kafka_partition, None)
            if self.standbys is not None:  # its topics go too: kept again at the next look
                self.standbys.kept.discard(kafka_partition)
        self._catchup.drop(kafka_partitions)
        self._unassign(kafka_partitions, co_partitioned(self._layout))

    def _settled(self, lease: Lease, found: Bounds) -> dict[str, tuple[int, int]] | None:
        """The start and end of each of the partition's topics, once no transaction is open on its
        records, so that end is final (``None``: not yet).

        The previous owner may have been frozen after its offsets reached the coordinator and
        before it committed (KIP-447 fences only the offsets): its transaction could still
        commit. Restoring before it resolves would fork the key, so a takeover waits until the
        last stable offset reaches the high watermark: the owner committed, or the
        coordinator aborted it after ``transaction.timeout.ms``.
        """
        bounds: dict[str, tuple[int, int]] = {}
        for topic in co_partitioned(self._layout):
            tp = TopicPartition(topic, lease.kafka_partition)
            start, last_stable, high = found[(topic, lease.kafka_partition)]
            if last_stable < high:
                self._report_hanging(tp, last_stable)
                self._log_unsettled(
                    lease.kafka_partition,
                    "waiting for an open transaction of the previous owner to end before "
                    "restoring (%s: stable %d < written %d)",
                    topic,
                    last_stable,
                    high,
                )
                return None
            bounds[topic] = (start, last_stable)
        self._unsettled_since.pop(lease.kafka_partition, None)
        self._unsettled_logged.pop(lease.kafka_partition, None)
        for topic in bounds:
            self._hanging_logged.pop((topic, lease.kafka_partition), None)
        return bounds

    def _report_hanging(self, tp: TopicPartition, last_stable: int) -> None:
        """An error the operator can act on, every few minutes, once the wait is longer than
        any transaction may stay open: a hanging transaction, which nothing here can end.

        Kafka's coordinator, completing transactions right after a broker restart, skips the
        markers of partitions whose leader it does not know yet ("likely deleted already"), and
        then considers the transaction done. Only an admin abort (WriteTxnMarkers, which
        librdkafka does not offer) ends such a transaction.
        """
        now = self._clock.monotonic()
        waited = now - self._unsettled_since.get(tp.partition, now)
        logged = self._hanging_logged.get((tp.topic, tp.partition))
        if waited < self._hanging_after or (logged is not None and now - logged < REPORT_EVERY):
            return
        self._hanging_logged[(tp.topic, tp.partition)] = now
        log.error(
            "partition %d: %s[%d] has had a transaction open for %.0fs, longer than the"
            " transaction timeout allows: a hanging transaction (a broker restart can leave one"
            " behind); its keys cannot be restored and read_committed consumers of it are stuck"
            " until it is aborted: %s (see the runbook 'A partition waits for a hanging"
            " transaction')",
            tp.partition,
            tp.topic,
            tp.partition,
            waited,
            abort_command(self._bootstrap, tp.topic, tp.partition, last_stable),
        )

    def _log_unsettled(self, kafka_partition: int, message: str, *args: object) -> None:
        """One line about a partition that cannot be restored yet, once it has waited a
        second, then every ten seconds at most."""
        now = self._clock.monotonic()
        since = self._unsettled_since.setdefault(kafka_partition, now)
        logged = self._unsettled_logged.get(kafka_partition, 0.0)
        if now - since > 1.0 and now - logged > 10.0:
            self._unsettled_logged[kafka_partition] = now
            log.info("partition %d: " + message, kafka_partition, *args)

    def _begin(self, lease: Lease, bounds: dict[str, tuple[int, int]]) -> None:
        """Read the partition's topics up to their ends (their last stable offsets when they
        settled: nobody else writes there any more), from where the local state store stands
        if it has the partition, else from their start."""
        kafka_partition = lease.kafka_partition
        ends = {topic: end for topic, (_, end) in bounds.items()}
        restoring = _Restoring(lease, ends, self._clock.monotonic())
        restoring.served_until = self._served(kafka_partition)
        starts = dict.fromkeys(ends, OFFSET_BEGINNING)
        resumed = None
        if self.standbys is not None:
            self.standbys.release(kafka_partition)  # ours now: restored from where it stands
        if self._disk is not None:
            resumed = self._disk.resume(kafka_partition, bounds, restoring.keys)
        if resumed is not None:
            starts, restoring.from_disk = resumed
            restoring.starts = dict(starts)
        self.tail.incremental_assign(
            [TopicPartition(topic, kafka_partition, offset) for topic, offset in starts.items()]
        )
        self._restoring[kafka_partition] = restoring
        self._check_restored(kafka_partition)

    def read(self) -> None:
        """What the tail has fetched: restore records, or commands for owned partitions."""
        # Any: a fetched message always has its topic and partition (the stubs say "or None"),
        # and this loop runs per restored record.
        # The wait goes where the records are: to the catch-up reader while it reads events
        # and no restore reads its topics (a tail waiting 20 ms a pass for nothing held each
        # catch-up to a batch per 20 ms), else to the tail while a restore is in progress.
        topics = any(not restoring.catching_up for restoring in self._restoring.values())
        events = not topics and self._catchup.reading
        if self._restoring and not events:
            messages: list[Any] = self.tail.consume(RESTORE_BATCH, RESTORE_WAIT)
        else:
            messages = self.tail.consume(TAIL_BATCH, 0.0)
        touched = self._apply_runs(messages)
        # End-of-partition events may be missed (a reassigned partition already at its end):
        # look at every restore now and then as well.
        now = self._clock.monotonic()
        if now - self._last_restore_check >= 0.5:
            self._last_restore_check = now
            touched |= set(self._restoring)
        for kafka_partition in touched:
            if kafka_partition in self._restoring:
                with log_context(generation=self._restoring[kafka_partition].lease.generation):
                    self._check_restored(kafka_partition)
        if self._disk is not None:
            self._disk.write()
        self._catchup.read(RESTORE_WAIT if events else 0.0)

    def _apply_runs(self, messages: list[Any]) -> set[int]:
        """Apply ``messages`` in runs of one topic-partition (a run is a fetched batch, often
        thousands of records): what a record needs looked up is looked up once a run, and the
        records of a run are applied in one loop (issue 42: the per-record cost of a restore).
        The partitions touched."""
        touched: set[int] = set()
        start, topic, kafka_partition = 0, "", -1
        for at, message in enumerate(messages):
            error = message.error()
            same = message.partition() == kafka_partition and message.topic() == topic
            if error is None and same:
                continue
            if topic:
                self._apply_run(topic, kafka_partition, messages[start:at])
                touched.add(kafka_partition)
            if error is None:
                start, topic, kafka_partition = at, message.topic(), message.partition()
                continue
            topic, kafka_partition = "", -1
            if error.code() == KafkaError._PARTITION_EOF:
                touched.add(message.partition())
            else:
                log.warning("reading %s: %s", message.topic(), error)
        if topic:
            self._apply_run(topic, kafka_partition, messages[start:])
            touched.add(kafka_partition)
        return touched

    def _apply_run(self, topic: str, kafka_partition: int, run: list[Any]) -> None:
        restoring = self._restoring.get(kafka_partition)
        disk = self._disk
        if disk is not None and (
            restoring is not None or topic == self._state or self._standing_by(kafka_partition)
        ):
            disk.read_run(kafka_partition, topic, run)
        if restoring is not None:
            restoring.records += len(run)
            if topic == self._items:  # most of a restore
                restoring.keys.items_read(run)
            elif topic == self._state:
                restoring.keys.states_read(run)
            elif topic == self._parked:
                restoring.keys.parked_read(run)
            return
        if topic == self._state:
            for message in run:
                self._command(message, kafka_partition)

    def _command(self, message: Any, kafka_partition: int) -> None:
        key: bytes | None = message.key()
        value: bytes | None = message.value()
        if key is not None and value is not None and records.is_command(key):
            lease = self._leases.get(kafka_partition)
            command = command_of(key, value) if lease is not None and lease.owned else None
            if command is not None:  # None: a newer release wrote it, and it is left for one
                self._notify(CommandReceived(kafka_partition, command, key))

    def _standing_by(self, kafka_partition: int) -> bool:
        return self.standbys is not None and kafka_partition in self.standbys.kept

    def _check_restored(self, kafka_partition: int) -> None:
        restoring = self._restoring[kafka_partition]
        if restoring.catching_up:
            return
        positions = self.tail.position([TopicPartition(t, kafka_partition) for t in restoring.ends])
        reached: dict[str, int] = {}
        for tp in positions:
            # Where the local state store had the topic is read already: nothing may follow.
            reached[tp.topic] = position = max(tp.offset, restoring.starts.get(tp.topic, 0))
            end = restoring.ends[tp.topic]
            if end > 0 and position < end:
                self._check_moving(restoring, positions)
                return
        if self._disk is not None:
            self._disk.reached(
                kafka_partition, {t: max(p, restoring.ends[t]) for t, p in reached.items()}
            )
        # Only commands are read from here on; snapshot and parked records are ours alone.
        # Until the catch-up ends, state records (commands) still go to the restored keys.
        self._unassign([kafka_partition], (self._layout.items, self._layout.parked))
        restoring.catching_up = True
        self._catchup.begin(kafka_partition, restoring.keys, lambda: self._owned(restoring))

    def _check_moving(self, restoring: _Restoring, positions: list[TopicPartition]) -> None:
        """A restore whose positions have not moved for ``STALLED`` seconds: say so, with where
        it stands, and refresh the metadata of its topics (a tail that kept stale metadata
        across a broker restart fetches nothing from a partition whose leader it lost; the
        broker-outage fault scenario once saw two of four restores stand still for minutes)."""
        now = self._clock.monotonic()
        read_to = tuple(tp.offset for tp in positions)
        if read_to != restoring.read_to or not restoring.moved_at:
            restoring.read_to, restoring.moved_at = read_to, now
            return
        if now - restoring.moved_at < STALLED:
            return
        restoring.moved_at = now
        log.warning(
            "partition %d: its restore has read nothing for %.0fs (at %s of %s); refreshing"
            " the metadata of its topics",
            restoring.lease.kafka_partition,
            STALLED,
            {tp.topic: tp.offset for tp in positions},
            restoring.ends,
        )
        for topic in restoring.ends:
            clients.refresh_metadata(self.tail, topic)

    def _owned(self, restoring: _Restoring) -> None:
        """``restoring`` is complete: its partition is owned, and the store is told."""
        kafka_partition = restoring.lease.kafka_partition
        if self._restoring.get(kafka_partition) is not restoring:
            return  # revoked (and maybe granted again) meanwhile
        del self._restoring[kafka_partition]
        if self._disk is not None:
            self._disk.flush()  # before the keys are taken: they read their records from it
        lease = self._leases.move(kafka_partition, LeaseState.OWNED)
        if lease is None:
            return
        log.info(
            "restored partition %d: %d key(s), %d record(s) read from the topics%s",
            kafka_partition,
            len(restoring.keys.states),
            restoring.records,
            f" after {restoring.from_disk} from the local state store" if restoring.starts else "",
        )
        took = self._clock.monotonic() - restoring.started
        self._notify(
            Restored(
                lease,
                restoring.keys,
                restoring.records,
                took,
                restoring.from_disk,
                restoring.served_until,
            )
        )

    def _unassign(self, kafka_partitions: Sequence[int], topics: Sequence[str]) -> None:
        assigned = {(tp.topic, tp.partition) for tp in self.tail.assignment()}
        drop = [
            TopicPartition(topic, kafka_partition)
            for kafka_partition in kafka_partitions
            for topic in topics
            if (topic, kafka_partition) in assigned
        ]
        if drop:
            self.tail.incremental_unassign(drop)
