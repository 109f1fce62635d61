"""``<prefix>.status``: each key's last status from its owner, and each runner's heartbeat.

Like Kafka Connect's status topic: owners write, every instance reads the whole topic, so any
instance can answer the status of any key. Records are keyed so that compaction keeps the
latest of each: ``key/<poller>/<partition>`` and ``worker/<runner id>`` (the values and the
rules live in :mod:`watukuy.control.keystatus`, pure).

Writes are plain idempotent ones, outside transactions: a status is a report, not state, and
losing one costs nothing but a refresh. :meth:`StatusTopic.publish` writes what changed since
the last write of each key, and every key at least every ``full_every`` seconds (5 minutes), plus a
heartbeat when one is due (a third of the session timeout). A key whose owner's heartbeat is
older than the session timeout shows UNASSIGNED; a clean :meth:`StatusTopic.stop` tombstones
this runner's heartbeat so its keys show UNASSIGNED at once, until their next owner writes.

Time comes from ``clock`` (seconds since the epoch), so tests need not wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka import Message as KafkaMessage

from watukuy.control.activetopics import (
    ActiveTopics,
    Published,
    TopicRecord,
    decode_topic,
    topic_record,
)
from watukuy.control.keystatus import (
    BackfillProgress,
    Heartbeat,
    KeyStatus,
    Outbox,
    StatusTable,
    encode_heartbeat,
    encode_status,
    heartbeat_key,
    key_status,
    status_key,
)
from watukuy.control.reader import Message, TopicReader
from watukuy.control.transformrecords import (
    TransformRecord,
    decode_transform,
    transform_record,
    transforms_to_record,
)
from watukuy.core.errors import Retriable, StateCorrupted, WatukuyError
from watukuy.core.inspect import PollerInspect
from watukuy.core.lifecycle import Target
from watukuy.store.kafka import clients
from watukuy.store.kafka.topics import TopicLayout

__all__ = [
    "FULL_EVERY",
    "BackfillProgress",
    "KeyStatus",
    "StatusTopic",
    "key_status",
    "key_statuses",
]

log = logging.getLogger("watukuy.control")

Held = tuple[tuple[int, ...], tuple[int, ...]]  # the Kafka partitions owned, and restoring

TopicOf = Callable[[Published], str]

# Seconds: every key is written again at least this often, which refreshes the ``lag`` its
# status shows (as of ``updated_at``; the live lag is in /metrics and /healthz). At 30 s the
# rewrites of 10,000 idle keys came due together and cost about a point of a core; Kafka
# Connect writes a task's status only when its state changes.
FULL_EVERY = 300.0


def key_statuses(
    inspections: Iterable[PollerInspect],
    *,
    now: float,
    targets: Mapping[str, Target] | None = None,
) -> list[KeyStatus]:
    """:func:`key_status` of each of ``engine.inspect()``; ``targets`` maps a poller to its
    connector's target state (RUNNING when absent)."""
    targets = targets or {}
    return [
        key_status(i, now=now, target=targets.get(i.poller, Target.RUNNING)) for i in inspections
    ]


