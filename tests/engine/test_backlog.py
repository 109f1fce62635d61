"""A key watcher says when the engine is still taking in its keys or more keys are due than
``run()`` polls at once (a runner's start, a takeover): the runner's key statuses and its
collector wait for that backlog to drain (issue 42)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from watukuy import Engine, FetchContext, MemoryStore, define_poller


async def until(done: Callable[[], bool]) -> None:
    for _ in range(1000):  # 10 s at most
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not within 10 s")


async def test_a_watcher_sees_the_backlog_of_a_start_until_it_drains() -> None:
    listed, release = asyncio.Event(), asyncio.Event()
    started: list[str] = []

    async def tenants() -> list[dict[str, str]]:
        await listed.wait()
        return [{"key": f"t{n}"} for n in range(6)]

    async def fetch(ctx: FetchContext) -> dict[str, Any]:
        started.append(ctx.partition.key)
        await release.wait()
        return {"items": [{"id": ctx.partition.key}], "cursor": None, "has_more": False}

    poller = define_poller(
        name="tenants",
        partitions=tenants,
        identity=lambda item: item["id"],
        fetch=fetch,
        schedule={"min": "1h", "max": "1h"},
    )
    engine = Engine([poller], store=MemoryStore(), max_concurrency=2)
    watcher = engine.watch_keys()
    assert not watcher.backlogged  # not running: nothing waits for a slot

    async with engine:
        running = asyncio.create_task(engine.run())
        await asyncio.sleep(0.05)
        assert watcher.backlogged  # still listing: its keys are not taken in yet
        listed.set()
        await until(lambda: len(started) >= 2)
        assert watcher.backlogged  # six keys due, two polled at once
        release.set()
        await until(lambda: not watcher.backlogged)
        assert sorted(started) == [f"t{n}" for n in range(6)]  # drained: every key polled
        await engine.stop()
        await running
