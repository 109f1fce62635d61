"""A whole compacted topic, read on a thread of its own and applied on the event loop.

This is the shape of Kafka Connect's ``KafkaBasedLog``, which its config and status stores are
built on: every instance reads every partition from the beginning (``read_committed``, assigned
rather than subscribed, nothing ever committed), so each holds the whole latest view.

librdkafka's consumer blocks, so it lives on one thread; records cross to the event loop in
batches through ``call_soon_threadsafe``, which keeps their order (offset order per partition).
:meth:`TopicReader.start` returns once every record written before it was applied;
:meth:`TopicReader.caught_up` does the same at any later moment, which is how a writer reads
its own write back before answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from watukuy.core.errors import WatukuyError
from watukuy.store.kafka import clients
from watukuy.store.kafka.offsets import OFFSET_END, offsets_now

__all__ = ["Message", "MissingTopic", "TopicReader"]

log = logging.getLogger("watukuy.control")

# A just-created topic's partitions answer these until they have a leader.
_NOT_READY = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
)
_POLL = 0.05  # seconds a consume waits: how soon a stop or a catch-up request is noticed
_BATCH = 1000


class MissingTopic(WatukuyError):
    """The topic does not exist (no runner has created the topics of this prefix yet)."""


@dataclass(frozen=True, slots=True)
class Message:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(slots=True)
class _CatchUp:
    future: asyncio.Future[None]
    partitions: Sequence[int] | None  # None: every partition
    ends: dict[int, int] | None = None  # fixed on the thread when it takes the request
    then: Callable[[], None] | None = None  # run on the loop just before the future resolves


class TopicReader:
    """Reads ``topic`` from the beginning and calls ``apply(messages)`` on the event loop.

    ``group`` only names the consumer (it never joins the group nor commits). ``timeout``
    bounds reaching the cluster at start: past it, start ends in :func:`clients.unreachable`.
    """

    def __init__(
        self,
        kafka: Mapping[str, Any],
        topic: str,
        *,
        group: str,
        apply: Callable[[list[Message]], None],
        timeout: float = 15.0,
    ) -> None:
        self.topic = topic
        self._kafka = kafka
        self._group = group
        self._apply = apply
        self._timeout = timeout
        self._requests: queue.SimpleQueue[_CatchUp] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._partitions: int | None = None

    @property
    def partitions(self) -> int:
        """How many partitions the topic has (known once started)."""
        if self._partitions is None:
            raise RuntimeError("the reader is not started")
        return self._partitions

    async def start(self, on_caught_up: Callable[[], None] | None = None) -> None:
        """Start reading; return once everything written before this call was applied.

        ``on_caught_up`` runs on the loop right after the last of those records was applied
        and before any later one: the moment a view becomes current (a coroutine resuming
        from ``start`` may find later records applied already).
        """
        if self._thread is not None:
            raise RuntimeError("the reader is already started")
        self._loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = self._loop.create_future()
        self._requests.put(_CatchUp(started, None, then=on_caught_up))
        self._thread = threading.Thread(
            target=self._run, name=f"watukuy-read-{self.topic}", daemon=True
        )
        self._thread.start()
        try:
            await started
        except BaseException:
            await self.stop()
            raise

    async def caught_up(self, partitions: Iterable[int] | None = None) -> None:
        """Return once every record written to ``partitions`` (default: all) before this call
        was applied."""
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            raise RuntimeError("the reader is not running")
        future: asyncio.Future[None] = self._loop.create_future()
        self._requests.put(_CatchUp(future, None if partitions is None else list(partitions)))
        await future

    async def caught_up_to(self, ends: Mapping[int, int]) -> None:
        """Return once the records of each partition before offset ``ends[partition]`` were
        applied (a writer waiting for its own records: it knows their offsets)."""
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            raise RuntimeError("the reader is not running")
        future: asyncio.Future[None] = self._loop.create_future()
        self._requests.put(_CatchUp(future, list(ends), ends=dict(ends)))
        await future

    async def stop(self) -> None:
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            await asyncio.to_thread(thread.join)

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        pending: list[_CatchUp] = []
        consumer: Consumer | None = None
        try:
            consumer = Consumer(clients.tail_config(self._kafka, group=self._group))
            self._assign(consumer)
            reached: dict[int, int] = {}
            while not self._stopping.is_set():
                pending += self._take_requests(consumer)
                self._read(consumer, reached)
                if pending:
                    pending = self._resolve(consumer, pending, reached)
        except Exception as exc:
            if not isinstance(exc, WatukuyError):
                log.exception("reading %s failed", self.topic)
            for request in [*pending, *self._drain()]:
                self._settle(request.future, exc)
        finally:
            if consumer is not None:
                consumer.close()
            for request in [*pending, *self._drain()]:
                self._settle(request.future, RuntimeError(f"stopped reading {self.topic}"))

    def _assign(self, consumer: Consumer) -> None:
        try:
            metadata = consumer.list_topics(self.topic, timeout=self._timeout)
        except KafkaException as exc:
            raise clients.translated(
                exc, self._kafka, self._timeout, f"reading topic '{self.topic}'"
            ) from exc
        described = metadata.topics.get(self.topic)
        error = None if described is None else described.error
        if described is None or (
            error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        ):
            raise MissingTopic(f"topic '{self.topic}' does not exist")
        if error is not None:
            raise WatukuyError(f"cannot read topic '{self.topic}': {error.str()}")
        self._partitions = len(described.partitions)
        consumer.assign(
            [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in described.partitions]
        )

    def _take_requests(self, consumer: Consumer) -> list[_CatchUp]:
        taken = []
        for request in self._drain():
            if request.ends is not None:  # fixed by the caller
                taken.append(request)
                continue
            wanted = request.partitions
            if wanted is None:
                wanted = range(self.partitions)
            try:
                request.ends = self._ends(consumer, wanted)
            except WatukuyError as exc:  # this request fails; reading goes on
                self._settle(request.future, exc)
                continue
            taken.append(request)
        return taken

    def _drain(self) -> list[_CatchUp]:
        taken = []
        while True:
            try:
                taken.append(self._requests.get_nowait())
            except queue.Empty:
                return taken

    def _ends(self, consumer: Consumer, partitions: Iterable[int]) -> dict[int, int]:
        """The last stable offsets now (a read_committed consumer's ends), all asked at once
        (:mod:`watukuy.store.kafka.offsets`: one by one, each queued behind this consumer's
        fetch, 32 partitions took 1.4 s).

        A topic created a moment ago may not have its leaders yet: wait for them.
        """
        wanted = [(self.topic, p) for p in partitions]
        ends: dict[int, int] = {}
        give_up = time.monotonic() + self._timeout
        while True:
            try:
                answer = offsets_now(consumer, wanted, OFFSET_END, self._timeout)
            except KafkaException as exc:  # the whole request: no broker answered it
                error = exc.args[0] if exc.args else None
                if not isinstance(error, KafkaError) or error.code() not in _NOT_READY:
                    raise self._unreadable(exc) from exc
            else:
                ends.update((p, end) for (_, p), end in answer.offsets.items())
                if not answer.errors:
                    return ends
                wanted = list(answer.errors)
                error = next(iter(answer.errors.values()))
                if error.code() not in _NOT_READY:
                    raise self._unreadable(KafkaException(error))
            if time.monotonic() > give_up:
                raise self._unreadable(KafkaException(error))
            if self._stopping.wait(0.1):
                raise WatukuyError(f"stopped reading {self.topic}")

    def _unreadable(self, exc: KafkaException) -> WatukuyError:
        return clients.translated(
            exc, self._kafka, self._timeout, f"reading the end of topic '{self.topic}'"
        )

    def _read(self, consumer: Consumer, reached: dict[int, int]) -> None:
        batch: list[Message] = []
        for message in consumer.consume(num_messages=_BATCH, timeout=_POLL):
            error = message.error()
            partition, offset = message.partition(), message.offset()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    # librdkafka's logger: the same error shows once per period, not per poll.
                    clients.librdkafka_logger().warning("reading %s: %s", self.topic, error.str())
                elif partition is not None and offset is not None:
                    reached[partition] = max(reached.get(partition, 0), offset)
                continue
            if partition is None or offset is None:
                continue  # not a record of a partition
            batch.append(Message(partition, offset, message.key(), message.value()))
            reached[partition] = max(reached.get(partition, 0), offset + 1)
        if batch and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody reads any more
                self._loop.call_soon_threadsafe(self._deliver, batch)

    def _resolve(
        self, consumer: Consumer, pending: list[_CatchUp], reached: dict[int, int]
    ) -> list[_CatchUp]:
        # The position also moves past transaction markers and aborted records.
        for tp in consumer.position(
            [TopicPartition(self.topic, p) for p in range(self.partitions)]
        ):
            if tp.offset >= 0:
                reached[tp.partition] = max(reached.get(tp.partition, 0), tp.offset)
        waiting = []
        for request in pending:
            assert request.ends is not None
            if all(reached.get(p, 0) >= end for p, end in request.ends.items() if end > 0):
                # Queued after the batches it waited for, so it resolves after they applied.
                self._settle(request.future, None, request.then)
            else:
                waiting.append(request)
        return waiting

    def _settle(
        self,
        future: asyncio.Future[None],
        error: BaseException | None,
        then: Callable[[], None] | None = None,
    ) -> None:
        loop = self._loop
        if loop is None:
            return

        def settle() -> None:
            if future.done():
                return
            if error is None:
                if then is not None:
                    then()
                future.set_result(None)
            else:
                future.set_exception(error)

        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle)

    # -- the event loop ---------------------------------------------------------------------

    def _deliver(self, batch: list[Message]) -> None:
        try:
            self._apply(batch)
        except Exception:  # a bad record must not stop the reader; the appliers log it
            log.exception("applying records of %s failed", self.topic)
