from __future__ import annotations

import pytest

from watukuy.core.ownership import GroupView, Remedy, UnownedWatch, remedy

pytestmark = pytest.mark.unit


def test_a_partition_is_unowned_only_after_the_grace() -> None:
    watch = UnownedWatch(4, grace=10.0)
    assert watch.observe([0, 1, 2, 3], now=0.0).unowned == frozenset()
    assert watch.observe([0, 1, 3], now=1.0).unowned == frozenset()
    assert watch.observe([0, 1, 3], now=11.0).unowned == frozenset()  # 10 s: not longer
    seen = watch.observe([0, 1, 3], now=11.5)
    assert seen.unowned == frozenset({2})
    assert seen.longest == pytest.approx(10.5)


def test_a_claim_in_between_starts_the_wait_again() -> None:
    watch = UnownedWatch(2, grace=5.0)
    watch.observe([0], now=0.0)
    watch.observe([0, 1], now=4.0)  # a new owner claimed it
    assert watch.observe([0], now=8.0).unowned == frozenset()
    assert watch.observe([0], now=13.5).unowned == frozenset({1})


def test_nothing_claimed_at_all_counts_every_partition() -> None:
    watch = UnownedWatch(3, grace=1.0)
    watch.observe([], now=0.0)
    seen = watch.observe([], now=2.0)
    assert seen.unowned == frozenset({0, 1, 2})
    assert watch.observe([0, 1, 2], now=2.5).longest == 0.0


def test_claims_outside_the_topic_are_ignored() -> None:
    watch = UnownedWatch(2, grace=1.0)
    watch.observe([5, 0], now=0.0)
    assert watch.observe([5, 0], now=3.0).unowned == frozenset({1})


def test_a_topic_needs_a_partition() -> None:
    with pytest.raises(ValueError, match="partitions"):
        UnownedWatch(0, grace=1.0)


def test_remedy_rejoins_for_its_own_stuck_partitions_and_the_first_member_for_orphans() -> None:
    unowned = frozenset({1, 2})
    mine = GroupView(mine=frozenset({1}), given=frozenset({0, 1, 3}), stable=True, first=False)
    assert remedy(unowned, held={0}, view=mine) == Remedy(stuck=(1,))
    assert remedy(unowned, held={1}, view=mine) == Remedy()  # holds it now: nothing to do
    first = GroupView(mine=frozenset({0}), given=frozenset({0, 1, 3}), stable=True, first=True)
    assert remedy(unowned, held={0}, view=first) == Remedy(orphans=(2,))
    assert remedy(unowned, held={0}, view=first).rejoin
    rebalancing = GroupView(mine=frozenset(), given=frozenset(), stable=False, first=True)
    assert not remedy(unowned, held=(), view=rebalancing).rejoin  # a rebalance is under way
