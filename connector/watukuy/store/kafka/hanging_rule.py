"""Hanging transactions, told from live ones by the last stable offset alone (pure: the rule
that :mod:`.hanging` and :mod:`.tail` apply to the offsets they read).

A partition's last stable offset (LSO) stops at the first record of its oldest open
transaction. A live transaction moves it within the transaction timeout: its producer commits,
or the coordinator aborts it (checking every 10 s by default). Right after a broker restart,
Kafka's coordinator can complete a transaction without writing its markers to some partitions
(it has no leader for them yet, "likely deleted already", it logs); there the transaction stays
open for good, and every read_committed consumer of the partition stops at it. Only an
administrator's abort ends it, so watukuy finds and names it: an LSO below the partition's end
that has not moved for longer than any transaction may stay open.

:class:`HangingWatch` keeps, per partition, the LSO it last saw and since when; given the
offsets of a round and ``now``, it says which partitions hang and which of them to report
(newly found, or not reported for :data:`REPORT_EVERY` seconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "HANGING_MARGIN",
    "REPORT_EVERY",
    "HangingTransaction",
    "HangingWatch",
    "Round",
    "Seen",
    "abort_command",
]

HANGING_MARGIN = 60.0  # seconds past the transaction timeout before an open one is hanging
REPORT_EVERY = 300.0  # seconds between two reports of one hanging partition

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Seen:
    """A partition's offsets in one round: its last stable offset and its end (the high
    watermark, which counts records of open transactions too)."""

    stable: int
    end: int


@dataclass(frozen=True)
class HangingTransaction:
    topic: str
    kafka_partition: int
    start_offset: int  # the LSO: the first record of the open transaction
    open_for: float  # seconds the LSO has stayed there (as far as this watch knows)


@dataclass(frozen=True)
class Round:
    hanging: tuple[HangingTransaction, ...]  # every partition that hangs now
    report: tuple[HangingTransaction, ...]  # those to tell an operator about now


class HangingWatch:
    """Which partitions hang, from rounds of offsets (see the module's text)."""

    def __init__(self, hanging_after: float) -> None:
        if hanging_after <= 0:
            raise ValueError(f"hanging_after must be positive, not {hanging_after}")
        self._after = hanging_after
        self._since: dict[TopicPartition, tuple[int, float]] = {}  # LSO behind the end, since
        self._reported: dict[tuple[TopicPartition, int], float] = {}  # (tp, LSO): when

    def observe(self, seen: Mapping[TopicPartition, Seen], now: float) -> Round:
        """One round: ``seen`` holds every partition watched now; one it leaves out is
        forgotten, like one whose transactions all ended."""
        hanging: list[HangingTransaction] = []
        report: list[HangingTransaction] = []
        since: dict[TopicPartition, tuple[int, float]] = {}
        for tp, offsets in seen.items():
            if offsets.stable >= offsets.end:
                continue
            stable, first = self._since.get(tp, (offsets.stable, now))
            if stable != offsets.stable:  # it moved: an open transaction, but another one
                stable, first = offsets.stable, now
            since[tp] = (stable, first)
            if now - first < self._after:
                continue
            found = HangingTransaction(tp[0], tp[1], stable, now - first)
            hanging.append(found)
            last = self._reported.get((tp, stable))
            if last is None or now - last >= REPORT_EVERY:
                self._reported[(tp, stable)] = now
                report.append(found)
        self._since = since
        self._reported = {
            (tp, stable): at
            for (tp, stable), at in self._reported.items()
            if since.get(tp, (None, 0.0))[0] == stable
        }
        return Round(tuple(hanging), tuple(report))


def abort_command(bootstrap: str, topic: str, kafka_partition: int, start_offset: int) -> str:
    """The command that ends a hanging transaction (it needs ClusterAction on the cluster)."""
    return (
        f"kafka-transactions.sh --bootstrap-server {bootstrap} abort --topic {topic}"
        f" --partition {kafka_partition} --start-offset {start_offset}"
    )
