"""Hanging transactions on the topics a runner group writes, watched from each runner.

A restore that waits on a hanging transaction says so itself (:mod:`.tail`); a hanging one on
an events or DLQ partition, or on a state partition that nobody is restoring, stops only the
read_committed readers of that partition, and no restore ever meets it. So every
:data:`WATCH_EVERY` seconds each runner asks the cluster for the last stable offset and the
end of every partition of the internal, events and DLQ topics (one ListOffsets request per
broker and isolation level), and :class:`.hanging_rule.HangingWatch` tells which hang.
Each one found is logged as an ERROR naming the abort that ends it (again every few minutes)
and counted per topic in ``watukuy_hanging_transactions``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # documented, not in its __all__

from watukuy.core.observe import Observer
from watukuy.store.kafka import clients
from watukuy.store.kafka.hanging_rule import (
    HANGING_MARGIN,
    HangingWatch,
    Round,
    Seen,
    abort_command,
)

__all__ = ["WATCH_EVERY", "HangingTransactions"]

log = logging.getLogger("watukuy.kafka")

WATCH_EVERY = 30.0  # seconds between two rounds


class HangingTransactions:
    """``topics()``: the topics to watch now (they change as pollers come and go)."""

    def __init__(
        self,
        kafka: Mapping[str, Any],
        topics: Callable[[], Iterable[str]],
        observer: Observer,
        *,
        transaction_timeout: float,
        every: float = WATCH_EVERY,
        clock: Callable[[], float] = time.monotonic,
        request_timeout: float = 10.0,
    ) -> None:
        self._admin = clients.admin_client(kafka)
        self._bootstrap = clients.bootstrap_of(kafka)
        self._topics = topics
        self._observer = observer
        self._watch = HangingWatch(transaction_timeout + HANGING_MARGIN)
        self._every = every
        self._clock = clock
        self._timeout = request_timeout

    async def run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self._every)

    async def check(self) -> Round | None:
        """One round; ``None`` when the cluster did not answer it (the next one tries again)."""
        topics = sorted(set(self._topics()))
        try:
            seen = await asyncio.to_thread(self._offsets, topics)
        except KafkaException as exc:
            log.info("looking for hanging transactions: %s", exc.args[0])
            return None
        finally:
            clients.drain_logs(self._admin)
        found = self._watch.observe(seen, self._clock())
        for txn in found.report:
            log.error(
                "%s[%d] has had a transaction open for at least %.0fs, longer than the"
                " transaction timeout allows: a hanging transaction (a broker restart can leave"
                " one behind); read_committed consumers of the partition are stuck until it is"
                " aborted: %s (see the runbook 'A partition waits for a hanging transaction')",
                txn.topic,
                txn.kafka_partition,
                txn.open_for,
                abort_command(self._bootstrap, txn.topic, txn.kafka_partition, txn.start_offset),
            )
        for topic in topics:
            kafka_partitions = tuple(
                sorted(t.kafka_partition for t in found.hanging if t.topic == topic)
            )
            self._observer.transactions_hanging(topic, kafka_partitions)
        return found

    def _offsets(self, topics: list[str]) -> dict[tuple[str, int], Seen]:
        """Blocking: each partition's last stable offset and end. Topics not created yet are
        left out (the whole cluster's metadata is asked for: asking for one topic by name can
        make a broker with auto-creation create it)."""
        metadata = self._admin.list_topics(timeout=self._timeout)
        partitions = [
            TopicPartition(name, kafka_partition)
            for name in topics
            if (topic := metadata.topics.get(name)) is not None and topic.error is None
            for kafka_partition in topic.partitions
        ]
        if not partitions:
            return {}
        stable = self._latest(partitions, IsolationLevel.READ_COMMITTED)
        end = self._latest(partitions, IsolationLevel.READ_UNCOMMITTED)
        return {tp: Seen(stable[tp], end[tp]) for tp in stable}

    def _latest(
        self, partitions: list[TopicPartition], level: IsolationLevel
    ) -> dict[tuple[str, int], int]:
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        asked = self._admin.list_offsets(
            {tp: latest for tp in partitions},
            isolation_level=level,
            request_timeout=self._timeout,
        )
        return {(tp.topic, tp.partition): future.result().offset for tp, future in asked.items()}