class StatusTopic:
    """Writes this runner's statuses and heartbeats; reads everyone's. See the module's text.

    ``heartbeats=False`` leaves heartbeats to the caller (:meth:`heartbeat`, or publishes),
    for tests that drive ``clock`` themselves. ``timeout`` bounds reaching the cluster and
    each write.
    """

    def __init__(
        self,
        kafka: Mapping[str, Any],
        layout: TopicLayout,
        *,
        runner_id: str,
        session_timeout: float,
        group: str | None = None,
        clock: Callable[[], float] = time.time,
        full_every: float = FULL_EVERY,
        heartbeats: bool = True,
        timeout: float = 15.0,
        owned: Callable[[], Iterable[int]] = tuple,
        restoring: Callable[[], Iterable[int]] = tuple,
    ) -> None:
        self.topic = layout.status
        self.runner_id = runner_id
        self.session_timeout = session_timeout
        self.heartbeat_interval = session_timeout / 3
        self._kafka = kafka
        self._clock = clock
        self._timeout = timeout
        self._heartbeats = heartbeats
        self._owned = owned
        self._restoring = restoring
        self._said_held: Held | None = None  # in the last heartbeat written
        group = group or f"{layout.prefix}.runners"
        self._table = StatusTable()
        self._topics = ActiveTopics()
        self._transforms: dict[str, str | None] = {}  # poller -> fingerprint it published with
        self._reader = TopicReader(
            kafka,
            self.topic,
            group=f"{group}.status.{runner_id}",
            apply=self._apply,
            timeout=timeout,
        )
        self._outbox = Outbox(full_every)
        # Key -> the value last written of its status, and that status: reading it back
        # needs no decoding (about 20 µs of 10,000 keys' every 30 s).
        self._sent: dict[bytes, tuple[bytes, KeyStatus]] = {}
        self._last_heartbeat: float | None = None
        self._producer: Producer | None = None
        self._write = asyncio.Lock()
        self._beating: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Read the topic to its end as of now, write a first heartbeat, then keep tailing (and
        beating, unless ``heartbeats=False``)."""
        await self._reader.start()
        try:
            await self.heartbeat()
        except BaseException:
            await self._reader.stop()
            raise
        if self._heartbeats:
            self._beating = asyncio.create_task(self._beat(), name="watukuy-status-heartbeat")

    async def stop(self, *, clean: bool = True) -> None:
        """Stop writing and reading; ``clean`` tombstones this runner's heartbeat first, so its
        keys show UNASSIGNED at once rather than after the session timeout."""
        if self._beating is not None:
            self._beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beating
            self._beating = None
        try:
            if clean:
                async with self._write:
                    await self._send([(heartbeat_key(self.runner_id), None)])
        except WatukuyError as exc:
            log.warning("could not remove this runner's heartbeat from %s: %s", self.topic, exc)
        finally:
            await self._reader.stop()

    # -- reading ----------------------------------------------------------------------------

    def view(self, poller: str | None = None) -> list[KeyStatus]:
        """The keys of ``poller`` (default: all) as last read, by poller and partition key;
        UNASSIGNED where the owner's heartbeat is gone or older than the session timeout."""
        return self._table.view(poller, now=self._clock(), session_timeout=self.session_timeout)

    def pollers(self) -> list[str]:
        return self._table.pollers()

    async def caught_up(self) -> None:
        """Return once everything written to the topic before this call was read."""
        await self._reader.caught_up()

    def active_topics(self, connector: str) -> list[str]:
        """KIP-558: the topics ``connector`` published to, as listed (:mod:`.activetopics`)."""
        return self._topics.of(connector)

    def owners(self) -> dict[str, set[int]]:
        """Runner id -> the Kafka partitions it owns, for each live runner, as its heartbeats
        say: the group's assignment, for choosing standby replicas. Any thread may call it."""
        return self._table.owned(now=self._clock(), session_timeout=self.session_timeout)

    def others_claim(self) -> set[int]:
        """Every Kafka partition that another live runner's heartbeat says it holds (restored
        or restoring). Any thread may call it."""
        return self._table.claimed(
            now=self._clock(), session_timeout=self.session_timeout, but=self.runner_id
        )

    def transforms(self) -> dict[str, str | None]:
        """Each poller's transform fingerprint when it last published, as recorded
        (:mod:`.transformrecords`)."""
        return dict(self._transforms)

    def _apply(self, batch: list[Message]) -> None:
        sent = self._sent
        for message in batch:
            mine = sent.pop(message.key, None) if message.key is not None else None
            if mine is not None and mine[0] == message.value:
                self._table.put(mine[1])
                continue
            try:
                listing = None if message.key is None else decode_topic(message.key, message.value)
                if listing is not None:
                    self._topics.apply(listing)
                    continue
                transform = (
                    None if message.key is None else decode_transform(message.key, message.value)
                )
                if transform is not None:
                    self._transforms[transform.poller] = transform.fingerprint
                    continue
                self._table.apply(message.key, message.value)
            except StateCorrupted as exc:
                log.warning(
                    "%s[%d]@%d skipped: %s", self.topic, message.partition, message.offset, exc
                )

    # -- writing ----------------------------------------------------------------------------

    async def publish(
        self,
        statuses: Iterable[KeyStatus],
        owns: Callable[[str, str], bool] | None = None,
        released: Iterable[str] = (),
    ) -> int:
        """Write the statuses that changed since their last write, every one at least every
        ``full_every`` seconds, and a heartbeat if one is due; return how many statuses were
        written. Each is stamped with this runner as owner and the clock's time.

        ``released``: keys (``poller/partition``) this runner let go since it last published.
        One whose status it wrote is tombstoned if this runner still ``owns`` it (poller,
        partition key): it was removed, or a child key expired. One that moved to another
        runner is left for its new owner to overwrite."""
        async with self._write:
            now = self._clock()
            stamped = [replace(s, owner=self.runner_id, updated_at=now) for s in statuses]
            due = self._outbox.due(stamped, now)
            encoded = [(status_key(s.poller, s.partition), encode_status(s), s) for s in due]
            records: list[tuple[bytes, bytes | None]] = [(key, value) for key, value, _ in encoded]
            for left in self._outbox.released(released):
                owned = owns is None or owns(left.poller, left.partition)
                if owned and self._table.owner(left.key) == self.runner_id:
                    records.append((status_key(left.poller, left.partition), None))
            beat = (
                self._last_heartbeat is None
                or now - self._last_heartbeat >= self.heartbeat_interval
                or self._held() != self._said_held  # a rebalance: say it now
            )
            if beat:
                records.append(self._heartbeat_record(now))
            # Registered before the send: the reader may take a record in before its
            # delivery report arrives, and must then know it as this runner's own.
            sent = self._sent
            for key, value, status in encoded:
                sent[key] = (value, status)
            try:
                failed = await self._send(records)
            except BaseException:
                for key, _, _ in encoded:
                    sent.pop(key, None)
                raise
            for key, _, status in encoded:
                if key in failed:
                    sent.pop(key, None)
                else:
                    self._outbox.written(status, now)
            if beat and heartbeat_key(self.runner_id) not in failed:
                self._last_heartbeat = now
            elif beat:
                self._said_held = None  # the next publish says it again
            if failed:
                raise Retriable(
                    f"could not write {len(failed)} record(s) to {self.topic}: "
                    f"{next(iter(failed.values()))}"
                )
            return len(due)

    async def heartbeat(self) -> None:
        """Write this runner's heartbeat now."""
        async with self._write:
            now = self._clock()
            failed = await self._send([self._heartbeat_record(now)])
            if failed:
                raise Retriable(
                    f"could not write a heartbeat to {self.topic}: {failed.popitem()[1]}"
                )
            self._last_heartbeat = now

    async def remove(self, poller: str, partition: str) -> None:
        """Tombstone a key's status (its partition was removed from the poller)."""
        async with self._write:
            self._outbox.forget(poller, partition)
            failed = await self._send([(status_key(poller, partition), None)])
            if failed:
                raise Retriable(
                    f"could not remove a status from {self.topic}: {failed.popitem()[1]}"
                )

    def stale(self, key: str, now: float) -> bool:
        """Whether ``key``'s status is due to be written again whatever changed (never
        written, or last written ``full_every`` seconds before ``now``)."""
        return self._outbox.stale(key, now)

    def due_again(self, now: float) -> list[str]:
        """The keys whose status was last written ``full_every`` seconds before ``now``,
        each named once: a round looks at them whatever changed."""
        return self._outbox.due_again(now)

    async def list_topics(
        self,
        inspections: Iterable[PollerInspect],
        topic_of: TopicOf,
        fingerprints: Mapping[str, str | None] | None = None,
    ) -> None:
        """List the topics this runner's keys published to since the last call and that are
        not listed yet (``topic_of`` names a poller's events or dead-letter topic); and, with
        ``fingerprints`` (each running poller's transform fingerprint), record the transform
        of each poller that published events with another one than recorded."""
        now = self._clock()
        published = self._topics.published(inspections)
        listings = {
            TopicRecord(found.poller, topic, now)
            for found in published
            if (topic := topic_of(found)) not in self._topics.of(found.poller)
        }
        await self._write_listings(listings, "list a topic")
        if fingerprints is not None:
            events = (found.poller for found in published if found.kind == "events")
            await self._record_transforms(
                transforms_to_record(events, self._transforms, fingerprints, now)
            )

    async def reset_topics(self, connector: str) -> None:
        """KIP-558's reset: tombstone every topic listed for ``connector``."""
        listings = {TopicRecord(connector, topic, None) for topic in self.active_topics(connector)}
        await self._write_listings(listings, "reset topics")

    async def _write_listings(self, listings: set[TopicRecord], doing: str) -> None:
        """Write them, and take them into the view at once: this runner's next look must not
        list a topic again, nor miss one just reset, before it reads them back."""
        records = {
            listing: topic_record(listing.connector, listing.topic, listing.discovered)
            for listing in listings
        }
        async with self._write:
            failed = await self._send(list(records.values()))
        for listing, (key, _) in records.items():
            if key not in failed:
                self._topics.apply(listing)
        if failed:
            raise Retriable(f"could not {doing} in {self.topic}: {failed.popitem()[1]}")

    async def _record_transforms(self, records: list[TransformRecord]) -> None:
        """Write them, and take them into the view at once (as :meth:`_write_listings`)."""
        written = {record: transform_record(record) for record in records}
        async with self._write:
            failed = await self._send(list(written.values()))
        for record, (key, _) in written.items():
            if key not in failed:
                self._transforms[record.poller] = record.fingerprint
        if failed:
            raise Retriable(f"could not record a transform in {self.topic}: {failed.popitem()[1]}")

    def _held(self) -> Held:
        return tuple(sorted(self._owned())), tuple(sorted(self._restoring()))

    def _heartbeat_record(self, now: float) -> tuple[bytes, bytes]:
        held = self._said_held = self._held()
        owned, restoring = held
        return heartbeat_key(self.runner_id), encode_heartbeat(
            Heartbeat(self.runner_id, now, owned, restoring)
        )

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            if self._last_heartbeat is not None and (
                self._clock() - self._last_heartbeat < self.heartbeat_interval
            ):
                continue  # a publish just wrote one
            try:
                await self.heartbeat()
            except WatukuyError as exc:
                log.warning("heartbeat: %s", exc)

    async def _send(self, records: list[tuple[bytes, bytes | None]]) -> dict[bytes, str]:
        """Write ``records`` and wait for them; return the keys that failed, with why. Raises
        :class:`Retriable` when they are not all delivered within the timeout."""
        if not records:
            return {}
        producer = self._producer or self._new_producer()
        failed: dict[bytes, str] = {}

        def delivered(error: KafkaError | None, message: KafkaMessage) -> None:
            if error is not None:
                failed[message.key() or b""] = error.str()

        for key, value in records:
            while True:
                try:
                    producer.produce(self.topic, key=key, value=value, on_delivery=delivered)
                    break
                except BufferError:  # the local queue is full: let deliveries drain
                    await asyncio.to_thread(producer.poll, 0.1)
        remaining = await asyncio.to_thread(producer.flush, self._timeout)
        if remaining:
            raise Retriable(
                f"{remaining} record(s) to {self.topic} not delivered within {self._timeout:g}s "
                f"(Kafka at {clients.bootstrap_of(self._kafka)})"
            )
        return failed

    def _new_producer(self) -> Producer:
        # The store's producer settings (the user's properties, the logger, the partitioner),
        # without a transaction: idempotent writes are enough for reports.
        self._producer = Producer(clients.idempotent_config(self._kafka))
        return self._producer
