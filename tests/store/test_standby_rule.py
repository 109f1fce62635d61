"""Which partitions a runner keeps warm for the others: the ring of runners by id."""

from __future__ import annotations

import pytest

from watukuy.store.kafka.standby_rule import standby_partitions

pytestmark = pytest.mark.unit


def test_with_two_runners_each_keeps_the_others_partitions() -> None:
    owned = {"r1": {0, 1}, "r2": {2, 3}}
    assert standby_partitions("r1", owned, 1) == {2, 3}
    assert standby_partitions("r2", owned, 1) == {0, 1}


def test_with_three_runners_each_keeps_the_next_ones_and_every_partition_has_a_copy() -> None:
    owned = {"r1": {0, 1}, "r2": {2, 3}, "r3": {4, 5}}
    kept = {me: standby_partitions(me, owned, 1) for me in owned}
    assert kept == {"r1": {2, 3}, "r2": {4, 5}, "r3": {0, 1}}
    copies = sorted(p for partitions in kept.values() for p in partitions)
    assert copies == [0, 1, 2, 3, 4, 5]


def test_replicas_beyond_the_other_runners_keep_every_other_partition_once() -> None:
    owned = {"r1": {0}, "r2": {1}, "r3": {2}}
    assert standby_partitions("r2", owned, 2) == {0, 2}
    assert standby_partitions("r2", owned, 5) == {0, 2}


@pytest.mark.parametrize(
    ("me", "owned", "replicas"),
    [
        ("r1", {"r1": {0, 1, 2}}, 1),  # alone in the group
        ("r1", {"r1": {0}, "r2": {1}}, 0),  # standbys off
        ("r9", {"r1": {0}, "r2": {1}}, 1),  # not a member (yet)
    ],
)
def test_no_standby(me: str, owned: dict[str, set[int]], replicas: int) -> None:
    assert standby_partitions(me, owned, replicas) == set()


def test_a_partition_moving_between_the_others_is_never_one_of_its_own() -> None:
    # During a rebalance two members may both list a partition for a moment.
    owned = {"r1": {0, 1}, "r2": {1, 2}}
    assert standby_partitions("r1", owned, 1) == {2}
