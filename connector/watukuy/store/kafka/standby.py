"""Standby replicas, on the Kafka thread: partitions this runner does not own but keeps warm in
its local state store, so that taking one over replays only what was written since.

Every ``STANDBY_EVERY`` seconds the group's assignment is read from the ``roster``: each live
runner's partitions as its heartbeat in ``<prefix>.status`` says (see
:meth:`watukuy.control.status.StatusTopic.owners`), and :func:`.standby_rule.standby_partitions`
says which partitions to keep. The tail reads a kept partition's three topics from where the
store stands (:meth:`.disk.DiskCopy.resume`) and the store keeps every record it reads, as a
restore does. A partition granted to this runner stops being a standby first: its restore
then starts from the store, a few records behind the end.

Not an admin ``describe_consumer_groups``, which standbys first used: in librdkafka 2.16 a
connection to the group coordinator that drops during one frees a request still in use and
aborts the process (librdkafka #4605, fix proposed in #5397); the broker-outage fault
scenario met it. The heartbeats need no request of their own, and say what each runner owns
as it sees it, a second or so after each rebalance.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from watukuy.core.errors import Retriable
from watukuy.store.kafka.disk import DiskCopy
from watukuy.store.kafka.factory import Clock
from watukuy.store.kafka.lease import Leases
from watukuy.store.kafka.restore import RestoredKeys
from watukuy.store.kafka.settings import KafkaSettings
from watukuy.store.kafka.standby_rule import standby_partitions
from watukuy.store.kafka.topics import TopicLayout

__all__ = ["STANDBY_EVERY", "Roster", "Standbys"]

log = logging.getLogger("watukuy.kafka")

STANDBY_EVERY = 5.0  # seconds between looks at the group's assignment

Watermarks = Callable[[TopicPartition], tuple[int, int]]

Roster = Callable[[], Mapping[str, set[int]]]
"""Runner id -> the Kafka partitions it owns, for each live runner of the group; called on the
Kafka thread, so it must be safe to call from any thread."""


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
        roster: Roster,
        member: Callable[[], bool],
    ) -> None:
        """``watermarks``: a topic-partition's start and last stable offset; ``member``:
        whether this runner is in the group now."""
        self._settings = settings
        self._layout: TopicLayout = settings.layout
        self._disk = disk
        self._leases = leases
        self._clock = clock
        self._tail = tail
        self._watermarks = watermarks
        self._roster = roster
        self._member = member
        self._looked_at = float("-inf")
        self.kept: set[int] = set()
        """The partitions kept warm now (the tail reads them; nothing of them is owned)."""
        self.lag = 0.0
        """Records the kept partitions were behind their topics' last stable offsets at the
        last look (every ``STANDBY_EVERY`` seconds): 0 once they are warm, NaN while one of
        them has not fetched yet."""

    # -- which partitions ---------------------------------------------------------------------

    def refresh(self) -> None:
        """Look at the group's assignment now and then, and keep what the rule says."""
        now = self._clock.monotonic()
        if now - self._looked_at < STANDBY_EVERY:
            return
        me = self._settings.runner_id
        owned = self._roster()
        if not self._member() or me not in owned:
            return  # not in the group now, or its own heartbeat not read yet: keep as it is
        self._looked_at = now
        wanted = standby_partitions(me, dict(owned), self._settings.standby_replicas)
        wanted = {p for p in wanted if self._leases.get(p) is None}
        for kafka_partition in sorted(self.kept - wanted):
            self.release(kafka_partition)
        for kafka_partition in sorted(wanted - self.kept):
            if not self._keep(kafka_partition):
                break  # the cluster does not answer now: the next look tries again
        self.lag = self._behind()

    def _behind(self) -> float:
        """How far the tail's reading of the kept partitions is from their ends, as its last
        fetches said (cached: no request, so a broker that does not answer never holds the
        thread here; for a read_committed consumer the end is the last stable offset)."""
        topics = (self._layout.state, self._layout.items, self._layout.parked)
        wanted = [TopicPartition(t, p) for p in sorted(self.kept) for t in topics]
        behind = 0.0
        try:
            for tp in self._tail.position(wanted):
                start, end = self._tail.get_watermark_offsets(tp, cached=True)
                if end < 0:
                    return float("nan")  # nothing fetched yet: not known to be warm
                at = tp.offset if tp.offset >= 0 else max(start, 0)
                behind += max(0, end - at)
        except KafkaException as exc:
            log.debug("standby lag unknown now: %s", exc)
            return self.lag
        return behind

    # -- keeping and letting go ---------------------------------------------------------------

    def _keep(self, kafka_partition: int) -> bool:
        """Start keeping ``kafka_partition``; ``False`` if its offsets could not be read."""
        topics = (self._layout.state, self._layout.items, self._layout.parked)
        try:
            bounds = {t: self._watermarks(TopicPartition(t, kafka_partition)) for t in topics}
        except Retriable as exc:
            log.debug("partition %d: not kept warm now: %s", kafka_partition, exc)
            return False
        resumed = self._disk.resume(kafka_partition, bounds, RestoredKeys())
        starts = dict.fromkeys(topics, OFFSET_BEGINNING) if resumed is None else resumed[0]
        self._tail.incremental_assign(
            [TopicPartition(topic, kafka_partition, offset) for topic, offset in starts.items()]
        )
        self.kept.add(kafka_partition)
        log.info("partition %d: kept warm as a standby", kafka_partition)
        return True

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
