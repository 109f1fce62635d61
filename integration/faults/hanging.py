"""Hanging transactions, found and aborted as the runbook 'A partition waits for a hanging
transaction' tells an operator to.

Kafka's transaction coordinator, completing a transaction right after a broker restart, skips
the markers of partitions it knows no leader for yet ("likely deleted already", its log says)
and records the transaction as done. Those partitions keep an open transaction that nothing
but an admin abort ends (librdkafka has no such call), so the broker-outage scenario, like an
operator, aborts one once it has been open far longer than any transaction may be. Each abort
is counted and shown: the scenario proves that the runners recover once it is done, and that
nothing is lost or doubled by it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from integration.faults.verify import settle_transactions
from integration.kafka.tools import transactions

STUCK_FOR = 6.0  # seconds: past the scenarios' 5 s transaction timeout


@dataclass(frozen=True)
class Hanging:
    topic: str
    partition: int
    producer_id: int
    start_offset: int
    idle_s: float  # since the producer last wrote to the partition

    def __str__(self) -> str:
        return (
            f"{self.topic}[{self.partition}] from offset {self.start_offset} (producer"
            f" {self.producer_id}, idle {self.idle_s:.0f}s)"
        )


def producers(bootstrap: str, topic: str, partition: int) -> list[list[str]]:
    """The rows of ``kafka-transactions.sh describe-producers``: producer id, epoch, coordinator
    epoch, last sequence, last write (ms), start offset of its open transaction or ``None``."""
    out = transactions(
        bootstrap, "describe-producers", "--topic", topic, "--partition", str(partition)
    )
    return [cells for line in out.splitlines()[1:] if len(cells := line.split()) >= 6]


def open_transactions(bootstrap: str, topic: str, partition: int) -> list[Hanging]:
    """The open transactions ``kafka-transactions.sh describe-producers`` shows."""
    now_ms = time.time() * 1000
    found = []
    for cells in producers(bootstrap, topic, partition):
        if cells[5] == "None":
            continue
        producer, last_ms, start = int(cells[0]), int(cells[4]), int(cells[5])
        found.append(Hanging(topic, partition, producer, start, (now_ms - last_ms) / 1000))
    return found


def abort_hanging(bootstrap: str, topics: Sequence[str], older_than: float) -> list[Hanging]:
    """Abort every transaction on ``topics`` whose producer has not written for ``older_than``
    seconds (far past the transaction timeout, so no live transaction is touched)."""
    aborted = []
    for tp in _stuck(bootstrap, topics):
        for txn in open_transactions(bootstrap, tp.topic, tp.partition):
            if txn.idle_s >= older_than:
                transactions(
                    bootstrap, "abort", "--topic", txn.topic, "--partition",
                    str(txn.partition), "--start-offset", str(txn.start_offset),
                )  # fmt: skip
                aborted.append(txn)
    return aborted


def _stuck(bootstrap: str, topics: Sequence[str]) -> list[TopicPartition]:
    """Partitions whose last stable offset stayed below their end for a while (a live
    transaction moves it within a transaction timeout): only these are worth describing, each
    description being a JVM start."""
    first = settle_transactions(bootstrap, topics, 0)
    if not first:
        return []
    time.sleep(STUCK_FOR)
    then = settle_transactions(bootstrap, topics, 0)
    return [tp for tp, (stable, _) in then.items() if first.get(tp, (None, 0))[0] == stable]
