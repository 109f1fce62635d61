"""The liveness guard (watukuy.control.ownership) on fakes: what an operator sees (the metric's
value, /health's message) and the one remedy it takes (a rejoin), by the clock."""

from __future__ import annotations

import pytest

from watukuy.control.ownership import ESCALATE, OwnershipGuard
from watukuy.core.observe import Observer
from watukuy.core.ownership import GroupView

pytestmark = pytest.mark.unit

SESSION = 6.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Member:
    """The coordinator's view: what it assigns this runner (``None``: no answer); the rest of
    the four partitions are assigned to other members unless ``orphans`` says otherwise."""

    def __init__(
        self,
        assigned: set[int] | None,
        *,
        orphans: frozenset[int] = frozenset(),
        first: bool = False,
    ) -> None:
        self.given = assigned
        self.orphans = orphans
        self.first = first
        self.rejoins = 0
        self.rebalances = 0

    def view(self) -> GroupView | None:
        if self.given is None:
            return None
        others = frozenset(range(4)) - self.orphans
        return GroupView(frozenset(self.given), others, stable=True, first=self.first)

    def rejoin(self, rebalance: bool = False) -> None:
        self.rejoins += 1
        self.rebalances += rebalance


class Unowned(Observer):
    def __init__(self) -> None:
        self.seen: list[tuple[int, ...]] = []

    def partitions_unowned(self, kafka_partitions: tuple[int, ...]) -> None:
        self.seen.append(kafka_partitions)


def guard(
    member: Member, *, others: set[int], held: set[int]
) -> tuple[OwnershipGuard, Clock, Unowned]:
    clock, observer = Clock(), Unowned()
    made = OwnershipGuard(
        partitions=4,
        session_timeout=SESSION,
        claimed=lambda: others,
        held=lambda: held,
        member=member,
        observer=observer,
        clock=clock,
    )
    return made, clock, observer


async def test_a_partition_assigned_here_and_not_held_turns_health_and_rejoins_once() -> None:
    member, held = Member({2, 3}), {3}
    watch, clock, observer = guard(member, others={0, 1}, held=held)
    await watch.check()
    clock.now = SESSION  # not longer than a session yet
    await watch.check()
    assert observer.seen == [(), ()] and watch.adrift is None and member.rejoins == 0

    clock.now = SESSION + 1
    await watch.check()
    assert observer.seen[-1] == (2,)
    assert watch.adrift is not None and "[2]" in watch.adrift
    assert member.rejoins == 1
    clock.now = SESSION + 3  # the rejoin is under way: not another one
    await watch.check()
    assert member.rejoins == 1

    held.add(2)  # restoring it now
    clock.now = SESSION + 4
    await watch.check()
    assert observer.seen[-1] == () and watch.adrift is None


async def test_a_second_rejoin_comes_a_session_after_the_first_if_it_did_not_help() -> None:
    member = Member({1})
    watch, clock, _ = guard(member, others={0, 2, 3}, held=set())
    await watch.check()
    for clock.now in (SESSION + 1, SESSION + 2, 2 * SESSION + 0.5, 2 * SESSION + 1.5):
        await watch.check()
    assert member.rejoins == 2


async def test_a_partition_assigned_to_another_runner_is_counted_not_acted_on() -> None:
    member = Member({3})  # the coordinator gives partition 1 to someone else
    watch, clock, observer = guard(member, others={0, 2}, held={3})
    await watch.check()
    clock.now = SESSION + 1
    await watch.check()
    assert observer.seen[-1] == (1,)
    assert watch.adrift is None and member.rejoins == 0


async def test_without_an_answer_from_the_cluster_it_judges_again_next_time() -> None:
    member = Member(None)
    watch, clock, observer = guard(member, others=set(), held=set())
    await watch.check()
    clock.now = SESSION + 1
    await watch.check()
    assert observer.seen[-1] == (0, 1, 2, 3)  # counted all the same
    assert watch.adrift is None and member.rejoins == 0
    member.given = {0, 1, 2, 3}
    await watch.check()
    assert watch.adrift is not None and member.rejoins == 1


@pytest.mark.parametrize("first", [True, False])
async def test_a_partition_assigned_to_no_member_makes_the_first_member_rejoin(first: bool) -> None:
    member = Member({3}, orphans=frozenset({1}), first=first)  # a stable group, 1 given to none
    watch, clock, observer = guard(member, others={0, 2}, held={3})
    await watch.check()
    clock.now = SESSION + 1
    await watch.check()
    assert observer.seen[-1] == (1,)
    assert watch.adrift is None  # this runner holds what it is given: /health stays healthy
    assert member.rejoins == member.rebalances == (1 if first else 0)  # one starts it
    clock.now = SESSION + 2
    await watch.check()
    assert member.rejoins == (1 if first else 0)


async def test_when_the_first_members_rejoin_did_not_help_every_member_rejoins() -> None:
    member = Member({3}, orphans=frozenset({1}), first=False)
    watch, clock, _ = guard(member, others={0, 2}, held={3})
    await watch.check()
    clock.now = SESSION + 1
    await watch.check()
    assert member.rejoins == 0  # the first member's turn
    clock.now = ESCALATE * SESSION + 1
    await watch.check()
    assert member.rejoins == 1
