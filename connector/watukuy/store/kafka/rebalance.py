"""Rebalance and leases, on the Kafka thread: the group consumer's callbacks.

Holding Kafka partition p of ``<prefix>.state`` is owning every key that hashes to p
(:mod:`.lease`). An assignment grants a lease per partition and queues its restore; a
revocation first finishes what is pending (the partitions are still ours during the callback),
then gives the leases up; a lost assignment gives them up at once, failing the pending work of
their keys, since someone else may already be writing them.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from watukuy.core.errors import WatukuyError
from watukuy.store.kafka.factory import SYSTEM_CLOCK, Clock
from watukuy.store.kafka.lease import Leases, LeaseState
from watukuy.store.kafka.notifications import Assigned, Notify, Revoked
from watukuy.store.kafka.tail import Restores
from watukuy.store.kafka.topics import TopicLayout
from watukuy.store.kafka.transactions import Requests

__all__ = ["GroupFailed", "Membership"]

log = logging.getLogger("watukuy.kafka")


class Rejoin(enum.Enum):
    """How :meth:`Membership.poll` starts over: restore afresh what the group assigns this
    instance, or join with a new consumer first."""

    RESTORE = "restore"
    NEW_MEMBER = "new member"
    REBALANCE = "new dynamic member"
    """A new consumer without ``group.instance.id``: a static member's new consumer gets its
    old assignment back without a rebalance, and a partition the group assigns to no member
    (withheld for a cooperative second round that a crashed member never started) needs one."""


class GroupFailed(WatukuyError):
    """The group consumer failed for good: this instance cannot hold keys any more and stops."""


DUPLICATE_RUNNER = (
    "another instance is running with this runner.id (its group.instance.id): this one "
    "stops; give every instance its own runner.id"
)


def _fenced_instance(error: KafkaError) -> bool:
    # librdkafka wraps it in a _FATAL error whose text names the cause.
    return error.code() == KafkaError.FENCED_INSTANCE_ID or "group.instance.id" in error.str()


class Membership:
    """This instance's leases, and, with a group, its membership of the runners' group."""

    def __init__(
        self,
        layout: TopicLayout,
        leases: Leases,
        notify: Notify,
        *,
        group: Consumer | None,
        restores: Restores,
        requests: Requests,
        flush: Callable[[], None],
        rebuild: Callable[[Consumer, bool], Consumer] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        fence_window: float = 0.0,
    ) -> None:
        self._layout = layout
        self._leases = leases
        self._notify = notify
        self.group = group  # None: partitions are acquired without a group (the CLI)
        self._restores = restores
        self._requests = requests
        self._flush = flush  # sends what is pending, while the partitions are still ours
        self._rebuild = rebuild  # a new group consumer in place of a dead one
        self._clock = clock
        self._fence_window = fence_window
        self._fenced_at: float | None = None
        self._acquired: set[int] = set()  # without a group: what acquire() took
        self._wanted: Rejoin | None = None  # a rejoin to carry out at the next poll

    def poll(self, timeout: float) -> None:
        """Serve the group's callbacks. Its partitions are paused, so a poll returns nothing
        but errors; a fatal one (code ``_FATAL``, its ``fatal()`` flag unset) kills the
        consumer: see :meth:`_dead`."""
        group = self.group
        if group is None:
            return
        message = group.poll(timeout)
        error = None if message is None else message.error()
        if error is not None and (error.fatal() or error.code() == KafkaError._FATAL):
            self._dead(group, error)

    def settle(self) -> None:
        """Carry out a rejoin asked for since the last call, out of the group's callbacks
        (see :meth:`rejoin`). The pump calls it after each :meth:`poll`."""
        wanted, self._wanted = self._wanted, None
        if wanted is Rejoin.RESTORE:
            self._grant(self._assigned())
        elif wanted is not None and self.group is not None:
            self._replace_member(self.group, static=wanted is Rejoin.NEW_MEMBER)

    def _dead(self, group: Consumer, error: KafkaError) -> None:
        """A static member fenced by a member with its ``group.instance.id`` rejoins with a new
        consumer, once: a JoinGroup retried across a broker restart can fence this instance's
        own earlier attempt. Fenced again within ``fence_window``, another process has this
        runner.id: the two would fence each other forever, so this one stops, saying so.
        Any other fatal error stops the instance too (:class:`GroupFailed`)."""
        fenced = _fenced_instance(error)
        if not fenced or self._rebuild is None:
            raise GroupFailed(
                DUPLICATE_RUNNER if fenced else f"the group consumer failed: {error.str()}"
            )
        now = self._clock.monotonic()
        if self._fenced_at is not None and now - self._fenced_at < self._fence_window:
            raise GroupFailed(DUPLICATE_RUNNER)
        self._fenced_at = now
        log.warning(
            "fenced by a group member with this runner.id; rejoining with a new consumer "
            "(were another instance running with it, one of the two would stop now)"
        )
        self._replace_member(group)

    def _replace_member(self, group: Consumer, *, static: bool = True) -> None:
        """Give up every lease, close ``group`` and join with a new consumer: a static member
        gets its assignment back at once, and every partition of it is assigned (and restored)
        afresh, whatever the old consumer believed it held."""
        self._wanted = None
        self.release([lease.kafka_partition for lease in self._leases.all()], lost=True)
        try:
            group.close()
        except (KafkaException, RuntimeError) as exc:  # dead already: nothing to leave
            log.debug("closing the group consumer: %s", exc)
        if self._rebuild is None:
            raise GroupFailed("the group consumer cannot be replaced")
        self.group = self._rebuild(group, static)
        self.subscribe()

    def subscribe(self) -> None:
        if self.group is not None:
            self.group.subscribe(
                [self._layout.state],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )

    def acquire(self, kafka_partitions: Sequence[int]) -> None:
        """Without a group: take these Kafka partitions as if assigned."""
        self._acquired.update(kafka_partitions)
        self._grant(kafka_partitions)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)
        consumer.pause(partitions)  # the group consumer only holds leases; the tail reads
        self._grant([tp.partition for tp in partitions])

    def _grant(self, kafka_partitions: Iterable[int]) -> None:
        """A lease and a restore (started from the pump, outside any callback) for each of
        these partitions not held yet."""
        granted = sorted(p for p in set(kafka_partitions) if self._leases.get(p) is None)
        for kafka_partition in granted:
            self._restores.queue(self._leases.grant(kafka_partition))
        if granted:
            log.info("assigned %s partition(s) %s; restoring", self._layout.state, granted)
            self._notify(Assigned(tuple(granted)))

    def _assigned(self) -> list[int]:
        """What the group assigned this instance, as its consumer knows it (without a group:
        what was acquired)."""
        if self.group is None:
            return sorted(self._acquired)
        return [tp.partition for tp in self.group.assignment() if tp.topic == self._layout.state]

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Still ours during the callback: finish what is pending so the next owner sees it.
        self._flush()
        self.release([tp.partition for tp in partitions], lost=False)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Someone else may already be writing: pending work of these keys is dropped.
        self.release([tp.partition for tp in partitions], lost=True)

    def release(self, kafka_partitions: list[int], *, lost: bool) -> None:
        for kafka_partition in kafka_partitions:
            self._leases.move(kafka_partition, LeaseState.REVOKED)
        self._restores.drop(kafka_partitions)
        self._requests.fail_unowned(self._leases)
        if kafka_partitions:
            log.info(
                "%s partition(s) %s of %s",
                "lost" if lost else "revoked",
                sorted(kafka_partitions),
                self._layout.state,
            )
            self._notify(Revoked(tuple(sorted(kafka_partitions)), lost))

    def rejoin(self) -> None:
        """Give up every lease now, and restore afresh what the group still assigns this
        instance (a fatal producer error: whatever was pending may be stale).

        It is called from inside the group's callbacks too (a revocation's flush can meet the
        fatal error), so the new leases are granted at the next :meth:`poll`, once the group's
        assignment has settled. It used to unsubscribe and subscribe again: inside a callback,
        or while a cooperative rebalance was under way, librdkafka kept the partitions that
        were not being revoked assigned to this member and never offered them again, so no one
        polled their keys (the cluster-bounces fault scenario met it)."""
        self.release([lease.kafka_partition for lease in self._leases.all()], lost=True)
        if self._wanted is None:
            self._wanted = Rejoin.RESTORE

    def replace_member(self, rebalance: bool = False) -> None:
        """Rejoin with a new group consumer at the next :meth:`poll` (see
        :meth:`_replace_member`): the liveness guard found a partition the group assigns this
        instance that it does not hold; with ``rebalance``, one it assigns to no member."""
        if self.group is None:
            self._wanted = Rejoin.RESTORE
        else:
            self._wanted = Rejoin.REBALANCE if rebalance else Rejoin.NEW_MEMBER
