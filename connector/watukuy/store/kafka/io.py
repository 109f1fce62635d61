"""The Kafka thread: every librdkafka call of a store happens here, one at a time, in order.

librdkafka's clients are blocking and call back from inside ``poll()``. Keeping them on one
thread makes the hard cases simple: a rebalance callback never runs while a transaction is in
flight, because both happen on this thread between each other; a revocation can finish the
pending commits of the partitions it gives back before letting them go.

The thread talks to the event loop only through :meth:`submit` (commit requests, thread-safe)
and the ``notify`` callback it was given (called on this thread; the store hops to its loop).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from watukuy.core.errors import Fenced, Retriable
from watukuy.logs import log_context
from watukuy.store.base import Command
from watukuy.store.kafka import clients, records
from watukuy.store.kafka.lease import Lease, Leases, LeaseState
from watukuy.store.kafka.restore import RestoredKeys
from watukuy.store.kafka.settings import KafkaSettings
from watukuy.store.kafka.topics import TopicLayout

log = logging.getLogger("watukuy.kafka")

# Errors that mean "your group generation is stale": the commit cannot be ours any more.
_GENERATION_ERRORS = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.FENCED_INSTANCE_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
    }
)


def _co_partitioned(layout: TopicLayout) -> tuple[str, str, str]:
    return (layout.state, layout.items, layout.parked)


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    key: bytes
    value: bytes | None
    partition: int | None = None  # None: the murmur2 partitioner places it by key
    headers: Sequence[tuple[str, bytes]] = ()


@dataclass(slots=True)
class CommitRequest:
    records: list[Record]
    leases: dict[int, int]  # Kafka partition -> generation the writer restored under
    done: Callable[[BaseException | None], None]


@dataclass(frozen=True, slots=True)
class Restored:
    lease: Lease
    keys: RestoredKeys
    records: int = 0  # read from the co-partitioned topics
    seconds: float = 0.0  # from the start of the restore to its end


@dataclass(frozen=True, slots=True)
class Assigned:
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Transacted:
    """A transaction of commit requests ended: committed, or aborted with ``error``."""

    records: int
    seconds: float
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class Revoked:
    partitions: tuple[int, ...]
    lost: bool


@dataclass(frozen=True, slots=True)
class CommandReceived:
    partition: int
    command: Command


@dataclass(frozen=True, slots=True)
class Crashed:
    error: BaseException


Notification = Restored | Revoked | CommandReceived | Crashed | Assigned | Transacted


@dataclass(slots=True)
class _Restoring:
    lease: Lease
    ends: dict[str, int]
    keys: RestoredKeys = field(default_factory=RestoredKeys)
    started: float = field(default_factory=time.monotonic)
    records: int = 0


_NOT_READY = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)


def _end_offset(tail: Consumer, tp: TopicPartition, deadline: float = 60.0) -> int:
    """The last stable offset (a read_committed consumer's high watermark), fixed now.

    Partitions of a topic created a moment ago may not have a leader yet: wait for one.
    """
    give_up = time.monotonic() + deadline
    while True:
        try:
            _low, high = tail.get_watermark_offsets(tp, timeout=10, cached=False)
            return int(high)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.code() not in _NOT_READY or time.monotonic() > give_up:
                raise Retriable(
                    f"cannot read the end of {tp.topic}[{tp.partition}]: {error.str()}"
                ) from exc
            time.sleep(0.2)


class KafkaIO:
    def __init__(self, settings: KafkaSettings, notify: Callable[[Notification], None]) -> None:
        self.settings = settings
        self._notify = notify
        self._layout = settings.layout
        self._leases = Leases()
        self._restoring: dict[int, _Restoring] = {}
        self._pending: deque[CommitRequest] = deque()
        self._plain: deque[tuple[Record, Callable[[BaseException | None], None]]] = deque()
        self._acquire: deque[int] = deque()
        self._to_restore: deque[Lease] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.ready = threading.Event()
        self.startup_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="watukuy-kafka", daemon=True)
        self._producer: Producer | None = None
        self._group: Consumer | None = None
        self._tail: Consumer | None = None
        self._offsets: Consumer | None = None
        self._written: Consumer | None = None
        self._unsettled_since: dict[int, float] = {}
        self._unsettled_logged: dict[int, float] = {}
        self._last_restore_check = 0.0
        self._last_flush = 0.0

    # -- called from the event loop ---------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        self._thread.join(timeout)

    def submit(self, request: CommitRequest) -> None:
        with self._lock:
            self._pending.append(request)

    def send_plain(self, record: Record, done: Callable[[BaseException | None], None]) -> None:
        """A record outside any transaction (commands written for another owner)."""
        with self._lock:
            self._plain.append((record, done))

    def acquire(self, partitions: Sequence[int]) -> None:
        """Without a group: take these partitions as if assigned (the CLI, group empty)."""
        with self._lock:
            self._acquire.extend(partitions)

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._producer = self._new_producer()
            self._tail = Consumer(self._tail_config())
            # Never assigned: its offset queries do not queue behind the tail's fetches.
            self._offsets = Consumer(self._tail_config())
            self._written = Consumer(self._tail_config() | {"isolation.level": "read_uncommitted"})
            if self.settings.use_group:
                self._group = Consumer(self._group_config())
                self._group.subscribe(
                    [self._layout.state],
                    on_assign=self._on_assign,
                    on_revoke=self._on_revoke,
                    on_lost=self._on_lost,
                )
        except Exception as exc:
            self.startup_error = exc
            self.ready.set()
            return
        self.ready.set()
        try:
            while not self._stopping.is_set():
                self._pump()
            self._flush()
        except Exception as exc:  # the loop must hear about it; the thread cannot go on
            log.exception("kafka thread failed")
            self._notify(Crashed(exc))
        finally:
            self._close_clients()

    def _pump(self) -> None:
        busy = bool(self._restoring or self._pending or self._to_restore)
        if self._group is not None:
            self._group.poll(0.02 if busy else 0.05)  # serves rebalance callbacks
        else:
            self._stopping.wait(0.01 if busy else 0.05)
        with self._lock:
            acquire = list(self._acquire)
            self._acquire.clear()
        for partition in acquire:
            self._to_restore.append(self._leases.grant(partition))
        waiting: deque[Lease] = deque()
        while self._to_restore:
            lease = self._to_restore.popleft()
            if self._leases.get(lease.partition) != lease:
                continue  # revoked meanwhile
            with log_context(generation=lease.generation):
                if self._settled(lease):
                    self._begin_restore(lease)
                else:
                    waiting.append(lease)
        self._to_restore = waiting
        self._read_tail()
        self._send_plain()
        if self._pending and time.monotonic() - self._last_flush >= self.settings.commit_interval:
            self._flush()

    # -- rebalance --------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)
        consumer.pause(partitions)  # the group consumer only holds leases; the tail reads
        for tp in partitions:  # restores start from the pump, outside the callback
            self._to_restore.append(self._leases.grant(tp.partition))
        if partitions:
            log.info(
                "assigned %s partition(s) %s; restoring",
                self._layout.state,
                sorted(tp.partition for tp in partitions),
            )
            self._notify(Assigned(tuple(sorted(tp.partition for tp in partitions))))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Still ours during the callback: finish what is pending so the next owner sees it.
        self._flush()
        self._release([tp.partition for tp in partitions], lost=False)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Someone else may already be writing: pending work of these keys is dropped.
        self._release([tp.partition for tp in partitions], lost=True)

    def _release(self, partitions: list[int], *, lost: bool) -> None:
        for partition in partitions:
            self._leases.move(partition, LeaseState.REVOKED)
            self._restoring.pop(partition, None)
        self._unassign_tail(partitions, _co_partitioned(self._layout))
        self._fail_unowned()
        if partitions:
            log.info(
                "%s partition(s) %s of %s",
                "lost" if lost else "revoked",
                sorted(partitions),
                self._layout.state,
            )
            self._notify(Revoked(tuple(sorted(partitions)), lost))

    # -- restore and tail -------------------------------------------------------------------

    def _settled(self, lease: Lease) -> bool:
        """No transaction is open on the partition's records, so their end is final.

        The previous owner may have been frozen after its offsets reached the coordinator and
        before it committed (KIP-447 fences only the offsets): its transaction could still
        commit. Restoring before it resolves would fork the key, so a takeover waits until the
        last stable offset reaches the high watermark: the owner committed, or the
        coordinator aborted it after ``transaction.timeout.ms``.
        """
        stable = self._require(self._offsets)
        written = self._require(self._written)
        now = time.monotonic()
        for topic in _co_partitioned(self._layout):
            tp = TopicPartition(topic, lease.partition)
            last_stable, high = _end_offset(stable, tp), _end_offset(written, tp)
            if last_stable < high:
                since = self._unsettled_since.setdefault(lease.partition, now)
                logged = self._unsettled_logged.get(lease.partition, 0.0)
                if now - since > 1.0 and now - logged > 10.0:
                    self._unsettled_logged[lease.partition] = now
                    log.info(
                        "partition %d: waiting for an open transaction of the previous owner "
                        "to end before restoring (%s: stable %d < written %d)",
                        lease.partition,
                        topic,
                        last_stable,
                        high,
                    )
                return False
        self._unsettled_since.pop(lease.partition, None)
        self._unsettled_logged.pop(lease.partition, None)
        return True

    def _begin_restore(self, lease: Lease) -> None:
        tail = self._require(self._tail)
        offsets = self._require(self._offsets)
        ends: dict[str, int] = {}
        assign: list[TopicPartition] = []
        for topic in _co_partitioned(self._layout):
            ends[topic] = _end_offset(offsets, TopicPartition(topic, lease.partition))
            assign.append(TopicPartition(topic, lease.partition, OFFSET_BEGINNING))
        tail.incremental_assign(assign)
        self._restoring[lease.partition] = _Restoring(lease, ends)
        self._check_restored(lease.partition)

    def _read_tail(self) -> None:
        tail = self._require(self._tail)
        messages = tail.consume(num_messages=2000, timeout=0.0)
        touched: set[int] = set()
        for message in messages:
            error = message.error()
            partition = message.partition()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    touched.add(partition)
                    continue
                log.warning("reading %s: %s", message.topic(), error)
                continue
            self._apply(message.topic(), partition, message.key(), message.value())
            touched.add(partition)
        # End-of-partition events may be missed (a reassigned partition already at its end):
        # look at every restore now and then as well.
        now = time.monotonic()
        if now - self._last_restore_check >= 0.5:
            self._last_restore_check = now
            touched |= set(self._restoring)
        for partition in touched:
            if partition in self._restoring:
                with log_context(generation=self._restoring[partition].lease.generation):
                    self._check_restored(partition)

    def _apply(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        restoring = self._restoring.get(partition)
        if restoring is not None:
            restoring.records += 1
            if topic == self._layout.state:
                restoring.keys.apply_state(key, value)
            elif topic == self._layout.items:
                restoring.keys.apply_item(key, value)
            elif topic == self._layout.parked:
                restoring.keys.apply_parked(key, value)
            return
        if topic == self._layout.state and value is not None and records.is_command(key):
            lease = self._leases.get(partition)
            if lease is not None and lease.owned:
                self._notify(CommandReceived(partition, records.decode_command(key, value)))

    def _check_restored(self, partition: int) -> None:
        restoring = self._restoring[partition]
        tail = self._require(self._tail)
        positions = tail.position([TopicPartition(topic, partition) for topic in restoring.ends])
        for tp in positions:
            end = restoring.ends[tp.topic]
            if end > 0 and tp.offset < end:
                return
        del self._restoring[partition]
        lease = self._leases.move(partition, LeaseState.OWNED)
        if lease is None:
            return
        # Only commands are read from here on; snapshot and parked records are ours alone.
        self._unassign_tail([partition], (self._layout.items, self._layout.parked))
        log.info("restored partition %d: %d key(s)", partition, len(restoring.keys.states))
        took = time.monotonic() - restoring.started
        self._notify(Restored(lease, restoring.keys, restoring.records, took))

    def _unassign_tail(self, partitions: Sequence[int], topics: Sequence[str]) -> None:
        tail = self._require(self._tail)
        assigned = {(tp.topic, tp.partition) for tp in tail.assignment()}
        drop = [
            TopicPartition(topic, p)
            for p in partitions
            for topic in topics
            if (topic, p) in assigned
        ]
        if drop:
            tail.incremental_unassign(drop)

    # -- transactions -----------------------------------------------------------------------

    def _take_pending(self) -> list[CommitRequest]:
        with self._lock:
            taken = list(self._pending)
            self._pending.clear()
        return taken

    def _fail_unowned(self) -> None:
        with self._lock:
            kept: deque[CommitRequest] = deque()
            for request in self._pending:
                if self._holds_all(request):
                    kept.append(request)
                else:
                    request.done(Fenced("the key's partition moved to another owner"))
            self._pending = kept

    def _holds_all(self, request: CommitRequest) -> bool:
        return all(self._leases.holds(p, g) for p, g in request.leases.items())

    def _flush(self) -> None:
        self._last_flush = time.monotonic()
        batch = []
        for request in self._take_pending():
            if self._holds_all(request):
                batch.append(request)
            else:
                request.done(Fenced("the key's partition moved to another owner"))
        if not batch:
            return
        producer = self._require(self._producer)
        started = time.monotonic()
        count = sum(len(request.records) for request in batch)
        try:
            producer.begin_transaction()
            for request in batch:
                for record in request.records:
                    self._produce(producer, record)
            self._send_offsets(producer, batch)
            if self.settings.hold_open:
                producer.flush(self.settings.transaction_timeout)
                time.sleep(self.settings.hold_open)
            producer.commit_transaction(self.settings.transaction_timeout * 3)
        except KafkaException as exc:
            outcome = self._failed_transaction(exc, batch)
            self._notify(Transacted(count, time.monotonic() - started, outcome))
            return
        for request in batch:
            request.done(None)
        self._notify(Transacted(count, time.monotonic() - started))

    def _produce(self, producer: Producer, record: Record) -> None:
        kwargs: dict[str, Any] = {"key": record.key, "value": record.value}
        if record.partition is not None:
            kwargs["partition"] = record.partition
        if record.headers:
            kwargs["headers"] = list(record.headers)
        while True:
            try:
                producer.produce(record.topic, **kwargs)
                return
            except BufferError:
                producer.poll(0.05)  # the local queue is full: let deliveries drain

    def _send_offsets(self, producer: Producer, batch: list[CommitRequest]) -> None:
        if self._group is None:
            return
        partitions = sorted({p for request in batch for p in request.leases})
        tail = self._require(self._tail)
        positions = tail.position([TopicPartition(self._layout.state, p) for p in partitions])
        offsets = [tp for tp in positions if tp.offset >= 0]
        if not offsets:  # still fenced by the coordinator: the generation travels with it
            offsets = [TopicPartition(self._layout.state, p, 0) for p in partitions]
        producer.send_offsets_to_transaction(
            offsets, self._group.consumer_group_metadata(), self.settings.transaction_timeout
        )

    def _failed_transaction(self, exc: KafkaException, batch: list[CommitRequest]) -> BaseException:
        error: KafkaError = exc.args[0]
        log.warning("transaction failed: %s", error)
        outcome: BaseException
        if error.code() in _GENERATION_ERRORS:
            outcome = Retriable(f"the group moved on while committing: {error.str()}")
        else:
            outcome = Retriable(f"kafka transaction failed: {error.str()}")
        if error.fatal():
            # Fenced or broken for good: whatever we hold may be stale. Start over.
            log.error("fatal producer error, dropping owned keys and rejoining: %s", error.str())
            outcome = Fenced(f"the producer was fenced: {error.str()}")
            self._replace_producer()
            self._rejoin()
        else:
            try:
                self._require(self._producer).abort_transaction(self.settings.transaction_timeout)
            except KafkaException as abort_exc:  # librdkafka #4849: the abort itself can fail
                log.warning("abort failed (%s); starting a new producer", abort_exc.args[0])
                self._replace_producer()
        for request in batch:
            request.done(outcome)
        return outcome

    def _rejoin(self) -> None:
        """Give up every lease and join the group again (a fresh restore follows)."""
        self._release([lease.partition for lease in self._leases.all()], lost=True)
        group = self._group
        if group is not None:
            group.unsubscribe()
            group.subscribe(
                [self._layout.state],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )

    def _replace_producer(self) -> None:
        old = self._producer
        self._producer = None
        if old is not None:
            try:
                old.flush(0)
            except KafkaException as exc:  # a fatal producer refuses even to flush
                log.info("dropping the old producer: %s", exc.args[0])
        self._producer = self._new_producer()

    def _send_plain(self) -> None:
        with self._lock:
            plain = list(self._plain)
            self._plain.clear()
        if not plain:
            return
        producer = self._require(self._producer)
        try:
            producer.begin_transaction()
            for record, _ in plain:
                self._produce(producer, record)
            producer.commit_transaction(self.settings.transaction_timeout * 3)
        except KafkaException as exc:
            error = exc.args[0]
            if error.fatal():
                self._replace_producer()
            else:
                try:
                    producer.abort_transaction(self.settings.transaction_timeout)
                except KafkaException:
                    self._replace_producer()
            for _, done in plain:
                done(Retriable(f"could not write the command: {error.str()}"))
            return
        for _, done in plain:
            done(None)

    # -- clients ----------------------------------------------------------------------------

    def _new_producer(self) -> Producer:
        s = self.settings
        suffix = s.runner_id if s.use_group else f"{s.runner_id}.cli"
        producer = Producer(
            clients.producer_config(
                s.kafka,
                transactional_id=f"{s.group}.{suffix}",
                transaction_timeout=s.transaction_timeout,
            )
        )
        producer.init_transactions(max(30.0, s.transaction_timeout * 3))
        return producer

    def _group_config(self) -> dict[str, Any]:
        s = self.settings
        return clients.group_config(
            s.kafka,
            group=s.group,
            session_timeout=s.session_timeout,
            instance_id=s.runner_id if s.static_membership else None,
        )

    def _tail_config(self) -> dict[str, Any]:
        s = self.settings
        return clients.tail_config(s.kafka, group=f"{s.group}.tail.{s.runner_id}")

    def _close_clients(self) -> None:
        if self._group is not None:
            try:
                self._group.close()  # leaves the group (a static member stays until its session)
            except KafkaException as exc:
                log.warning("closing the group consumer: %s", exc)
        for consumer in (self._tail, self._offsets, self._written):
            if consumer is not None:
                consumer.close()
        if self._producer is not None:
            self._producer.flush(5)

    @staticmethod
    def _require(client: Any) -> Any:
        if client is None:
            raise Retriable("the kafka client is being replaced")
        return client
