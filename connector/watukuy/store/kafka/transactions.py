"""Transactions, on the Kafka thread: the commit requests gathered since the last flush go
out in one transaction with the group's offsets; plain records (commands for another owner,
schemas) in one of their own.

A request is sent only while every lease it was made under is still held; otherwise it fails
with :class:`Fenced` and nothing of it is written. A fatal producer error replaces the
producer and gives every lease up (``on_fatal``): what this instance holds may be stale.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from watukuy.core.errors import Fenced, Retriable
from watukuy.store.apply import PageRuns
from watukuy.store.kafka import clients
from watukuy.store.kafka.disk import DiskCopy
from watukuy.store.kafka.factory import ClientFactory, Clock, new_producer
from watukuy.store.kafka.lease import Leases
from watukuy.store.kafka.notifications import CommitRequest, Notify, Record, Transacted
from watukuy.store.kafka.served import MARK_EVERY, Served, encode
from watukuy.store.kafka.settings import KafkaSettings

__all__ = ["Requests", "Transactions", "holds_all"]

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

Done = Callable[[BaseException | None], None]

SEND_OFFSETS_GRACE = 5.0  # seconds past its own timeout before send_offsets is given up


class Requests:
    """What the event loop asks of the thread, queued until the thread takes it (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: deque[CommitRequest] = deque()
        self._plain: deque[tuple[Record, Done]] = deque()
        # Checked where transactions are made: a page in flight still pending when the
        # transaction of the page it builds on fails must not make the next one.
        self._runs = PageRuns()

    def admit(self, request: CommitRequest) -> bool:
        """Whether every page in flight of ``request`` builds on pages that were committed."""
        with self._lock:
            admitted = all(self._runs.admits(key, run) for key, run in request.runs)
        if not admitted:
            self.refuse(request, Retriable("a page it builds on was not committed"))
        return admitted

    def refuse(self, request: CommitRequest, error: BaseException) -> None:
        """Answer ``request`` with ``error``; the pages in flight after its pages are refused."""
        with self._lock:
            for key, run in request.runs:
                self._runs.refused(key, run)
        request.done(error)

    def submit(self, request: CommitRequest) -> None:
        with self._lock:
            self._pending.append(request)

    def send_plain(self, record: Record, done: Done) -> None:
        with self._lock:
            self._plain.append((record, done))

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def take_pending(self) -> list[CommitRequest]:
        with self._lock:
            taken = list(self._pending)
            self._pending.clear()
        return taken

    def take_plain(self) -> list[tuple[Record, Done]]:
        with self._lock:
            taken = list(self._plain)
            self._plain.clear()
        return taken

    def fail_unowned(self, leases: Leases) -> None:
        """Fail the pending requests made under a lease no longer held."""
        with self._lock:
            kept: deque[CommitRequest] = deque()
            for request in self._pending:
                if holds_all(leases, request):
                    kept.append(request)
                else:
                    for key, run in request.runs:
                        self._runs.refused(key, run)
                    request.done(Fenced("the key's partition moved to another owner"))
            self._pending = kept


def holds_all(leases: Leases, request: CommitRequest) -> bool:
    return all(leases.holds(kafka_partition, g) for kafka_partition, g in request.leases.items())


class Transactions:
    def __init__(
        self,
        settings: KafkaSettings,
        leases: Leases,
        requests: Requests,
        notify: Notify,
        clock: Clock,
        factory: ClientFactory,
        *,
        producer: Producer,
        group: Consumer | None,
        tail: Consumer,
        on_fatal: Callable[[], None],
        disk: DiskCopy | None = None,
        served: Callable[[], Served | None] = lambda: None,
    ) -> None:
        """``disk``: the local state store's copy, given each committed transaction.
        ``served``: what the engine last said it served (:mod:`.served`), which every
        transaction's offsets carry."""
        self.settings = settings
        self._served = served
        self._marked: float | None = None  # the ``until`` the last transaction's offsets said
        self._marked_at = float("-inf")
        self._disk = disk
        self._leases = leases
        self._requests = requests
        self._notify = notify
        self._clock = clock
        self._factory = factory
        self._producer: Producer | None = producer
        self._group = group  # None: no group, no offsets to send (the CLI)
        self._tail = tail  # its positions on the state topic are the offsets sent
        self._on_fatal = on_fatal
        self._last_flush = 0.0

    def use_group(self, group: Consumer) -> None:
        """Send offsets with this group consumer from now on (it replaced a dead one)."""
        self._group = group

    @property
    def due(self) -> bool:
        """Requests are pending and the commit interval has passed since the last flush."""
        interval = self.settings.commit_interval
        return self._requests.pending and self._clock.monotonic() - self._last_flush >= interval

    def flush(self) -> None:
        """The pending requests still held, in one transaction; the others fail fenced."""
        self._last_flush = self._clock.monotonic()
        batch = []
        requests = self._requests
        for request in requests.take_pending():
            if not holds_all(self._leases, request):
                requests.refuse(request, Fenced("the key's partition moved to another owner"))
            elif requests.admit(request):
                batch.append(request)
        if not batch:
            return
        try:
            producer = self._current()
        except Retriable as exc:
            for request in batch:
                requests.refuse(request, exc)
            return
        started = self._clock.monotonic()
        count = sum(len(request.records) for request in batch)
        timeout = self.settings.transaction_timeout
        disk = self._disk
        reported = {} if disk is None else disk.last_records(_records_of(batch))
        delivered: dict[tuple[str, int], int] = {}
        try:
            producer.begin_transaction()
            for request in batch:
                if reported:
                    for record in request.records:
                        where = reported.get(id(record))
                        _produce(producer, record, None if where is None else _report(delivered))
                else:
                    _produce_all(producer, request.records)
            said = self._send_offsets(producer, batch)
            producer.commit_transaction(timeout * 3)
        except KafkaException as exc:
            outcome = self._failed(exc, batch, producer)
            self._notify(Transacted(count, self._clock.monotonic() - started, outcome))
            return
        if disk is not None:
            # Before the store hears of it: a key the store lets go of is read back from disk.
            producer.poll(0)  # the delivery reports, if the commit's flush did not serve them
            disk.committed(_records_of(batch), delivered)
        self._said(said)
        for request in batch:
            request.done(None)
        self._notify(Transacted(count, self._clock.monotonic() - started))

    def _said(self, until: float | None) -> None:
        if until is not None:
            self._marked, self._marked_at = until, self._clock.monotonic()

    def mark(self, *, now: bool = False) -> None:
        """Say what was served in a transaction of offsets alone, when no transaction said it
        for :data:`~.served.MARK_EVERY` seconds and it moved on (``now``: whenever it moved
        on: the partitions are about to go)."""
        if self._group is None or self._requests.pending:
            return  # the next flush carries it
        served = self._served()
        if served is None or (self._marked is not None and served.until <= self._marked):
            return
        if not now and self._clock.monotonic() - self._marked_at < MARK_EVERY:
            return
        if not self._marked_partitions(served):
            return
        try:
            producer = self._current()
            producer.begin_transaction()
            said = self._send_offsets(producer, [])
            producer.commit_transaction(self.settings.transaction_timeout * 3)
        except Retriable as exc:
            log.info("saying what was served: %s", exc)
            return
        except KafkaException as exc:
            self._failed(exc, [], producer)
            return
        self._said(said)

    def _marked_partitions(self, served: Served) -> list[int]:
        """The partitions whose keys ``served`` speaks of and that are still held as then."""
        return [p for p, generation in served.owned.items() if self._leases.holds(p, generation)]

    def _send_offsets(self, producer: Producer, batch: list[CommitRequest]) -> float | None:
        """Send the offsets of the batch's partitions and of those the engine's word on what
        was served covers, that word with them; return what it said (``None``: nothing)."""
        if self._group is None:
            return None
        said_until = None
        state = self.settings.layout.state
        served = self._served()
        marked = set() if served is None else set(self._marked_partitions(served))
        kafka_partitions = sorted(
            {kafka_partition for request in batch for kafka_partition in request.leases} | marked
        )
        positions = self._tail.position(
            [TopicPartition(state, kafka_partition) for kafka_partition in kafka_partitions]
        )
        # A partition the tail has read nothing of yet (an empty one) has no position: the
        # group never reads from these offsets (they fence, and carry what was served), so
        # its start stands in where the word on what was served must go with it.
        offsets = [
            tp if tp.offset >= 0 else TopicPartition(state, tp.partition, 0)
            for tp in positions
            if tp.offset >= 0 or tp.partition in marked
        ]
        if not offsets:  # still fenced by the coordinator: the generation travels with it
            offsets = [
                TopicPartition(state, kafka_partition, 0) for kafka_partition in kafka_partitions
            ]
        if served is not None and marked:
            # Each offset commit replaces its partition's metadata: a partition the engine's
            # word does not cover (restored since) says nothing, which a restore reads as
            # "every stored due time stands".
            said = encode(served.until)
            offsets = [
                TopicPartition(tp.topic, tp.partition, tp.offset, said)
                if tp.partition in marked
                else tp
                for tp in offsets
            ]
            said_until = served.until
        timeout = self.settings.transaction_timeout
        # librdkafka's send_offsets_to_transaction can block past its timeout, for good, when
        # the group coordinator it cached went away (librdkafka #5456, #5511; the broker-outage
        # fault scenario met it after a broker SIGKILL, and the runner stalled). It runs on a
        # thread of its own, and is given up if it has not returned well after its timeout:
        # the transaction then fails as a timeout does, and the producer is replaced (the
        # stuck one never commits; its transaction ends at its timeout). The stuck call keeps
        # its thread, a daemon, so that it never holds the process at exit.
        metadata = self._group.consumer_group_metadata()
        call = _Call(lambda: producer.send_offsets_to_transaction(offsets, metadata, timeout))
        if not call.finished(timeout + SEND_OFFSETS_GRACE):
            raise KafkaException(
                KafkaError(
                    KafkaError._TIMED_OUT,
                    f"send_offsets_to_transaction did not return within {timeout:g}s and"
                    f" {SEND_OFFSETS_GRACE:g}s more (librdkafka #5456)",
                )
            )
        return said_until

    def _failed(
        self, exc: KafkaException, batch: list[CommitRequest], producer: Producer
    ) -> BaseException:
        error: KafkaError = exc.args[0]
        log.warning("transaction failed: %s", error)
        outcome: BaseException
        if error.code() in _GENERATION_ERRORS:
            outcome = Retriable(f"the group moved on while committing: {error.str()}")
        else:
            outcome = Retriable(f"kafka transaction failed: {error.str()}")
        fatal = error.fatal()
        if fatal:
            # Fenced or broken for good: whatever we hold may be stale. Start over.
            log.error("fatal producer error, dropping owned keys and rejoining: %s", error.str())
            outcome = Fenced(f"the producer was fenced: {error.str()}")
        elif error.code() in clients.UNREACHABLE_CODES:
            # The cluster was out of reach: an abort would wait for it in vain. (A producer
            # that lived through that can also keep a dead broker as its group coordinator and
            # block in send_offsets_to_transaction past any timeout: librdkafka #5456, #5511.)
            # The coordinator aborts what it left open at the transaction timeout.
            log.warning("the cluster was out of reach; starting a new producer")
        else:
            self._abort(producer)
        # Never write again with a producer whose transaction did not commit: see
        # clients.fresh_transactional_id (a skipped abort marker once made 94 events twice).
        self.replace_producer()
        for request in batch:
            self._requests.refuse(request, outcome)
        if fatal:
            self._on_fatal()  # after the batch is answered: the rejoin may end the thread
        return outcome

    def _abort(self, producer: Producer) -> None:
        """End the failed transaction now, so that readers of its partitions need not wait for
        its timeout; the producer is replaced after, whatever comes of it."""
        try:
            producer.abort_transaction(self.settings.transaction_timeout)
        except KafkaException as exc:  # librdkafka #4849: the abort itself can fail
            log.warning("abort failed (%s); its transaction ends at its timeout", exc.args[0])

    def replace_producer(self) -> None:
        """Drop the producer for a new one: made now, or, when the cluster does not answer
        (its init_transactions times out), at the next transaction."""
        old = self._producer
        self._producer = None
        if old is not None:
            try:
                # What it still holds must never reach the broker: sent once the cluster is
                # back, after its transaction ended, it could open one that nobody ends, and a
                # takeover of its partition would wait for good (fault scenario 4 met it).
                old.purge(in_queue=True, in_flight=True, blocking=False)
                old.flush(0)
            except KafkaException as exc:  # a fatal producer refuses even to flush
                log.info("dropping the old producer: %s", exc.args[0])
        try:
            self._current()
        except Retriable as exc:
            log.warning("%s; the next transaction tries again", exc)

    def _current(self) -> Producer:
        if self._producer is None:
            try:
                self._producer = new_producer(self.settings, self._factory)
            except KafkaException as exc:
                raise Retriable(f"kafka: no producer yet: {exc.args[0]}") from exc
        return self._producer

    def send_plain(self) -> None:
        """The plain records asked for, in one transaction of their own."""
        plain = self._requests.take_plain()
        if not plain:
            return
        try:
            producer = self._current()
        except Retriable as exc:
            for _, done in plain:
                done(exc)
            return
        timeout = self.settings.transaction_timeout
        try:
            producer.begin_transaction()
            for record, _ in plain:
                _produce(producer, record)
            producer.commit_transaction(timeout * 3)
        except KafkaException as exc:
            error = exc.args[0]
            if not error.fatal() and error.code() not in clients.UNREACHABLE_CODES:
                self._abort(producer)
            self.replace_producer()  # as in _failed: a failed transaction's producer is done
            for _, done in plain:
                done(Retriable(f"could not write to {plain[0][0].topic}: {error.str()}"))
            return
        for _, done in plain:
            done(None)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5)


