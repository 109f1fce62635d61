"""``engine.stop()`` ends ``run()`` whenever it comes: before ``run()`` got going (a SIGTERM
during a runner's start-up) or while it runs; and a stopped engine can run again."""

from __future__ import annotations

import asyncio

from watukuy import Engine


async def test_a_stop_before_run_starts_still_ends_it(engine: Engine) -> None:
    await engine.stop()

    await asyncio.wait_for(engine.run(), timeout=5)  # returns instead of polling forever


async def test_a_stopped_engine_runs_again(engine: Engine) -> None:
    await engine.stop()
    await asyncio.wait_for(engine.run(), timeout=5)

    running = asyncio.create_task(engine.run())
    await asyncio.sleep(0.2)
    assert not running.done()  # the earlier stop was used up by the first run()
    await engine.stop()
    await asyncio.wait_for(running, timeout=5)
