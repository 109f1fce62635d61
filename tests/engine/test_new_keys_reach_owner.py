"""A tenant added at the source reaches its owner when a user lists the partitions on another
instance: that instance sends the owner a ``trigger`` for each newly listed key it does not
own, and the owner, finding a command for a key its listing lacks, lists the poller again at
once, holds the key and polls it (not at its own next refresh, 5 minutes later).

Two engines on the memory store stand for two instances of a group: :class:`Member` owns the
keys ``owners`` gives it, and hands the commands it sends to the owner's inbox.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.engine.support import Env
from watukuy import Engine, MemoryStore
from watukuy.core.arrivals import LISTING_SPACING
from watukuy.store.base import Command, KeyCommit

REFRESH = 300.0  # partitions_refresh's default, 5m


class Member(MemoryStore):
    """One instance's store: it owns the keys ``owners`` maps to its name (unlisted keys are
    ``"a"``'s), sends commands to the owner's inbox and keeps the command records its commits
    tombstone."""

    def __init__(self, name: str, group: Group) -> None:
        super().__init__()
        self.name = name
        self.group = group
        self.inbox: list[Command] = []
        self.sent: list[Command] = []
        self.tombstoned: list[str] = []
        self.send_error: Exception | None = None

    def owns(self, poller: str, partition: str) -> bool:
        return self.group.owners.get(partition, "a") == self.name

    def take_commands(self) -> list[Command]:
        taken, self.inbox = self.inbox, []
        return taken

    async def send_command(self, command: Command) -> None:
        if self.send_error is not None:
            raise self.send_error
        self.sent.append(command)
        owner = self.group.members[self.group.owners.get(command.partition, "a")]
        owner.inbox.append(command)  # as the owner's store hands it over

    async def commit(self, batch: Sequence[KeyCommit]) -> None:
        await super().commit(batch)
        for entry in batch:
            self.tombstoned.extend(entry.commands)


@dataclass
class Group:
    env: Env
    owners: dict[str, str] = field(default_factory=dict)
    members: dict[str, Member] = field(default_factory=dict)
    engines: dict[str, Engine] = field(default_factory=dict)
    listings: dict[str, int] = field(default_factory=dict)
    """How many times each instance called ``partitions()``."""

    def start(self, name: str) -> Engine:
        store = Member(name, self)
        self.members[name] = store
        self.listings[name] = 0

        def partitions() -> list[dict[str, Any]]:
            self.listings[name] += 1
            return self.env.partitions()

        poller = self.env.make_poller(partitions=partitions)  # partitions_refresh: 5m
        engine = self.env.make_engine(poller, store=store, owner=name)
        self.engines[name] = engine
        return engine

    def add_tenant(self, owner: str) -> str:
        tenant = self.env.sim.add_tenant().id
        self.owners[tenant] = owner
        return tenant


def held(engine: Engine) -> set[str]:
    return {i.partition for i in engine.inspect()}


@pytest.fixture
async def group(env: Env) -> Group:
    """Instances ``a`` and ``b``; ``b`` owns the second of the simulator's tenants."""
    group = Group(env)
    group.owners[env.tid(1)] = "b"
    a, b = group.start("a"), group.start("b")
    await a.tick()
    await b.tick()
    assert held(a) == {env.tid(0), env.tid(2)} and held(b) == {env.tid(1)}
    env.clock.advance(30)  # the first listings are some seconds old
    return group


async def test_a_tenant_listed_on_one_instance_is_polled_at_once_by_its_owner(
    env: Env, group: Group
) -> None:
    a, b = group.engines["a"], group.engines["b"]
    events = env.recorder(b)
    tenant = group.add_tenant("b")

    listed = await a.partitions.list("invoices")  # GET /connectors/invoices/partitions on a

    assert tenant in [p.key for p in listed]
    assert tenant not in held(a)
    assert [(c.op, c.partition) for c in group.members["a"].sent] == [("trigger", tenant)]

    await b.tick()  # long before b's own refresh (5 minutes)

    assert tenant in held(b)
    assert [e.sequence for e in events.of(tenant)] == list(range(1, 11))  # its whole history
    assert len(group.members["b"].tombstoned) == 1  # the command was applied, once
    assert group.members["b"].inbox == []


