"""The offsets the Kafka handlers' consumer may commit: only past events every handler finished."""

from __future__ import annotations

from watukuy.store.kafka.feed import OffsetTracker


def test_an_offset_is_committable_only_once_everything_before_it_was_handled() -> None:
    tracker = OffsetTracker()
    tracker.assign(0)
    for offset in (10, 11, 12, 13):
        tracker.fetched(0, offset)
    assert tracker.take() == {}

    tracker.handled(0, 12)  # another key went ahead; 10 and 11 still wait
    tracker.handled(0, 11)
    assert tracker.take() == {}
    assert tracker.in_flight == 4

    tracker.handled(0, 10)
    assert tracker.take() == {0: 13}  # the next record to read is 13
    assert tracker.take() == {}  # nothing moved since
    assert tracker.in_flight == 1

    tracker.handled(0, 13)
    assert tracker.take() == {0: 14}


def test_partitions_move_independently_and_a_revoked_one_forgets_late_acknowledgements() -> None:
    tracker = OffsetTracker()
    for partition in (0, 1):
        tracker.assign(partition)
        tracker.fetched(partition, 0)
        tracker.fetched(partition, 1)
    tracker.handled(1, 0)
    assert tracker.take({0}) == {}
    assert tracker.take() == {1: 1}

    tracker.drop(0)
    tracker.handled(0, 0)  # handled after the partition went to another member
    assert tracker.take() == {}
    assert tracker.in_flight == 1

    tracker.assign(0)  # back, from the committed offset: fetched again
    tracker.fetched(0, 0)
    tracker.handled(0, 0)
    assert tracker.take() == {0: 1}
