"""The figures a scrape reads of the held keys (``engine.figures``, core/figures) follow every
change of a key: after polls, parked items, retries, pauses, a removal, a connector stopped and
resumed, they show what ``inspect()`` shows, without being built again."""

from __future__ import annotations

from typing import Any

from tests.engine.support import Env
from watukuy import Engine, Event


def same_as_inspect(engine: Engine) -> None:
    now = engine.clock.now()
    rows = engine.figures.table().rows()
    shown = {
        (row.poller, row.partition): (
            None if row.last_success is None else max(0.0, now - row.last_success),
            row.circuit,
            dict(row.parked),
            row.waiting,
        )
        for row in rows
    }
    expected = {
        (i.poller, i.partition): (i.lag, i.circuit, i.parked, i.waiting_newer)
        for i in engine.inspect()
    }
    assert shown == expected
    assert [(row.poller, row.partition) for row in rows] == sorted(expected)


async def test_the_figures_follow_each_change_of_a_key(env: Env) -> None:
    bad, stripped = env.tid(0), env.tid(1)
    base = env.token_fetch()

    async def fetch(ctx: Any) -> Any:
        result = await base(ctx)
        if ctx.partition.key == stripped:  # one item without its id: parked invalid
            result["items"] = [{k: v for k, v in result["items"][0].items() if k != "id"}]
        return result

    engine = env.make_engine(env.make_poller(fetch=fetch))
    broken = True

    async def handler(event: Event, ctx: Any) -> None:
        if broken and event.partition == bad and event.sequence == 3:
            raise RuntimeError("warehouse rejected it")

    engine.on("invoices", handler)
    engine.figures.table()  # followed from here on
    same_as_inspect(engine)
    await engine.tick()
    same_as_inspect(engine)
    shown = {i.partition: i.parked for i in engine.inspect()}
    assert shown[bad]["poison"] == 1
    assert shown[stripped]["invalid"] == 1

    broken = False
    (parked,) = await engine.parked.list("invoices", partition=bad)
    assert await engine.parked.retry("invoices", [parked.id], partition=bad) == [parked.id]
    same_as_inspect(engine)

    await engine.pause("invoices", partition=stripped)
    env.clock.advance(40)
    await engine.tick()
    same_as_inspect(engine)

    await engine.partitions.remove("invoices", env.tid(2))
    same_as_inspect(engine)

    await engine.control("invoices", "stop")
    same_as_inspect(engine)
    assert engine.figures.table().rows() == []
    await engine.control("invoices", "resume")
    env.clock.advance(400)
    await engine.tick()
    same_as_inspect(engine)
    assert len(engine.figures.table().rows()) >= 2
