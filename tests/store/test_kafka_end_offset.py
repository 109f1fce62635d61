"""The end of a partition a restore reads up to: waited for while the partition has no
leader yet, on the clock the Kafka thread is given (no real time passes here)."""

from __future__ import annotations

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from tests.clock import ManualClock
from watukuy.core.errors import Retriable
from watukuy.store.kafka.catchup import EventsCatchUp
from watukuy.store.kafka.lease import Leases
from watukuy.store.kafka.offsets import bounds_now, end_offset
from watukuy.store.kafka.tail import Restores
from watukuy.store.kafka.topics import TopicLayout


class Watermarks:
    """``offsets_for_times`` with the protocol's special times (the store asks many partitions
    at once that way), answered from ``get_watermark_offsets``: a raise fails the request."""

    def get_watermark_offsets(
        self, tp: TopicPartition, timeout: float, cached: bool
    ) -> tuple[int, int]:
        raise NotImplementedError

    def offsets_for_times(
        self, asked: list[TopicPartition], timeout: float
    ) -> list[TopicPartition]:
        answers = []
        for tp in asked:
            assert tp.offset in (OFFSET_BEGINNING, OFFSET_END)
            low, high = self.get_watermark_offsets(tp, timeout, False)
            offset = low if tp.offset == OFFSET_BEGINNING else high
            answers.append(TopicPartition(tp.topic, tp.partition, offset))
        return answers


class Offsets(Watermarks):
    """Answers watermark queries with ``errors`` first, then ``high``."""

    def __init__(self, errors: list[int], high: int = 42) -> None:
        self.errors = errors
        self.high = high

    def get_watermark_offsets(
        self, tp: TopicPartition, timeout: float, cached: bool
    ) -> tuple[int, int]:
        assert not cached  # the end must be read now, not from the last fetch
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 0, self.high


def test_a_partition_without_a_leader_yet_is_waited_for() -> None:
    clock = ManualClock(1000.0)
    not_ready = [KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION]
    offsets = Offsets([*not_ready, KafkaError._TIMED_OUT])
    assert end_offset(offsets, TopicPartition("p.state", 3), clock) == 42
    assert clock.slept == [0.2, 0.2, 0.2]


def test_a_partition_that_never_gets_a_leader_fails_retriably_after_the_deadline() -> None:
    clock = ManualClock(1000.0)
    offsets = Offsets([KafkaError.LEADER_NOT_AVAILABLE] * 1000)
    with pytest.raises(Retriable, match=r"cannot read the end of p\.items\[1\]"):
        end_offset(offsets, TopicPartition("p.items", 1), clock, deadline=5.0)
    assert 5.0 < sum(clock.slept) <= 5.4


class StaleMetadata(Offsets):
    """librdkafka's cache after a broker restart: "unknown partition" from a client that never
    fetches, for as long as nobody asks the cluster for the topic's metadata again."""

    def __init__(self) -> None:
        super().__init__([])
        self.stale = True
        self.asked: list[str] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        self.asked.append(topic)
        self.stale = False

    def get_watermark_offsets(
        self, tp: TopicPartition, timeout: float, cached: bool
    ) -> tuple[int, int]:
        if self.stale:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        return super().get_watermark_offsets(tp, timeout, cached)


def test_an_unknown_partition_from_stale_metadata_refreshes_it_and_is_read() -> None:
    clock = ManualClock(1000.0)
    offsets = StaleMetadata()
    assert end_offset(offsets, TopicPartition("p.parked", 3), clock) == 42  # type: ignore[arg-type]
    assert offsets.asked == ["p.parked"]
    assert clock.slept == [0.2]