async def test_listing_again_tells_nobody_twice(env: Env, group: Group) -> None:
    a, b = group.engines["a"], group.engines["b"]
    tenant = group.add_tenant("b")
    await a.partitions.list("invoices")
    await b.tick()
    requests = env.sim.request_count(tenant)

    for _ in range(3):  # an operator (or a script) listing until the tenant shows up
        env.clock.advance(1)
        await a.partitions.list("invoices")
        await b.tick()

    assert [c.partition for c in group.members["a"].sent] == [tenant]
    assert env.sim.request_count(tenant) == requests  # no poll beyond its schedule
    assert group.members["b"].sent == []  # b's own listings tell nobody: a holds nothing new


async def test_a_burst_of_new_tenants_costs_the_owner_one_listing(env: Env, group: Group) -> None:
    a, b = group.engines["a"], group.engines["b"]
    events = env.recorder(b)
    added = [group.add_tenant("b") for _ in range(5)]
    mine = group.add_tenant("a")
    before = group.listings["b"]

    await a.partitions.list("invoices")
    await b.tick()

    assert sorted(c.partition for c in group.members["a"].sent) == sorted(added)
    assert group.listings["b"] == before + 1
    assert set(added) <= held(b)
    assert mine in held(a) and mine not in held(b)
    for tenant in added:
        assert len(events.of(tenant)) == 10


async def test_the_first_listing_and_scheduled_ones_send_nothing(env: Env, group: Group) -> None:
    # Every instance lists every key at start and then on its schedule: telling owners there
    # would cost each new key a poll per instance. The first listing knows nothing new.
    a = group.engines["a"]
    assert group.members["a"].sent == []
    c = group.start("c")
    await c.partitions.list("invoices")  # c's first listing: every key is there already
    assert group.members["c"].sent == []

    tenant = group.add_tenant("b")
    env.clock.advance(REFRESH)
    await a.tick()  # a's scheduled refresh lists the tenant
    assert group.members["a"].sent == []

    # Asked for a moment later, the listing still tells b: b may not have listed it yet.
    env.clock.advance(10)
    await a.partitions.list("invoices")
    assert [c.partition for c in group.members["a"].sent] == [tenant]

    # One found a whole refresh interval before it is asked for: b has listed it since.
    group.add_tenant("b")
    env.clock.advance(REFRESH)
    await a.tick()
    env.clock.advance(REFRESH)
    await a.partitions.list("invoices")
    assert [c.partition for c in group.members["a"].sent] == [tenant]

    # A stopped connector's keys are held by nobody: its owners list them when it resumes.
    await a.set_target("invoices", "STOPPED")
    group.add_tenant("b")
    env.clock.advance(10)
    await a.partitions.list("invoices")
    assert [c.partition for c in group.members["a"].sent] == [tenant]


async def test_a_tenant_removed_and_added_again_is_told_again(env: Env, group: Group) -> None:
    a, b = group.engines["a"], group.engines["b"]
    tenant = group.add_tenant("b")
    await a.partitions.list("invoices")
    await b.tick()
    env.hidden.add(tenant)  # it leaves the source...
    env.clock.advance(10)
    await a.partitions.list("invoices")
    env.clock.advance(REFRESH)
    await b.tick()
    assert tenant not in held(b)  # paused, state kept

    env.hidden.discard(tenant)  # ...and comes back
    env.clock.advance(10)
    await a.partitions.list("invoices")
    await b.tick()

    assert [c.partition for c in group.members["a"].sent] == [tenant, tenant]
    assert tenant in held(b)


async def test_a_command_for_an_unlisted_key_lists_at_most_every_few_seconds(
    env: Env, group: Group
) -> None:
    # A command whose key the source does not list (yet): the owner lists again now and then
    # while the command waits, not at every retry.
    b = group.engines["b"]
    before = group.listings["b"]
    group.members["b"].inbox.append(Command("c1", "trigger", "invoices", "t_gone", {}, 0.0))

    for _ in range(11):
        await b.tick()
        env.clock.advance(1)

    assert 1 <= group.listings["b"] - before <= 1 + 10 // LISTING_SPACING
    assert group.members["b"].tombstoned == []


async def test_an_owner_that_could_not_be_told_is_told_at_the_next_listing(
    env: Env, group: Group, caplog: pytest.LogCaptureFixture
) -> None:
    a = group.engines["a"]
    tenant = group.add_tenant("b")
    group.members["a"].send_error = ConnectionError("broker unreachable")

    with caplog.at_level(logging.WARNING):
        listed = await a.partitions.list("invoices")  # the listing itself succeeds

    assert tenant in [p.key for p in listed]
    assert any("could not tell the owners of 1 new partition" in m for m in caplog.messages)
    group.members["a"].send_error = None
    env.clock.advance(1)
    await a.partitions.list("invoices")
    assert [c.partition for c in group.members["a"].sent] == [tenant]
