"""``parent.poll: on_change`` on the memory store with a fake clock: a child key is polled once
when its parent item creates it, once per ``updated`` of that item, never by a timer; between
changes it is not held (nothing scheduled, not in ``inspect()``), only stored; a failed poll is
retried with backoff, then the key waits again; a trigger committed by the parent survives a
restart; an operator's ``trigger``, ``pause`` and ``resume`` still reach it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from watukuy import ConfigError, Engine, FakeClock, MemoryStore, Partition, define_poller
from watukuy.core.poller import Poller

DAY = 86400.0


@dataclass
class Vendor:
    """Tickets per tenant, comments per ticket; counts the comment fetches per ticket."""

    tickets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    comments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    polls: dict[str, int] = field(default_factory=dict)
    failing: set[str] = field(default_factory=set)

    def listing(self) -> list[Partition]:
        return [Partition(key, {}) for key in self.tickets]

    async def fetch_tickets(self, ctx: Any) -> dict[str, Any]:
        return {"items": [dict(t) for t in self.tickets[ctx.partition.key]], "cursor": None}

    async def fetch_comments(self, ctx: Any) -> dict[str, Any]:
        key = ctx.partition.key
        self.polls[key] = self.polls.get(key, 0) + 1
        if key in self.failing:
            raise ConnectionError("vendor down")
        ticket = ctx.partition.parents[0]
        return {"items": list(self.comments.get(ticket, [])), "cursor": None}

    def update(self, ticket: str, **changes: Any) -> None:
        for item in self.tickets["acme"]:
            if item["id"] == ticket:
                item.update(changes)


def pollers(vendor: Vendor, poll: str | None = "on_change") -> list[Poller]:
    none = {"strategy": "none"}
    parent: dict[str, Any] = {"poller": "desk.tickets", "key": "id"}
    if poll is not None:
        parent["poll"] = poll
    return [
        define_poller(
            name="desk.tickets",
            partitions=vendor.listing,
            identity=lambda item: item["id"],
            fetch=vendor.fetch_tickets,
            cursor=none,
            schedule={"min": "30s", "max": "30s"},
        ),
        define_poller(
            name="desk.comments",
            parent=parent,
            identity=lambda item: item["id"],
            fetch=vendor.fetch_comments,
            cursor=none,
            schedule={"min": "1m", "max": "5m"},
        ),
    ]


@pytest.fixture
def vendor() -> Vendor:
    return Vendor(
        tickets={"acme": [{"id": "T1", "v": 1}, {"id": "T2", "v": 1}]},
        comments={"T1": [{"id": "C1"}], "T2": []},
    )


async def run_for(engine: Engine, clock: FakeClock, seconds: float, step: float = 30) -> None:
    """Tick the engine every ``step`` seconds of the fake clock for ``seconds``."""
    elapsed = 0.0
    while elapsed < seconds:
        clock.advance(step)
        elapsed += step
        await engine.tick()
        await engine.tick()


def next_due_of(engine: Engine, poller: str) -> dict[str, Any]:
    """The held keys of ``poller`` and when each is next due."""
    return {i.partition: i.next_due for i in engine.inspect() if i.poller == poller}


def waits(store: MemoryStore, key: str) -> bool:
    """Whether the child ``key`` is stored waiting for its parent's next change (no due
    time) and is not held in memory by the engine (nothing scheduled, no runtime)."""
    return math.isinf(store.states[f"desk.comments/{key}"].schedule.next_due)


async def test_a_child_polls_once_on_create_once_per_update_never_by_timer(vendor: Vendor) -> None:
    clock, store = FakeClock(), MemoryStore()
    engine = Engine(pollers(vendor), store=store, clock=clock)
    await engine.tick()  # the tickets are polled: their commit creates the children
    await engine.tick()  # created and polled once
    assert vendor.polls == {"acme/T1": 1, "acme/T2": 1}
    assert waits(store, "acme/T1") and waits(store, "acme/T2")
    assert next_due_of(engine, "desk.comments") == {}  # neither held nor scheduled

    # Days pass, the parent polls every 30 s and sees no change: no child is polled again.
    await run_for(engine, clock, 2 * DAY, step=600)
    assert vendor.polls == {"acme/T1": 1, "acme/T2": 1}

    vendor.update("T1", v=2)
    vendor.comments["T1"].append({"id": "C2"})
    await run_for(engine, clock, 30)
    assert vendor.polls == {"acme/T1": 2, "acme/T2": 1}
    assert waits(store, "acme/T1") and next_due_of(engine, "desk.comments") == {}

    vendor.update("T1", v=3)
    await run_for(engine, clock, 30)
    vendor.update("T1", v=4)
    await run_for(engine, clock, 30)
    await run_for(engine, clock, DAY, step=600)
    assert vendor.polls == {"acme/T1": 4, "acme/T2": 1}


async def test_the_default_stays_a_timer(vendor: Vendor) -> None:
    clock = FakeClock()
    engine = Engine(pollers(vendor, poll=None), store=MemoryStore(), clock=clock)
    await engine.tick()
    await engine.tick()
    await run_for(engine, clock, 3600, step=60)
    assert vendor.polls["acme/T2"] > 5
    assert next_due_of(engine, "desk.comments")["acme/T2"] is not None


async def test_a_failed_poll_backs_off_until_it_succeeds_then_waits(vendor: Vendor) -> None:
    clock, store = FakeClock(), MemoryStore()
    vendor.failing.add("acme/T1")
    engine = Engine(pollers(vendor), store=store, clock=clock)
    await engine.tick()
    await engine.tick()
    assert vendor.polls["acme/T1"] == 1
    assert next_due_of(engine, "desk.comments")["acme/T1"] is not None  # a retry timer
    await run_for(engine, clock, 600)
    retries = vendor.polls["acme/T1"]
    assert retries > 1

    vendor.failing.clear()
    await run_for(engine, clock, 3600)
    succeeded = vendor.polls["acme/T1"]
    assert waits(store, "acme/T1") and next_due_of(engine, "desk.comments") == {}
    await run_for(engine, clock, DAY, step=600)
    assert vendor.polls["acme/T1"] == succeeded
    assert vendor.polls["acme/T2"] == 1


async def test_a_trigger_the_parent_committed_survives_a_restart(vendor: Vendor) -> None:
    clock, store = FakeClock(), MemoryStore()
    first = Engine(pollers(vendor), store=store, clock=clock)
    await first.tick()
    await first.tick()
    assert vendor.polls == {"acme/T1": 1, "acme/T2": 1}

    vendor.update("T2", v=2)
    clock.advance(30)
    await first.tick()  # the parent's commit carries T2's trigger; "killed" before the child
    assert [c.partition for c in store.pending.values()] == ["acme/T2"]

    second = Engine(pollers(vendor), store=store, clock=clock)
    await second.tick()
    await second.tick()
    assert vendor.polls == {"acme/T1": 1, "acme/T2": 2}
    assert store.pending == {}

    # A third engine finds every child waiting: nothing is polled again.
    third = Engine(pollers(vendor), store=store, clock=clock)
    await run_for(third, clock, DAY, step=600)
    assert vendor.polls == {"acme/T1": 1, "acme/T2": 2}


async def test_a_trigger_applied_but_not_polled_yet_is_polled_after_a_restart(
    vendor: Vendor,
) -> None:
    clock, store = FakeClock(), MemoryStore()
    first = Engine(pollers(vendor), store=store, clock=clock)
    await first.tick()
    await first.tick()
    vendor.update("T2", v=2)
    vendor.failing.add("acme/T2")  # its poll fails: the state stays due (a retry)
    await run_for(first, clock, 30)
    assert vendor.polls["acme/T2"] == 2

    vendor.failing.clear()
    second = Engine(pollers(vendor), store=store, clock=clock)
    await run_for(second, clock, 3600)
    assert vendor.polls["acme/T2"] == 3
    assert waits(store, "acme/T2") and next_due_of(second, "desk.comments") == {}


async def test_an_operator_trigger_polls_a_waiting_child(vendor: Vendor) -> None:
    clock, store = FakeClock(), MemoryStore()
    engine = Engine(pollers(vendor), store=store, clock=clock)
    await engine.tick()
    await engine.tick()
    assert next_due_of(engine, "desk.comments") == {}  # both dormant
    await engine.trigger("desk.comments", partition="acme/T2")
    await engine.tick()
    assert vendor.polls["acme/T2"] == 2
    await run_for(engine, clock, DAY, step=600)
    assert vendor.polls["acme/T2"] == 2
    assert waits(store, "acme/T2")

    # A user's pause and resume reach a dormant child too; the resumed one waits again.
    await engine.pause("desk.comments", partition="acme/T1")
    assert next_due_of(engine, "desk.comments") == {"acme/T1": None}
    assert store.states["desk.comments/acme/T1"].paused == "user"
    vendor.update("T1", v=2)
    await run_for(engine, clock, 60)
    assert vendor.polls["acme/T1"] == 1  # paused: its parent's change waits for the resume
    await engine.resume("desk.comments", partition="acme/T1")
    await engine.tick()
    assert vendor.polls["acme/T1"] == 2


def test_poll_is_checked_with_its_path(vendor: Vendor) -> None:
    with pytest.raises(ConfigError, match=r"parent\.poll") as caught:
        define_poller(
            name="c",
            parent={"poller": "p", "key": "id", "poll": "sometimes"},
            identity=lambda item: item["id"],
            fetch=vendor.fetch_comments,
        )
    assert "on_change" in str(caught.value)


async def test_a_resumed_child_waiting_is_neither_polled_nor_paused_by_a_listing(
    vendor: Vendor,
) -> None:
    clock, store = FakeClock(), MemoryStore()
    engine = Engine(pollers(vendor), store=store, clock=clock)
    await engine.tick()
    await engine.tick()
    await engine.pause("desk.comments", partition="acme/T1")
    await engine.resume("desk.comments", partition="acme/T1")  # held again, waiting
    await engine.partitions.list("desk.tickets")
    await engine.partitions.list("desk.comments")
    await run_for(engine, clock, DAY, step=600)
    assert vendor.polls == {"acme/T1": 1, "acme/T2": 1}
    assert store.states["desk.comments/acme/T1"].paused is None


async def test_a_removed_tenants_waiting_children_are_paused_and_resume_with_it(
    vendor: Vendor,
) -> None:
    clock, store = FakeClock(), MemoryStore()
    engine = Engine(pollers(vendor), store=store, clock=clock)
    await engine.tick()
    await engine.tick()
    tickets = vendor.tickets.pop("acme")
    await engine.partitions.list("desk.tickets")
    paused = {k: s.paused for k, s in store.states.items() if k.startswith("desk.comments/")}
    assert paused == {"desk.comments/acme/T1": "removed", "desk.comments/acme/T2": "removed"}

    vendor.tickets["acme"] = tickets  # the tenant comes back: its children resume, polled once
    await engine.partitions.list("desk.tickets")
    await run_for(engine, clock, 600)
    assert vendor.polls == {"acme/T1": 2, "acme/T2": 2}
    await run_for(engine, clock, DAY, step=600)
    assert vendor.polls == {"acme/T1": 2, "acme/T2": 2}
    paused = {k: s.paused for k, s in store.states.items() if k.startswith("desk.comments/")}
    assert set(paused.values()) == {None}
