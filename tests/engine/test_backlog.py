"""A key watcher says when more keys are due than ``run()`` polls at once (a runner's start,
a takeover): the runner's key statuses wait for that backlog to drain (issue 42)."""

from __future__ import annotations

import asyncio
from typing import Any

from watukuy import Engine, FetchContext, MemoryStore, define_poller


async def test_a_watcher_sees_the_backlog_of_a_start_until_it_drains() -> None:
    release = asyncio.Event()
    started: list[str] = []

    async def fetch(ctx: FetchContext) -> dict[str, Any]:
        started.append(ctx.partition.key)
        await release.wait()
        return {"items": [{"id": ctx.partition.key}], "cursor": None, "has_more": False}

    poller = define_poller(
        name="tenants",
        partitions=lambda: [{"key": f"t{n}"} for n in range(6)],
        identity=lambda item: item["id"],
        fetch=fetch,
        schedule={"min": "1h", "max": "1h"},
    )
    engine = Engine([poller], store=MemoryStore(), max_concurrency=2)
    watcher = engine.watch_keys()
    assert not watcher.backlogged  # not running: nothing waits for a slot

    async with engine:
        running = asyncio.create_task(engine.run())
        async with asyncio.timeout(10):
            while len(started) < 2:
                await asyncio.sleep(0.01)
        assert watcher.backlogged  # six keys due, two polled at once
        release.set()
        async with asyncio.timeout(10):
            while watcher.backlogged:
                await asyncio.sleep(0.01)
        assert sorted(started) == [f"t{n}" for n in range(6)]  # drained: every key polled
        await engine.stop()
        await running