class _Call:
    """A blocking client call on a daemon thread of its own (about 0.1 ms to start, once a
    transaction), which the caller may stop waiting for."""

    def __init__(self, call: Callable[[], None]) -> None:
        self._call = call
        self._done = threading.Event()
        self._error: BaseException | None = None
        threading.Thread(target=self._run, name="watukuy-send-offsets", daemon=True).start()

    def _run(self) -> None:
        try:
            self._call()
        except BaseException as exc:  # handed to the waiting thread, raised there
            self._error = exc
        finally:
            self._done.set()

    def finished(self, timeout: float) -> bool:
        """Whether the call returned within ``timeout`` seconds; raises what it raised."""
        if not self._done.wait(timeout):
            return False
        if self._error is not None:
            raise self._error
        return True


def _records_of(batch: list[CommitRequest]) -> Iterator[Record]:
    for request in batch:
        yield from request.records


def _report(delivered: dict[tuple[str, int], int]) -> Callable[[Any, Any], None]:
    """A delivery callback noting the offset after the record, by topic and partition."""

    def report(error: Any, message: Any) -> None:
        if error is None:
            delivered[(message.topic(), message.partition())] = message.offset() + 1

    return report


def _produce_all(producer: Producer, records: list[Record]) -> None:
    """Every record of a request, none reporting its delivery: :func:`_produce`'s common case
    in one loop (a transaction's records are two a changed item, and a call and its tests per
    record cost about 0.3 µs an item)."""
    produce = producer.produce
    for record in records:
        topic, key, value, kafka_partition, headers = record
        if kafka_partition is None:
            kafka_partition = -1
        try:
            if headers:
                # Every argument by position (callback, on_delivery, timestamp: None, None
                # and 0 are their defaults): the client parses keywords by name on each call,
                # 0.36 µs more an event record (0.89 -> 1.25 µs, 7 headers, timeit).
                listed = headers if isinstance(headers, list) else list(headers)
                produce(topic, value, key, kafka_partition, None, None, 0, listed)
            else:
                produce(topic, value, key, kafka_partition)
        except BufferError:  # the local queue is full: as _produce, which waits for room
            _produce(producer, record)


def _produce(
    producer: Producer, record: Record, on_delivery: Callable[[Any, Any], None] | None = None
) -> None:
    # Positional arguments and no kwargs dict or headers copy: this runs for every record of a
    # transaction (about 0.85 µs an event less, measured). -1 is librdkafka's "no partition
    # given": the murmur2 partitioner places the record by key.
    kafka_partition = -1 if record.kafka_partition is None else record.kafka_partition
    headers: list[tuple[str, str | bytes | None]] | None = None
    if record.headers:
        # The client takes a list or a dict, not any sequence; Outgoing already builds lists.
        given = record.headers
        headers = given if isinstance(given, list) else list(given)
    while True:
        try:
            if on_delivery is not None:
                producer.produce(
                    record.topic,
                    record.value,
                    record.key,
                    kafka_partition,
                    on_delivery=on_delivery,
                    headers=headers,
                )
            elif headers:
                producer.produce(
                    record.topic, record.value, record.key, kafka_partition, headers=headers
                )
            else:
                producer.produce(record.topic, record.value, record.key, kafka_partition)
            return
        except BufferError:
            producer.poll(0.05)  # the local queue is full: let deliveries drain