def test_any_other_error_fails_at_once() -> None:
    clock = ManualClock(1000.0)
    offsets = Offsets([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(Retriable, match=r"cannot read the end of p\.state"):
        end_offset(offsets, TopicPartition("p.state", 0), clock)
    assert clock.slept == []


class Tail:
    """The tail consumer of a restore that never gets to start here."""

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        raise AssertionError("no restore may start while the cluster is out of reach")


def restores_over(clock: ManualClock, stable: object, written: object) -> tuple[Restores, Leases]:
    """The restores of topics ``p.*`` whose ends ``stable`` and ``written`` answer (10 s
    transaction timeout, bootstrap ``kafka:9092``), and the leases that grant them."""
    leases = Leases()
    restores = Restores(
        TopicLayout("p", 8, 1),
        leases,
        lambda n: None,
        clock,
        tail=Tail(),  # type: ignore[arg-type]
        stable=stable,  # type: ignore[arg-type]
        written=written,  # type: ignore[arg-type]
        catchup=EventsCatchUp(Tail(), stable, lambda poller: None, clock),  # type: ignore[arg-type]
        transaction_timeout=10.0,
        bootstrap="kafka:9092",
    )
    return restores, leases


def test_a_takeover_while_every_broker_is_down_waits_instead_of_failing_the_thread(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The Kafka thread died of this (fault scenario 4, full profile): the runner exited and
    # its open transaction was left for nobody to abort.
    caplog.set_level("INFO", "watukuy.kafka")
    clock = ManualClock(1000.0)
    down = Offsets([KafkaError._ALL_BROKERS_DOWN] * 10)
    restores, leases = restores_over(clock, down, down)
    restores.queue(leases.grant(2))
    restores.start_settled()
    clock.now += 2.0
    restores.start_settled()

    assert restores.busy  # still waiting for the partition to settle
    assert any("partition 2: cannot read its end yet" in r.getMessage() for r in caplog.records)


class Ends(Watermarks):
    """Watermarks that stay where they are: a transaction open on every topic."""

    def __init__(self, high: int) -> None:
        self.high = high

    def get_watermark_offsets(
        self, tp: TopicPartition, timeout: float, cached: bool
    ) -> tuple[int, int]:
        return 0, self.high


def test_a_transaction_open_past_the_timeout_is_reported_as_hanging_with_the_abort_command(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The full fault profile's broker outages met it: a coordinator completing an abort just
    # after a broker restart skipped the markers, and the takeover waited forever, silently.
    caplog.set_level("INFO", "watukuy.kafka")
    clock = ManualClock(1000.0)
    restores, leases = restores_over(clock, Ends(52), Ends(53))
    restores.queue(leases.grant(4))

    def errors() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]

    for _ in range(70):  # a takeover waits for a transaction the coordinator will end
        restores.start_settled()
        clock.now += 1.0
    assert errors() == []
    clock.now += 1.0
    restores.start_settled()
    [error] = errors()
    assert "p.state[4] has had a transaction open for 71s" in error
    assert (
        "kafka-transactions.sh --bootstrap-server kafka:9092 abort --topic p.state"
        " --partition 4 --start-offset 52" in error
    )
    for _ in range(60):  # not again for a while
        clock.now += 1.0
        restores.start_settled()
    assert len(errors()) == 1
    assert restores.busy


class TopicEnds(Watermarks):
    """Per topic watermarks the test moves."""

    def __init__(self, ends: dict[str, int]) -> None:
        self.ends = ends

    def get_watermark_offsets(
        self, tp: TopicPartition, timeout: float, cached: bool
    ) -> tuple[int, int]:
        return 0, self.ends.get(tp.topic, 0)


def test_a_second_hanging_topic_of_the_partition_is_reported_once_the_first_is_aborted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", "watukuy.kafka")
    clock = ManualClock(1000.0)
    stable = TopicEnds({"p.state": 52, "p.items": 300})
    restores, leases = restores_over(clock, stable, TopicEnds({"p.state": 53, "p.items": 307}))
    restores.queue(leases.grant(4))
    for _ in range(72):
        restores.start_settled()
        clock.now += 1.0
    stable.ends["p.state"] = 53  # the operator aborted the state topic's transaction
    restores.start_settled()
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert [e.split(" has had")[0] for e in errors] == [
        "partition 4: p.state[4]",
        "partition 4: p.items[4]",
    ]


class StuckTail(Tail):
    """A tail that was given the partitions and fetches nothing from them (stale metadata)."""

    def __init__(self) -> None:
        self.refreshed: list[str] = []

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        return None

    def consume(self, count: int, wait: float) -> list[object]:
        return []

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, 0) for tp in partitions]

    def list_topics(self, topic: str, timeout: float) -> None:
        self.refreshed.append(topic)


def test_a_restore_that_reads_nothing_is_reported_and_its_metadata_refreshed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", "watukuy.kafka")
    clock = ManualClock(1000.0)
    ends = Offsets([], high=5)
    restores, leases = restores_over(clock, ends, ends)
    tail = StuckTail()
    restores.tail = tail  # type: ignore[assignment]
    restores.queue(leases.grant(2))
    restores.start_settled()
    for _ in range(3):
        restores.read()
        clock.now += 4.0  # each look is half a second or more after the one before
    restores.read()

    assert restores.busy
    stalled = [r.getMessage() for r in caplog.records if "read nothing" in r.getMessage()]
    assert stalled == [
        "partition 2: its restore has read nothing for 10s (at {'p.state': 0, 'p.items': 0,"
        " 'p.parked': 0} of {'p.state': 5, 'p.items': 5, 'p.parked': 5}); refreshing the"
        " metadata of its topics"
    ]
    assert sorted(tail.refreshed) == ["p.items", "p.parked", "p.state"]


class Answered:
    """One partition's answer to ``offsets_for_times`` (librdkafka's has a read-only error)."""

    def __init__(self, tp: TopicPartition, offset: int, error: KafkaError | None) -> None:
        self.topic, self.partition, self.offset, self.error = tp.topic, tp.partition, offset, error


class Leaderless:
    """Every partition starts at 3 and ends at 9 (8 read_committed); those in ``waiting`` have
    no leader for their first ``times`` requests. Every request is kept."""

    def __init__(self, waiting: set[tuple[str, int]], times: int, committed: bool) -> None:
        self.waiting, self.times, self.committed = waiting, times, committed
        self.requests: list[list[tuple[str, int, int]]] = []

    def offsets_for_times(self, asked: list[TopicPartition], timeout: float) -> list[Answered]:
        self.requests.append([(tp.topic, tp.partition, tp.offset) for tp in asked])
        leaderless = len(self.requests) <= self.times
        answers = []
        for tp in asked:
            if leaderless and (tp.topic, tp.partition) in self.waiting:
                answers.append(Answered(tp, -1, KafkaError(KafkaError.LEADER_NOT_AVAILABLE)))
            elif tp.offset == OFFSET_BEGINNING:
                answers.append(Answered(tp, 3, None))
            else:
                answers.append(Answered(tp, 8 if self.committed else 9, None))
        return answers


def test_the_bounds_of_many_partitions_are_asked_at_once_and_only_the_leaderless_again() -> None:
    clock = ManualClock(1000.0)
    wanted = [(topic, p) for p in range(32) for topic in ("p.state", "p.items", "p.parked")]
    stable = Leaderless({("p.items", 7)}, times=2, committed=True)
    written = Leaderless(set(), times=0, committed=False)

    bounds = bounds_now(stable, written, wanted, clock)  # type: ignore[arg-type]

    assert bounds == {where: (3, 8, 9) for where in wanted}
    starts = [(t, p, OFFSET_BEGINNING) for t, p in wanted]
    again = [("p.items", 7, OFFSET_BEGINNING)]
    assert stable.requests == [starts, again, again, [(t, p, OFFSET_END) for t, p in wanted]]
    assert written.requests == [[(t, p, OFFSET_END) for t, p in wanted]]
    assert clock.slept == [0.02, 0.04]  # a new topic gets its leaders in milliseconds


def test_partitions_that_never_get_a_leader_fail_the_bounds_after_the_deadline() -> None:
    clock = ManualClock(1000.0)
    stable = Leaderless({("p.state", 1)}, times=10_000, committed=True)
    written = Leaderless(set(), times=0, committed=False)
    with pytest.raises(Retriable, match=r"cannot read the end of p\.state\[1\]: .*(?i:leader)"):
        bounds_now(stable, written, [("p.state", 0), ("p.state", 1)], clock, deadline=5.0)  # type: ignore[arg-type]
    assert 5.0 < sum(clock.slept) <= 5.4
    assert max(clock.slept) == 0.2
