"""Handlers and subscribers on the Kafka store: a poller's events topic, read back.

``engine.on()`` handlers and ``engine.subscribe()`` iterators on the Kafka store see what the
whole runner group published, not only what this process committed: each poller with one of
them registered gets a consumer of its events topic (``read_committed``, so an aborted
transaction stays unseen) in a consumer group of its own, ``<runner group>.handlers.<poller>``
by default (``KafkaSettings.handlers_group`` replaces ``<runner group>.handlers``). The group
shares the topic's partitions among the instances that registered handlers, as a sink
connector's tasks share theirs; a new group starts from the earliest record.

Delivery is at least once, in per-key order: a key lives in one Kafka partition, the
dispatcher delivers one key's events one at a time, and an offset is committed only once every
event before it was handled or parked (:class:`OffsetTracker`). After a crash or a rebalance,
what was delivered past the last commit is delivered again.

No consumer is made for a poller nobody listens to, so a runner with no handlers never joins
(and never takes records from) the handlers' group. The consumer lives in a thread of its own;
events reach the event loop through a queue, and handled ones come back as acknowledgements.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from watukuy.core.errors import Retriable
from watukuy.core.events import Event
from watukuy.core.poller import Poller
from watukuy.core.state import ParkedItem
from watukuy.serde.consumer import Decoder
from watukuy.serde.events import SchemaNotFound, UndecodableEvent
from watukuy.store.kafka import clients
from watukuy.store.kafka.settings import KafkaSettings

log = logging.getLogger("watukuy.kafka.handlers")

BATCH = 500
POLL_TIMEOUT = 0.1
COMMIT_EVERY = 1.0  # seconds between offset commits while events are being handled
MAX_IN_FLIGHT = 10_000  # events fetched and not yet handled before the consumer pauses


def handlers_feed(
    poller: str,
    settings: KafkaSettings,
    known: Callable[[str], Poller | None],
    decoder: Callable[[], tuple[Decoder, Callable[[], None]]],
    dead_letter: Callable[[ParkedItem], Awaitable[None]],
) -> KafkaEventFeed:
    """The feed of ``poller``'s events topic in its handlers' group (``known``: the poller's
    definition now, for a topic override given at run time)."""

    def topic() -> str:
        defined = known(poller)
        return settings.layout.events(poller, None if defined is None else defined.topic)

    def config() -> dict[str, object]:
        group = settings.handlers_group_of(poller)
        return handlers_config(
            settings.kafka, group=group, session_timeout=settings.session_timeout
        )

    return KafkaEventFeed(
        poller, topic=topic, config=config, decoder=decoder, dead_letter=dead_letter
    )


def handlers_config(
    kafka: Mapping[str, Any], *, group: str, session_timeout: float
) -> dict[str, Any]:
    """The handlers' consumer: a member of its own group, read_committed, offsets committed by
    hand once handled, from the earliest record when the group has none."""
    return clients.group_config(
        kafka, group=group, session_timeout=session_timeout, instance_id=None
    ) | {"auto.offset.reset": "earliest", "enable.partition.eof": False}


class OffsetTracker:
    """Which offset of each Kafka partition may be committed, as handled events come back.

    Events of one partition are fetched in offset order but handled out of it (one key may
    wait on a failing handler while the others go on), so the committable offset is the first
    one not yet handled. Pure: the feed's thread is its only user.
    """

    def __init__(self) -> None:
        self._pending: dict[int, deque[int]] = {}  # partition -> offsets fetched, in order
        self._handled: dict[int, set[int]] = {}  # handled, but behind an unhandled one
        self._position: dict[int, int] = {}  # next offset to commit, once it moved
        self._moved: set[int] = set()

    def assign(self, kafka_partition: int) -> None:
        self._pending[kafka_partition] = deque()
        self._handled[kafka_partition] = set()
        self._position.pop(kafka_partition, None)
        self._moved.discard(kafka_partition)

    def drop(self, kafka_partition: int) -> None:
        for table in (self._pending, self._handled, self._position):
            table.pop(kafka_partition, None)
        self._moved.discard(kafka_partition)

    def fetched(self, kafka_partition: int, offset: int) -> None:
        pending = self._pending.setdefault(kafka_partition, deque())
        self._handled.setdefault(kafka_partition, set())
        if not pending or offset > pending[-1]:
            pending.append(offset)

    def handled(self, kafka_partition: int, offset: int) -> None:
        """An acknowledgement; one for an offset not pending (revoked since) is ignored."""
        pending = self._pending.get(kafka_partition)
        if not pending or offset < pending[0] or offset > pending[-1]:
            return
        done = self._handled[kafka_partition]
        done.add(offset)
        while pending and pending[0] in done:
            done.discard(pending[0])
            self._position[kafka_partition] = pending.popleft() + 1
            self._moved.add(kafka_partition)

    def take(self, kafka_partitions: set[int] | None = None) -> dict[int, int]:
        """Positions that moved since the last take (of ``kafka_partitions``, or all)."""
        chosen = self._moved if kafka_partitions is None else self._moved & kafka_partitions
        out = {kafka_partition: self._position[kafka_partition] for kafka_partition in chosen}
        self._moved -= chosen
        return out

    @property
    def in_flight(self) -> int:
        return sum(len(offsets) for offsets in self._pending.values())


class KafkaEventFeed:
    """One poller's events from its topic, for the dispatcher (an ``EventFeed``).

    Nothing is read until :meth:`listen` was called and the store has started.
    """

    def __init__(
        self,
        poller: str,
        *,
        topic: Callable[[], str],
        config: Callable[[], dict[str, Any]],
        decoder: Callable[[], tuple[Decoder, Callable[[], None]]],
        dead_letter: Callable[[ParkedItem], Awaitable[None]],
    ) -> None:
        self.poller = poller
        self._topic = topic
        self._config = config
        self._decoder = decoder
        self._dead_letter = dead_letter
        self._queue: asyncio.Queue[Event | BaseException] = asyncio.Queue()
        # id(event) -> (event, partition, offset); the event is kept so its id stays unique.
        self._positions: dict[int, tuple[Event, int, int]] = {}
        self._acks: deque[tuple[int, int]] = deque()  # loop -> thread (deque appends: atomic)
        self._tracker = OffsetTracker()  # the thread's alone
        self._wanted = False
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._paused = False

    # -- the EventFeed protocol (event loop) ----------------------------------------------------

    def listen(self) -> None:
        self._wanted = True
        self._maybe_start()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """The store started: its topics exist and schemas resolve."""
        self._loop = loop
        self._maybe_start()

    def __aiter__(self) -> KafkaEventFeed:
        return self

    async def __anext__(self) -> Event:
        got = await self._queue.get()
        if isinstance(got, BaseException):
            raise got
        return got

    def ready(self) -> list[Event]:
        """What the consumer has fetched so far (``tick()`` delivers that much)."""
        out: list[Event] = []
        while not self._queue.empty():
            got = self._queue.get_nowait()
            if isinstance(got, BaseException):
                raise got
            out.append(got)
        return out

    def done(self, event: Event) -> None:
        position = self._positions.pop(id(event), None)
        if position is not None:
            self._acks.append(position[1:])

    async def dead_letter(self, item: ParkedItem) -> bool:
        await self._dead_letter(item)
        return True

    async def aclose(self) -> None:
        """Commit what was handled, leave the group."""
        self._closed = True
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.join, 60)

    # -- event loop side of the hand-off --------------------------------------------------------

    def _maybe_start(self) -> None:
        if self._wanted and self._loop is not None and self._thread is None and not self._closed:
            name = f"watukuy-handlers-{self.poller}"
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def _arrive(self, event: Event, kafka_partition: int, offset: int) -> None:
        self._positions[id(event)] = (event, kafka_partition, offset)
        self._queue.put_nowait(event)

    def _to_loop(self, callback: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(callback, *args)

    # -- the consumer's thread ------------------------------------------------------------------

    def _run(self) -> None:
        topic = self._topic()
        consumer: Consumer | None = None
        close_decoder: Callable[[], None] | None = None
        try:
            consumer = Consumer(self._config())
            decode, close_decoder = self._decoder()
            consumer.subscribe(
                [topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
            log.info("handlers of %s read %s", self.poller, topic)
            last_commit = time.monotonic()
            while not self._stopping.is_set():
                for record in consumer.consume(BATCH, POLL_TIMEOUT):
                    self._take(record, decode)
                self._take_acks()
                self._flow(consumer)
                if time.monotonic() - last_commit >= COMMIT_EVERY:
                    self._commit(consumer, self._tracker.take(), asynchronous=True)
                    last_commit = time.monotonic()
            self._take_acks()
            self._commit(consumer, self._tracker.take(), asynchronous=False)
        except Exception as exc:  # the loop must hear of it: run() ends with this error
            log.exception("the handlers' consumer of %s failed", self.poller)
            failure = Retriable(f"the handlers' consumer of {self.poller} failed: {exc}")
            self._to_loop(self._queue.put_nowait, failure)
        finally:
            if close_decoder is not None:
                close_decoder()
            if consumer is not None:
                try:
                    consumer.close()  # leaves the group: its partitions move at once
                except KafkaException as exc:
                    log.warning("closing the handlers' consumer of %s: %s", self.poller, exc)

    def _take(self, record: Message, decode: Decoder) -> None:
        error = record.error()
        if error is not None:
            if error.fatal():
                raise KafkaException(error)
            log.warning("handlers of %s: %s", self.poller, error.str())
            return
        kafka_partition, offset, value = record.partition(), record.offset(), record.value()
        if kafka_partition is None or offset is None:
            return
        self._tracker.fetched(kafka_partition, offset)
        if value is None:  # not an event (a tombstone): nothing to deliver
            self._tracker.handled(kafka_partition, offset)
            return
        try:
            event = decode(value)
        except (UndecodableEvent, SchemaNotFound) as exc:
            # It can never be delivered; waiting on it would hold the whole partition.
            log.warning("handlers of %s skip %s[%d]@%d: %s", self.poller, record.topic(),
                        kafka_partition, offset, exc)  # fmt: skip
            self._tracker.handled(kafka_partition, offset)
            return
        self._to_loop(self._arrive, event, kafka_partition, offset)

    def _take_acks(self) -> None:
        while self._acks:
            kafka_partition, offset = self._acks.popleft()
            self._tracker.handled(kafka_partition, offset)

    def _flow(self, consumer: Consumer) -> None:
        """Pause fetching while too much is waiting for handlers; the group still sees us."""
        in_flight = self._tracker.in_flight
        if not self._paused and in_flight >= MAX_IN_FLIGHT:
            consumer.pause(consumer.assignment())
            self._paused = True
        elif self._paused and in_flight < MAX_IN_FLIGHT // 2:
            consumer.resume(consumer.assignment())
            self._paused = False

    def _commit(self, consumer: Consumer, positions: dict[int, int], *, asynchronous: bool) -> None:
        if not positions:
            return
        topic = self._topic()
        offsets = [
            TopicPartition(topic, kafka_partition, offset)
            for kafka_partition, offset in sorted(positions.items())
        ]
        try:
            if asynchronous:
                consumer.commit(offsets=offsets, asynchronous=True)
            else:
                consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:  # delivered again after a restart: at least once
            error: KafkaError = exc.args[0]
            log.warning("handlers of %s: committing offsets failed: %s", self.poller, error.str())

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._tracker.assign(tp.partition)
        consumer.incremental_assign(partitions)
        if self._paused:
            consumer.pause(partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Still ours during the callback: commit what was handled so the next member starts there.
        gone = {tp.partition for tp in partitions}
        self._take_acks()
        self._commit(consumer, self._tracker.take(gone), asynchronous=False)
        for kafka_partition in gone:
            self._tracker.drop(kafka_partition)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._tracker.drop(tp.partition)
