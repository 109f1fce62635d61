"""A runner's group consumer fenced by a member with its group.instance.id: once, it rejoins
with a new consumer (a JoinGroup retried across a broker restart fences the instance's own
earlier attempt); twice within the window, another process has its runner.id and it stops
with one line saying so. Found by the fault suite (zombie and broker-outage scenarios)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from confluent_kafka import KafkaError

from tests.clock import ManualClock
from watukuy.store.kafka.lease import Leases
from watukuy.store.kafka.rebalance import DUPLICATE_RUNNER, GroupFailed, Membership
from watukuy.store.kafka.topics import TopicLayout

FENCED = "Fatal error: Broker: Static consumer fenced by other consumer with same group.instance.id"


class Message:
    def __init__(self, error: KafkaError) -> None:
        self._error = error

    def error(self) -> KafkaError:
        return self._error


class FakeGroup:
    """A group consumer whose next poll returns ``errors`` one by one."""

    def __init__(self, *errors: KafkaError) -> None:
        self.errors = list(errors)
        self.closed = False
        self.subscribed: list[list[str]] = []
        self.static = True  # with group.instance.id

    def poll(self, timeout: float) -> Message | None:
        return Message(self.errors.pop(0)) if self.errors else None

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.subscribed.append(topics)

    def close(self) -> None:
        self.closed = True

    def assignment(self) -> list[Any]:
        return []


class Nothing:
    def drop(self, partitions: list[int]) -> None: ...

    def fail_unowned(self, leases: Leases) -> None: ...


def membership(
    group: FakeGroup, rebuilt: list[FakeGroup], clock: ManualClock
) -> tuple[Membership, Leases]:
    leases = Leases()
    leases.grant(0)
    leases.grant(3)

    def rebuild(dead: Any, static: bool = True) -> Any:
        fresh = FakeGroup()
        fresh.static = static
        rebuilt.append(fresh)
        return fresh

    made = Membership(
        TopicLayout("p", 4, 1),
        leases,
        lambda notification: None,
        group=cast(Any, group),
        restores=cast(Any, Nothing()),
        requests=cast(Any, Nothing()),
        flush=lambda: None,
        rebuild=rebuild,
        clock=clock,
        fence_window=10.0,
    )
    return made, leases


def fenced() -> KafkaError:
    return KafkaError(KafkaError._FATAL, FENCED)


def test_fenced_once_it_rejoins_with_a_new_consumer() -> None:
    first, rebuilt, clock = FakeGroup(fenced()), list[FakeGroup](), ManualClock()
    member, leases = membership(first, rebuilt, clock)
    member.poll(0)
    assert first.closed
    assert cast(Any, member.group) is rebuilt[0]
    assert rebuilt[0].subscribed == [["p.state"]]
    assert leases.all() == []  # everything it held may be someone else's now


def test_fenced_again_within_the_window_it_stops_saying_why() -> None:
    first, rebuilt, clock = FakeGroup(fenced()), list[FakeGroup](), ManualClock()
    member, _ = membership(first, rebuilt, clock)
    member.poll(0)
    rebuilt[0].errors.append(fenced())
    clock.now += 3
    with pytest.raises(GroupFailed) as raised:
        member.poll(0)
    assert str(raised.value) == DUPLICATE_RUNNER
    assert "runner.id" in DUPLICATE_RUNNER and "\n" not in DUPLICATE_RUNNER


def test_fenced_again_after_the_window_it_rejoins_again() -> None:
    first, rebuilt, clock = FakeGroup(fenced()), list[FakeGroup](), ManualClock()
    member, _ = membership(first, rebuilt, clock)
    member.poll(0)
    rebuilt[0].errors.append(fenced())
    clock.now += 30  # another broker restart, long after
    member.poll(0)
    assert len(rebuilt) == 2


def test_any_other_fatal_consumer_error_stops_the_instance() -> None:
    member, _ = membership(FakeGroup(KafkaError(KafkaError._FATAL, "boom")), [], ManualClock())
    with pytest.raises(GroupFailed, match="the group consumer failed: boom"):
        member.poll(0)


def test_a_non_fatal_error_is_left_to_librdkafka() -> None:
    group = FakeGroup(KafkaError(KafkaError._TRANSPORT, "broker down"))
    member, leases = membership(group, [], ManualClock())
    member.poll(0)
    assert cast(Any, member.group) is group and len(leases.all()) == 2


def test_a_rejoin_on_a_consumer_fenced_meanwhile_goes_the_same_way() -> None:
    # The producer was fenced first (its rejoin comes before the consumer's error is polled):
    # the poll that carries the rejoin out meets the fencing and replaces the consumer.
    first, rebuilt, clock = FakeGroup(fenced()), list[FakeGroup](), ManualClock()
    member, leases = membership(first, rebuilt, clock)
    member.rejoin()
    assert leases.all() == []
    member.poll(0)
    member.settle()
    assert cast(Any, member.group) is rebuilt[0] and first.closed
    second = FakeGroup(fenced())
    member.group = cast(Any, second)
    member.rejoin()
    with pytest.raises(GroupFailed) as raised:
        member.poll(0)
    assert str(raised.value) == DUPLICATE_RUNNER


@pytest.mark.parametrize(("rebalance", "static"), [(False, True), (True, False)])
def test_the_guards_rejoin_is_static_unless_it_must_start_a_rebalance(
    rebalance: bool, static: bool
) -> None:
    first, rebuilt, clock = FakeGroup(), list[FakeGroup](), ManualClock()
    member, leases = membership(first, rebuilt, clock)
    member.replace_member(rebalance=rebalance)
    member.settle()
    assert first.closed and cast(Any, member.group) is rebuilt[0]
    assert rebuilt[0].static is static  # a static join gets its old assignment back at once
    assert rebuilt[0].subscribed == [["p.state"]] and leases.all() == []
