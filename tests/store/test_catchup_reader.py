"""The restore's catch-up on the Kafka thread (watukuy.store.kafka.catchup), over stand-in
consumers and a clock that only moves when told: it finds its windows even when a client's
metadata went stale, and never holds a partition past its patience."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from tests.clock import ManualClock
from watukuy.store.kafka.catchup import PATIENCE, EventsCatchUp
from watukuy.store.kafka.restore import RestoredKeys

pytestmark = pytest.mark.unit

TOPIC = "p.events.invoices"


class Offsets:
    """Answers "unknown partition" until its metadata is refreshed (``healthy``: at once);
    then the window starts at 5 and ends at 10."""

    def __init__(self, *, healthy: bool = False, stale_for_ever: bool = False) -> None:
        self.fresh = healthy
        self.stale_for_ever = stale_for_ever
        self.refreshed: list[str] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        self.refreshed.append(topic)
        self.fresh = not self.stale_for_ever

    def offsets_for_times(self, tps: list[TopicPartition], timeout: float) -> list[Any]:
        if not self.fresh:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        return [TopicPartition(tp.topic, tp.partition, 5) for tp in tps]

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float, cached: bool) -> Any:
        return 0, 10


class Reader:
    def __init__(self) -> None:
        self.assigned: dict[tuple[str, int], int] = {}
        self.at = -1001  # no position yet

    def incremental_assign(self, tps: list[TopicPartition]) -> None:
        self.assigned.update({(tp.topic, tp.partition): tp.offset for tp in tps})

    def incremental_unassign(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.assigned.pop((tp.topic, tp.partition), None)

    def consume(self, count: int, timeout: float) -> list[Any]:
        return []

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.at) for tp in tps]


def restored() -> RestoredKeys:
    keys = RestoredKeys()
    keys.stamps[b"invoices/t_1"] = 1_000_000
    return keys


def catch_up(offsets: Offsets) -> tuple[EventsCatchUp, Reader, ManualClock, list[int]]:
    clock, reader, finished = ManualClock(), Reader(), []
    catchup = EventsCatchUp(
        reader,  # type: ignore[arg-type]
        offsets,  # type: ignore[arg-type]
        lambda poller: (TOPIC, 1) if poller == "invoices" else None,
        clock,
    )
    catchup.begin(3, restored(), lambda: finished.append(3))
    return catchup, reader, clock, finished


def test_a_window_is_read_from_its_start_to_its_end_then_the_partition_goes_on() -> None:
    catchup, reader, clock, finished = catch_up(Offsets(healthy=True))
    assert reader.assigned == {(TOPIC, 0): 5}
    catchup.read()
    assert finished == []  # not at the end yet
    reader.at = 10
    clock.now += 0.5  # no end-of-partition event here: positions are looked at every 0.5 s
    catchup.read()
    assert finished == [3] and reader.assigned == {}


def test_stale_metadata_after_a_broker_restart_is_refreshed_and_the_window_found() -> None:
    offsets = Offsets()
    catchup, reader, clock, finished = catch_up(offsets)
    assert offsets.refreshed == [TOPIC] and reader.assigned == {}
    catchup.read()  # asked again only a second later
    assert reader.assigned == {}
    clock.now += 1.5
    catchup.read()
    assert reader.assigned == {(TOPIC, 0): 5} and finished == []


def test_a_window_that_cannot_be_found_is_given_up_after_the_patience(
    caplog: pytest.LogCaptureFixture,
) -> None:
    catchup, reader, clock, finished = catch_up(Offsets(stale_for_ever=True))
    while clock.now < 100.0 + PATIENCE:
        clock.now += 1.5
        catchup.read()
        assert finished == [] or clock.now > 100.0 + PATIENCE
    clock.now += 1.5
    catchup.read()
    assert finished == [3] and reader.assigned == {}
    assert "partition 3: gave up reading what its keys published" in caplog.text


def test_a_window_that_is_never_read_to_its_end_is_given_up_after_the_patience(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    catchup, reader, clock, finished = catch_up(Offsets(healthy=True))
    reader.at = 7
    clock.now += PATIENCE / 2
    catchup.read()
    assert finished == []
    clock.now += PATIENCE
    catchup.read()
    assert finished == [3] and reader.assigned == {}
    assert "its events were not read to their end" in caplog.text
