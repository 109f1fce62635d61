"""Standby replicas, on the Kafka thread: partitions this runner does not own but keeps warm in
its local state store, so that taking one over replays only what was written since.

Every ``STANDBY_EVERY`` seconds the group's assignment is read (an admin ``describe``, answered
in the background: the thread never waits for it), and :func:`.standby_rule.standby_partitions`
says which partitions to keep. The tail reads a kept partition's three topics from where the
store stands (:meth:`.disk.DiskCopy.resume`) and the store keeps every record it reads, as a
restore does. A partition granted to this runner stops being a standby first: its restore
then starts from the store, a few records behind the end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from watukuy.core.errors import Retriable
from watukuy.store.kafka import clients
from watukuy.store.kafka.disk import DiskCopy
from watukuy.store.kafka.factory import Clock
from watukuy.store.kafka.lease import Leases
from watukuy.store.kafka.restore import RestoredKeys
from watukuy.store.kafka.settings import KafkaSettings
from watukuy.store.kafka.standby_rule import standby_partitions
from watukuy.store.kafka.topics import TopicLayout

__all__ = ["STANDBY_EVERY", "Standbys"]

log = logging.getLogger("watukuy.kafka")

STANDBY_EVERY = 5.0  # seconds between looks at the group's assignment

Watermarks = Callable[[TopicPartition], tuple[int, int]]


class Standbys:
    def __init__(
        self,
        settings: KafkaSettings,
        disk: DiskCopy,
        leases: Leases,
        clock: Clock,
        *,
        tail: Consumer,
        watermarks: Watermarks,
        me: Callable[[], str | None],
        admin: Callable[[], AdminClient] | None = None,
    ) -> None:
        """``watermarks``: a topic-partition's start and last stable offset; ``me``: this
        runner's name in the group's description (``None``: not a member now)."""
        self._settings = settings
        self._layout: TopicLayout = settings.layout
        self._disk = disk
        self._leases = leases
        self._clock = clock
        self._tail = tail
        self._watermarks = watermarks
        self._me = me
        self._make_admin = admin or (lambda: clients.admin_client(settings.kafka))
        self._admin: AdminClient | None = None
        self._asked: Future[Any] | None = None
        self._asked_at = float("-inf")
        self.kept: set[int] = set()
        """The partitions kept warm now (the tail reads them; nothing of them is owned)."""

    # -- which partitions ---------------------------------------------------------------------

    def refresh(self) -> None:
        """Ask for the group's assignment now and then; apply the answer once it came."""
        asked = self._asked
        if asked is not None:
            if not asked.done():
                return
            self._asked = None
            self._answered(asked)
            return
        now = self._clock.monotonic()
        if now - self._asked_at < STANDBY_EVERY:
            return
        self._asked_at = now
        try:
            if self._admin is None:
                self._admin = self._make_admin()
            group = self._settings.group
            self._asked = self._admin.describe_consumer_groups([group], request_timeout=5)[group]
        except KafkaException as exc:
            log.debug("cannot describe the group for standbys: %s", exc)
        if self._admin is not None:
            clients.drain_logs(self._admin)

    def _answered(self, asked: Future[Any]) -> None:
        me = self._me()
        try:
            described = asked.result(0)
        except KafkaException as exc:
            log.debug("cannot describe the group for standbys: %s", exc)
            return
        if me is None:
            return
        owned: dict[str, set[int]] = {}
        state = self._layout.state
        for member in described.members:
            name = member.group_instance_id or member.member_id
            partitions = member.assignment.topic_partitions if member.assignment else []
            owned[name] = {tp.partition for tp in partitions if tp.topic == state}
        wanted = standby_partitions(me, owned, self._settings.standby_replicas)
        wanted = {p for p in wanted if self._leases.get(p) is None}
        for kafka_partition in sorted(self.kept - wanted):
            self.release(kafka_partition)
        for kafka_partition in sorted(wanted - self.kept):
            self._keep(kafka_partition)

    # -- keeping and letting go ---------------------------------------------------------------

    def _keep(self, kafka_partition: int) -> None:
        topics = (self._layout.state, self._layout.items, self._layout.parked)
        try:
            bounds = {t: self._watermarks(TopicPartition(t, kafka_partition)) for t in topics}
        except Retriable as exc:
            log.debug("partition %d: not kept warm now: %s", kafka_partition, exc)
            return
        resumed = self._disk.resume(kafka_partition, bounds, RestoredKeys())
        starts = dict.fromkeys(topics, OFFSET_BEGINNING) if resumed is None else resumed[0]
        self._tail.incremental_assign(
            [TopicPartition(topic, kafka_partition, offset) for topic, offset in starts.items()]
        )
        self.kept.add(kafka_partition)
        log.info("partition %d: kept warm as a standby", kafka_partition)

    def release(self, kafka_partition: int) -> None:
        """Stop keeping ``kafka_partition`` (it is granted to this runner, or kept elsewhere):
        what was read of it is written to the store first."""
        if kafka_partition not in self.kept:
            return
        self.kept.discard(kafka_partition)
        self._disk.write()
        topics = (self._layout.state, self._layout.items, self._layout.parked)
        assigned = {(tp.topic, tp.partition) for tp in self._tail.assignment()}
        drop = [
            TopicPartition(topic, kafka_partition)
            for topic in topics
            if (topic, kafka_partition) in assigned
        ]
        if drop:
            self._tail.incremental_unassign(drop)
