"""Delivering committed events to ``engine.on()`` handlers and ``engine.subscribe()`` iterators.

Events arrive from the store's feed (the memory store's outbox; on Kafka, the poller's events
topic read by a consumer group of the handlers' own) in per-key order and are queued per key.
One worker per key delivers them in order; a handler that raises is retried with backoff while
only that key waits, and after the last attempt the event is parked as ``poison`` and the key
moves on. Each event goes back to its feed once handled or parked (``done``), so a feed that
commits positions commits only past handled events: at-least-once delivery to handlers.
Subscribers get each event as it is read; it counts as done for them at once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from watukuy.core.clock import Clock
from watukuy.core.events import Event
from watukuy.core.poller import Partition, Poller
from watukuy.core.redaction import failure_text
from watukuy.core.state import ParkedItem
from watukuy.logs import log_context
from watukuy.store.base import EventFeed

log = logging.getLogger("watukuy.handlers")

Handler = Callable[[Event, "HandlerContext"], Awaitable[None] | None]
Park = Callable[[Event, str, int], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class HandlerContext:
    poller: str
    partition: Partition
    attempt: int


class Subscription:
    """``async for event in engine.subscribe(poller)``: registered as soon as it is created."""

    def __init__(self, registry: list[asyncio.Queue[Event]]) -> None:
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._registry = registry
        registry.append(self._queue)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        return await self._queue.get()

    async def aclose(self) -> None:
        if self._queue in self._registry:
            self._registry.remove(self._queue)


class Dispatcher:
    def __init__(
        self,
        pollers: dict[str, Poller],
        feeds: dict[str, EventFeed],
        *,
        partition_of: Callable[[str, str], Partition | None],
        park: Park,
        clock: Clock,
    ) -> None:
        # Own copies: a poller removed at run time keeps its handler spec for what is pending.
        self._pollers = dict(pollers)
        self._feeds = dict(feeds)
        self._readers: dict[str, asyncio.Task[None]] = {}
        self._group: asyncio.TaskGroup | None = None
        self._partition_of = partition_of
        self._park = park
        self._clock = clock
        self.handlers: dict[str, list[Handler]] = defaultdict(list)
        self.subscribers: dict[str, list[asyncio.Queue[Event]]] = defaultdict(list)
        self._pending: dict[str, deque[tuple[Event, EventFeed]]] = defaultdict(deque)
        self._working: set[str] = set()

    def on(self, poller: str, handler: Handler) -> None:
        self.handlers[poller].append(handler)
        self._listen(poller)

    def subscribe(self, poller: str) -> Subscription:
        subscription = Subscription(self.subscribers[poller])
        self._listen(poller)
        return subscription

    def _listen(self, poller: str) -> None:
        feed = self._feeds.get(poller)
        if feed is not None:
            feed.listen()

    async def dead_letter(self, item: ParkedItem) -> bool:
        """A poison event this instance cannot park: to its feed's dead letters, if it has any."""
        feed = self._feeds.get(item.poller)
        return feed is not None and await feed.dead_letter(item)

    def add(self, poller: Poller, feed: EventFeed | None) -> None:
        """A poller added (``feed``: its events) or redefined (``None``: keep its feed)."""
        self._pollers[poller.name] = poller
        if feed is None:
            return
        self._feeds[poller.name] = feed
        if self.handlers.get(poller.name) or self.subscribers.get(poller.name):
            feed.listen()
        if self._group is not None:  # running: read it like the others
            self._readers[poller.name] = self._group.create_task(self._read(feed, self._group))

    async def remove(self, poller: str) -> None:
        """Stop reading a removed poller's events; what is already queued is still delivered."""
        reader = self._readers.pop(poller, None)
        if reader is not None:
            reader.cancel()
        feed = self._feeds.pop(poller, None)
        if feed is not None:
            await feed.aclose()

    async def drain(self) -> None:
        """Deliver everything committed so far, then return (``tick()`` mode)."""
        for feed in self._feeds.values():
            for event in feed.ready():
                self._route(event, feed)
        async with asyncio.TaskGroup() as group:
            for key in [k for k, queue in self._pending.items() if queue]:
                if key not in self._working:
                    self._working.add(key)
                    group.create_task(self._work(key))

    async def run(self, stopping: asyncio.Event) -> None:
        """Deliver continuously until ``stopping`` is set (daemon mode)."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            try:
                for name, feed in self._feeds.items():
                    self._readers[name] = group.create_task(self._read(feed, group))
                await stopping.wait()
            finally:
                self._group = None
                for reader in self._readers.values():
                    reader.cancel()
                self._readers.clear()

    async def _read(self, feed: EventFeed, group: asyncio.TaskGroup) -> None:
        async for event in feed:
            self._route(event, feed)
            key = event.key
            if self._pending[key] and key not in self._working:
                self._working.add(key)
                group.create_task(self._work(key))

    def _route(self, event: Event, feed: EventFeed) -> None:
        for queue in self.subscribers.get(event.poller, ()):
            queue.put_nowait(event)
        if self.handlers.get(event.poller):
            self._pending[event.key].append((event, feed))
        else:
            feed.done(event)

    async def _work(self, key: str) -> None:
        queue = self._pending[key]
        try:
            while queue:
                event, feed = queue[0]
                with log_context(poller=event.poller, partition=event.partition, lane=event.lane):
                    await self._deliver_with_retries(event)
                queue.popleft()
                feed.done(event)
        finally:
            self._working.discard(key)
            if not queue:
                self._pending.pop(key, None)

    async def _deliver_with_retries(self, event: Event) -> None:
        spec = self._pollers[event.poller].handler
        delay = spec.backoff
        for attempt in range(1, spec.attempts + 1):
            error = await self.deliver_once(event, attempt)
            if error is None:
                return
            if attempt == spec.attempts:
                log.warning(
                    "handler failed %d times on %s #%d; parked as poison: %s",
                    attempt,
                    event.key,
                    event.sequence,
                    error,
                )
                await self._park(event, error, attempt)
                return
            await self._clock.wait(delay)
            delay = min(delay * 2, spec.max_backoff)

    async def deliver_once(self, event: Event, attempt: int = 1) -> str | None:
        """Run every handler of the event's poller once; the first error, or ``None``."""
        partition = self._partition_of(event.poller, event.partition) or Partition(event.partition)
        ctx = HandlerContext(poller=event.poller, partition=partition, attempt=attempt)
        for handler in self.handlers.get(event.poller, ()):
            try:
                returned: Any = handler(event, ctx)
                if inspect.isawaitable(returned):
                    await returned
            except Exception as exc:  # the handler's failure is recorded, never fatal
                return failure_text(exc, partition.data)  # parked: no tenant data in it
        return None
