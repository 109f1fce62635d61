"""Standby replicas on their own: which partitions a runner keeps warm as the group's
assignment moves, where the tail reads them from, and the lag it reports. No broker: the
tail is a fake consumer that records what it is told to read (what Kafka does with that is
the integration tests'), and the local state store is plain files."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from watukuy.core.clock import FakeClock
from watukuy.core.errors import Retriable
from watukuy.store.kafka.disk import DiskCopy
from watukuy.store.kafka.lease import Leases
from watukuy.store.kafka.local import LocalIdentity, LocalState
from watukuy.store.kafka.settings import KafkaSettings
from watukuy.store.kafka.standby import STANDBY_EVERY, Standbys
from watukuy.store.kafka.topics import TopicLayout

pytestmark = pytest.mark.unit

LAYOUT = TopicLayout("wk", 4, 1)
TOPICS = (LAYOUT.state, LAYOUT.items, LAYOUT.parked)
END = 40  # each topic-partition's last stable offset


class Tail:
    """What a consumer is told to read, and how far it got."""

    def __init__(self) -> None:
        self.reading: dict[tuple[str, int], int] = {}  # (topic, partition) -> start offset
        self.position_of: dict[tuple[str, int], int] = {}  # where a fetch got to
        self.fetched = False

    def incremental_assign(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.reading[(tp.topic, tp.partition)] = tp.offset

    def incremental_unassign(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            del self.reading[(tp.topic, tp.partition)]

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for topic, p in self.reading]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(
                tp.topic, tp.partition, self.position_of.get((tp.topic, tp.partition), -1001)
            )
            for tp in partitions
        ]

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool) -> tuple[int, int]:
        assert cached, "a standby's lag must never send a request"
        return (0, END) if self.fetched else (-1001, -1001)

    def partitions(self) -> set[int]:
        return {p for _, p in self.reading}


class Runner:
    """One runner's standbys, with the group's assignment as its heartbeats say."""

    def __init__(self, tmp_path: Path, replicas: int = 1) -> None:
        self.clock = FakeClock()
        self.tail = Tail()
        self.owned: dict[str, set[int]] = {"r1": {0, 1}, "r2": {2, 3}}
        self.member = True
        self.unreachable: set[int] = set()
        self.leases = Leases()
        local = LocalState.open(tmp_path, LAYOUT, LocalIdentity("wk", ("s", "i", "p"), 4))
        self.disk = DiskCopy(local, LAYOUT, self.clock.now, max_age_ms=86_400_000)
        settings = KafkaSettings({}, LAYOUT, "r1", standby_replicas=replicas)
        self.standbys = Standbys(
            settings,
            self.disk,
            self.leases,
            self.clock,
            tail=self.tail,  # type: ignore[arg-type]
            watermarks=self._watermarks,
            roster=lambda: self.owned,
            member=lambda: self.member,
        )

    def _watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        if tp.partition in self.unreachable:
            raise Retriable("no leader")
        return (0, END)

    def look(self) -> None:
        self.clock.advance(STANDBY_EVERY)
        self.standbys.refresh()


def test_a_runner_keeps_its_partner_s_partitions_warm_reading_each_topic_from_its_start(
    tmp_path: Path,
) -> None:
    runner = Runner(tmp_path)

    runner.look()

    assert runner.standbys.kept == {2, 3}
    assert runner.tail.reading == {(t, p): OFFSET_BEGINNING for t in TOPICS for p in (2, 3)}


def test_standbys_follow_the_assignment_and_let_go_of_what_this_runner_is_granted(
    tmp_path: Path,
) -> None:
    runner = Runner(tmp_path)
    runner.look()

    # A rebalance gives partition 3 to r1, which restores it as its owner before the
    # heartbeats say so: a partition it holds a lease on is never a standby.
    runner.leases.grant(3)
    runner.clock.advance(STANDBY_EVERY / 2)
    runner.standbys.refresh()
    assert runner.standbys.kept == {2, 3}  # not looked at again before STANDBY_EVERY

    runner.look()
    assert runner.standbys.kept == {2}
    assert runner.tail.partitions() == {2}  # the tail no longer reads partition 3

    runner.owned = {"r1": {0, 1, 3}, "r2": {2}}
    runner.look()
    assert runner.standbys.kept == {2}

    # A third runner joins: r1's ring neighbour is now r2 only, which owns partition 0.
    runner.owned = {"r1": {1, 3}, "r2": {0}, "r3": {2}}
    runner.look()
    assert runner.standbys.kept == {0}
    assert runner.tail.partitions() == {0}


def test_out_of_the_group_or_before_its_own_heartbeat_it_keeps_what_it_kept(
    tmp_path: Path,
) -> None:
    runner = Runner(tmp_path)
    runner.look()

    runner.member = False
    runner.owned = {"r1": {0, 1, 2, 3}}
    runner.look()
    assert runner.standbys.kept == {2, 3}

    runner.member = True
    runner.owned = {"r2": {0, 1, 2, 3}}  # its own heartbeat not read back yet
    runner.look()
    assert runner.standbys.kept == {2, 3}


def test_a_partition_whose_offsets_cannot_be_read_is_tried_again_at_the_next_look(
    tmp_path: Path,
) -> None:
    runner = Runner(tmp_path)
    runner.unreachable = {2}

    runner.look()
    assert runner.standbys.kept == set()  # it stops at the first that fails

    runner.unreachable = set()
    runner.look()
    assert runner.standbys.kept == {2, 3}


def test_lag_is_unknown_until_the_tail_fetched_then_what_is_left_to_read(tmp_path: Path) -> None:
    runner = Runner(tmp_path)
    runner.look()
    assert math.isnan(runner.standbys.lag)

    runner.tail.fetched = True
    runner.tail.position_of = {(t, p): 30 for t in TOPICS for p in (2, 3)}
    runner.look()
    assert runner.standbys.lag == 6 * (END - 30)

    runner.tail.position_of = {(t, p): END for t in TOPICS for p in (2, 3)}
    runner.look()
    assert runner.standbys.lag == 0


def test_no_standby_is_kept_with_zero_replicas(tmp_path: Path) -> None:
    runner = Runner(tmp_path, replicas=0)

    runner.look()

    assert runner.standbys.kept == set()
    assert runner.tail.reading == {}
