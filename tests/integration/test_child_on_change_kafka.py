"""``parent.poll: on_change`` children on the Kafka store with a local state store, against the
real broker: children restored waiting are not held (nor scheduled) by the engine; a parent's
update polls its child once, its events published once; the child then waits again, and a
restart (on its disk, then cold) finds it waiting, polls nothing, and still answers a trigger
and an operator's ``trigger``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.integration.kafka_support import make_store, read_topic, wait_owned
from watukuy import Engine, ParentSpec, Partition, Poller, define_poller

PARTITIONS = 4
TICKETS = {"acme": ["T1", "T2", "T3"], "globex": ["T1"]}
CHILDREN = sorted(f"{t}/{k}" for t, ids in TICKETS.items() for k in ids)


class Desk:
    def __init__(self) -> None:
        self.versions = {(t, k): 1 for t, ids in TICKETS.items() for k in ids}
        self.comment_polls: list[str] = []

    async def tickets(self, ctx: Any) -> dict[str, Any]:
        tenant = ctx.partition.key
        items = [{"id": k, "v": self.versions[(tenant, k)]} for k in TICKETS[tenant]]
        return {"items": items, "cursor": None}

    async def comments(self, ctx: Any) -> dict[str, Any]:
        self.comment_polls.append(ctx.partition.key)
        tenant, ticket = ctx.partition.key.rsplit("/", 1)
        count = self.versions[(tenant, ticket)]
        return {"items": [{"id": f"{ticket}-c{n}"} for n in range(1, count + 1)], "cursor": None}

    def pollers(self) -> list[Poller]:
        return [
            define_poller(
                name="desk.tickets",
                partitions=lambda: [Partition(t, {}) for t in TICKETS],
                identity=lambda item: item["id"],
                version=lambda item: str(item["v"]),
                fetch=self.tickets,
                cursor={"strategy": "none"},
                schedule={"min": "1s", "max": "1s"},
            ),
            define_poller(
                name="desk.comments",
                parent=ParentSpec("desk.tickets", key=lambda item: item["id"], poll="on_change"),
                identity=lambda item: item["id"],
                fetch=self.comments,
                cursor={"strategy": "none"},
                schedule={"min": "1s", "max": "1s"},  # would poll each second on a timer
            ),
        ]


async def run_for(engine: Engine, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        await engine.tick()
        await asyncio.sleep(0.2)


def held_children(engine: Engine) -> list[str]:
    return sorted(i.partition for i in engine.inspect() if i.poller == "desk.comments")


async def until_polled(engine: Engine, desk: Desk, count: int) -> None:
    async with asyncio.timeout(60):
        while len(desk.comment_polls) < count:
            await engine.tick()
            await asyncio.sleep(0.2)


async def test_children_wait_on_disk_and_wake_on_their_parents_changes(
    kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    desk = Desk()

    async def started(runner: str, state_dir: Path) -> Engine:
        store = make_store(kafka_bootstrap, prefix, runner, partitions=PARTITIONS,
                           state_dir=str(state_dir), standby_replicas=0)  # fmt: skip
        engine = Engine(desk.pollers(), store=store)
        await engine.__aenter__()
        await wait_owned(store, PARTITIONS)
        return engine

    first = await started("r1", tmp_path / "disk")
    try:
        await until_polled(first, desk, len(CHILDREN))  # each created and polled once
        await run_for(first, 2.5)
        assert sorted(desk.comment_polls) == CHILDREN
        assert held_children(first) == []  # all waiting: none held, none scheduled

        desk.versions[("acme", "T2")] = 2
        await until_polled(first, desk, len(CHILDREN) + 1)
        await run_for(first, 2.5)
        assert desk.comment_polls[len(CHILDREN) :] == ["acme/T2"]
        assert held_children(first) == []

        # A user's pause and resume wake a waiting child; a listing then leaves it as it is.
        await first.pause("desk.comments", partition="acme/T1")
        await first.resume("desk.comments", partition="acme/T1")
        await first.partitions.list("desk.tickets")
        await first.partitions.list("desk.comments")
        await run_for(first, 2.5)
        paused = {s.partition: s.paused for s in first.store.states_of("desk.comments")}
        assert paused == dict.fromkeys(CHILDREN)
        assert desk.comment_polls[len(CHILDREN) :] == ["acme/T2"]
    finally:
        await first.close()

    for runner, disk in (("r1", "disk"), ("r2", "cold")):  # on its disk, then from Kafka alone
        engine = await started(runner, tmp_path / disk)
        try:
            before = len(desk.comment_polls)
            await run_for(engine, 2.5)
            assert len(desk.comment_polls) == before  # restored waiting: nothing polled
            assert held_children(engine) == []
            await engine.trigger("desk.comments", partition="globex/T1")
            desk.versions[("acme", "T3")] += 1
            await until_polled(engine, desk, before + 2)
            await run_for(engine, 2.5)
            assert sorted(desk.comment_polls[before:]) == ["acme/T3", "globex/T1"]
            assert held_children(engine) == []
        finally:
            await engine.close()

    events = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.desk.comments")
    subjects = {key: [e["subject"] for e in found] for key, found in events.by_key.items()}
    assert subjects == {
        "desk.comments/acme/T1": ["T1-c1"],
        "desk.comments/acme/T2": ["T2-c1", "T2-c2"],
        "desk.comments/acme/T3": ["T3-c1", "T3-c2", "T3-c3"],
        "desk.comments/globex/T1": ["T1-c1"],
    }
    assert all(events.sequences(key) == list(range(1, len(v) + 1)) for key, v in subjects.items())
