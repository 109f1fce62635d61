"""Polling end to end: cursor strategies, paging and max_pages, a failure mid-poll, 304s,
tick() concurrency and the run() daemon."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.engine.support import Env, Fetch
from watukuy import Engine, MemoryStore, SystemClock


def key(partition: str) -> str:
    return f"invoices/{partition}"


def bearer(tenant: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.token}"}


# -- 2. token cursor ---------------------------------------------------------------------------


async def test_token_cursor_pages_cover_every_item_once_then_a_change_is_one_event(
    env: Env,
) -> None:
    engine = env.make_engine(env.make_poller(limit=3))
    recorder = env.recorder(engine)

    await engine.tick()

    for tenant in env.tenants:
        events = recorder.of(tenant.id)
        items = env.sim.items(tenant.id)
        assert [e.subject for e in events] == [i["id"] for i in items]  # each once, in order
        assert [e.type for e in events] == ["created"] * 10
        assert [e.sequence for e in events] == list(range(1, 11))
        assert [e.version for e in events] == [i["etag"] for i in items]
        assert [e.data for e in events] == items
        assert {(e.poller, e.partition, e.lane) for e in events} == {
            ("invoices", tenant.id, "live")
        }
        log = env.sim.log(tenant.id)
        assert [entry.query["limit"] for entry in log] == ["3"] * 4  # 3 + 3 + 3 + 1
        assert "cursor" not in log[0].query
    recorder.take()

    tenant = env.tid(1)
    item = env.sim.items(tenant)[4]
    updated = env.sim.update_item(tenant, item["id"], amount=12.5)
    env.clock.advance(30)
    await engine.tick()

    assert [(e.partition, e.subject, e.type, e.version, e.sequence) for e in recorder.events] == [
        (tenant, item["id"], "updated", updated["etag"], 11)
    ]
    assert recorder.events[0].data == updated
    # The incremental poll started from the resume token of the last page.
    assert env.sim.log(tenant)[-1].query.get("cursor") is not None


# -- 2. timestamp cursor ---------------------------------------------------------------------


def timestamp_fetch(env: Env, seen: list[tuple[str, Any]]) -> Fetch:
    async def fetch(ctx: Any) -> dict[str, Any]:
        tenant = ctx.partition.data
        seen.append((tenant.id, ctx.cursor.value))
        response = await ctx.http.get(
            f"{env.base_url}/{tenant.slug}/items",
            query={"updated_since": ctx.cursor.value, "limit": 500},
            headers=bearer(tenant),
        )
        return {"items": (await response.json())["data"]}

    return fetch


async def test_timestamp_cursor_reads_changes_since_the_watermark(env: Env) -> None:
    seen: list[tuple[str, Any]] = []
    poller = env.make_poller(
        fetch=timestamp_fetch(env, seen),
        cursor={"strategy": "timestamp", "field": "updated_at"},
    )
    engine = env.make_engine(poller)
    recorder = env.recorder(engine)
    tenant = env.tid(0)

    await engine.tick()

    assert len(recorder.of(tenant)) == 10
    assert [v for t, v in seen if t == tenant] == [None]
    watermark = env.sim.items(tenant)[-1]["updated_at"]
    assert engine.store.states[key(tenant)].live.cursor == watermark  # type: ignore[attr-defined]
    recorder.take()

    env.clock.advance(30)
    await engine.tick()

    # The boundary item comes back (updated_since is inclusive) but is not a change.
    assert recorder.events == []
    assert seen[-1] == (env.tid(2), env.sim.items(env.tid(2))[-1]["updated_at"])
    assert (tenant, watermark) in seen
    assert env.sim.log(tenant)[-1].query["updated_since"] == watermark

    item = env.sim.items(tenant)[2]
    updated = env.sim.update_item(tenant, item["id"], status="paid")
    created = env.sim.create_item(tenant)
    env.clock.advance(200)
    await engine.tick()

    assert [(e.partition, e.subject, e.type, e.sequence) for e in recorder.take()] == [
        (tenant, item["id"], "updated", 11),
        (tenant, created["id"], "created", 12),
    ]
    assert env.sim.log(tenant)[-1].query["updated_since"] == watermark
    assert engine.store.states[key(tenant)].live.cursor == created["updated_at"]  # type: ignore[attr-defined]
    assert updated["updated_at"] < created["updated_at"]

    env.clock.advance(200)
    await engine.tick()
    assert recorder.events == []
    assert env.sim.log(tenant)[-1].query["updated_since"] == created["updated_at"]


# -- 2. no cursor: a full scan every poll ----------------------------------------------------


def scan_fetch(env: Env, limit: int) -> Fetch:
    async def fetch(ctx: Any) -> dict[str, Any]:
        tenant = ctx.partition.data
        response = await ctx.http.get(
            f"{env.base_url}/{tenant.slug}/items",
            query={"cursor": ctx.cursor.value, "limit": limit},
            headers=bearer(tenant),
        )
        body = await response.json()
        return {"items": body["data"], "cursor": body["next"], "has_more": body["next"] is not None}

    return fetch


async def test_cursor_none_scans_everything_and_unchanged_items_produce_nothing(
    env: Env,
) -> None:
    engine = env.make_engine(env.make_poller(fetch=scan_fetch(env, 3), cursor={"strategy": "none"}))
    recorder = env.recorder(engine)
    tenant = env.tid(0)

    await engine.tick()
    assert [e.sequence for e in recorder.of(tenant)] == list(range(1, 11))
    assert engine.store.states[key(tenant)].live.cursor is None  # type: ignore[attr-defined]
    recorder.take()

    for _ in range(3):
        env.clock.advance(900)
        await engine.tick()
    assert recorder.events == []
    # Each poll starts from the beginning again.
    starts = [entry for entry in env.sim.log(tenant) if "cursor" not in entry.query]
    assert len(starts) == 4

    first = env.sim.items(tenant)[0]
    updated = env.sim.update_item(tenant, first["id"], amount=2.0)
    env.clock.advance(900)
    await engine.tick()
    assert [(e.partition, e.subject, e.type, e.version) for e in recorder.take()] == [
        (tenant, first["id"], "updated", updated["etag"])
    ]


async def test_cursor_none_full_scan_sees_a_change_on_a_later_page(env: Env) -> None:
    engine = env.make_engine(env.make_poller(fetch=scan_fetch(env, 3), cursor={"strategy": "none"}))
    recorder = env.recorder(engine)
    tenant = env.tid(0)
    await engine.tick()
    recorder.take()

    item = env.sim.items(tenant)[6]  # on page 3
    updated = env.sim.update_item(tenant, item["id"], amount=2.0)
    created = env.sim.create_item(tenant)
    env.clock.advance(30)
    await engine.tick()

    assert [(e.subject, e.type, e.version) for e in recorder.take()] == [
        (item["id"], "updated", updated["etag"]),
        (created["id"], "created", created["etag"]),
    ]


# -- 2. paging limits and failures mid-poll ----------------------------------------------------


async def test_a_poll_pages_until_has_more_is_false_up_to_max_pages(env: Env) -> None:
    engine = env.make_engine(env.make_poller(limit=2, max_pages=2))
    recorder = env.recorder(engine)
    tenant = env.tid(0)
    items = [i["id"] for i in env.sim.items(tenant)]

    await engine.tick()

    assert [e.subject for e in recorder.of(tenant)] == items[:4]
    assert env.sim.request_count(tenant) == 2
    now = env.clock.now()
    (entry,) = [i for i in engine.inspect() if i.partition == tenant]
    assert entry.next_due is not None and entry.next_due.timestamp() == now  # due again at once
    recorder.take()

    await engine.tick()  # the clock did not move
    assert [e.subject for e in recorder.of(tenant)] == items[4:8]
    assert [e.sequence for e in recorder.of(tenant)] == [5, 6, 7, 8]
    recorder.take()

    await engine.tick()
    assert [e.subject for e in recorder.of(tenant)] == items[8:]
    (entry,) = [i for i in engine.inspect() if i.partition == tenant]
    assert entry.next_due is not None and entry.next_due.timestamp() == now + 30
    recorder.take()

    await engine.tick()
    assert recorder.events == []
    assert env.sim.request_count(tenant) == 5


def fail_second_page(env: Env, tenant: str, base: Fetch) -> Fetch:
    """Serve the first page, then break the vendor for the next request of ``tenant``."""
    calls: Counter[str] = Counter()

    async def fetch(ctx: Any) -> Any:
        result = await base(ctx)
        calls[ctx.partition.key] += 1
        if ctx.partition.key == tenant and calls[tenant] == 1:
            env.sim.faults(tenant).fail_next = 1
        return result

    return fetch


@pytest.mark.parametrize("restart", [False, True], ids=["same-engine", "new-engine"])
async def test_a_failure_mid_poll_keeps_the_committed_pages_and_resumes_after_them(
    env: Env, restart: bool
) -> None:
    tenant = env.tid(0)
    store = MemoryStore()
    poller = env.make_poller(fetch=fail_second_page(env, tenant, env.token_fetch(3)))
    engine = env.make_engine(poller, store=store)
    recorder = env.recorder(engine)
    items = [i["id"] for i in env.sim.items(tenant)]

    await engine.tick()

    assert [(e.subject, e.sequence) for e in recorder.of(tenant)] == [
        (items[0], 1),
        (items[1], 2),
        (items[2], 3),
    ]
    assert [e.status for e in env.sim.log(tenant)] == [200, 503]
    failed_cursor = env.sim.log(tenant)[-1].query["cursor"]
    assert store.states[key(tenant)].live.cursor == failed_cursor
    assert store.states[key(tenant)].sequence == 3
    # The rendered URL carries the tenant's slug: with no template given, it is withheld.
    assert store.states[key(tenant)].last_error == "VendorError: GET <url withheld> -> 503"
    assert [len(recorder.of(t)) for t in (env.tid(1), env.tid(2))] == [10, 10]

    if restart:  # the process died: another engine takes over from the store
        engine = env.make_engine(poller, store=store)
        recorder = env.recorder(engine)
    else:
        recorder.take()
    env.clock.advance(30)  # the retry delay after one failure is schedule.min
    await engine.tick()

    resumed = recorder.of(tenant)
    assert [e.subject for e in resumed] == items[3:]
    assert [e.sequence for e in resumed] == list(range(4, 11))
    assert env.sim.log(tenant)[2].query["cursor"] == failed_cursor
    all_events = [e for e in store.outbox["invoices"] if e.partition == tenant]
    assert sorted(e.subject for e in all_events) == sorted(items)
    assert len({e.id for e in all_events}) == 10


# -- 9. 304 Not Modified ---------------------------------------------------------------------


async def test_a_304_is_a_poll_without_change_and_the_interval_grows(
    env: Env, engine: Engine
) -> None:
    recorder = env.recorder(engine)
    tenant = env.tid(0)
    await engine.tick()
    recorder.take()

    # Caught up, the poller asks for the same URL (the last resume token) every time.
    intervals = []
    for _ in range(3):
        env.clock.advance(900)
        await engine.tick()
        entry = only(engine, tenant)
        intervals.append(entry.interval)
        assert entry.circuit == "closed"
        assert entry.last_error is None
        assert entry.lag == 0.0  # a 304 is a successful poll

    log = env.sim.log(tenant)
    assert [e.status for e in log] == [200, 200, 304, 304]
    assert log[1].query == log[2].query == log[3].query
    assert recorder.events == []
    assert intervals == [117.0, 204.0, 291.0]  # + (15m - 30s) / 10 per idle poll
    cursor = engine.store.states[key(tenant)].live.cursor  # type: ignore[attr-defined]
    assert cursor == log[1].query["cursor"]  # a 304 leaves the cursor where it was

    item = env.sim.items(tenant)[0]
    env.sim.update_item(tenant, item["id"], amount=1.0)
    env.clock.advance(900)
    await engine.tick()
    assert env.sim.log(tenant)[-1].status == 200
    assert [(e.subject, e.type) for e in recorder.of(tenant)] == [(item["id"], "updated")]
    assert only(engine, tenant).interval == 145.5  # halved after a change


def only(engine: Engine, partition: str) -> Any:
    (entry,) = [i for i in engine.inspect() if i.partition == partition]
    return entry


# -- 9. concurrency: tick() and run() ----------------------------------------------------------


async def test_tick_polls_at_most_four_keys_at_once(env: Env) -> None:
    for _ in range(7):
        env.sim.add_tenant(items=1)
    base = env.token_fetch()
    in_flight = 0
    peak = 0

    async def fetch(ctx: Any) -> Any:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0.02)
            return await base(ctx)
        finally:
            in_flight -= 1

    engine = env.make_engine(env.make_poller(fetch=fetch))
    recorder = env.recorder(engine)

    await engine.tick()

    assert len(env.tenants) == 10
    assert peak == 4
    assert {e.partition for e in recorder.events} == {t.id for t in env.tenants}
    assert all(env.sim.request_count(t.id) == 1 for t in env.tenants)


async def wait_for(condition: Callable[[], bool]) -> None:
    """Wait (about 5 s at most) until ``condition()`` holds; it reads outside state."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


async def test_run_polls_until_stop_and_leaves_no_task_behind(env: Env) -> None:
    poller = env.make_poller(schedule={"min": 0.05, "max": 0.2})
    engine = env.make_engine(poller, clock=SystemClock())
    recorder = env.recorder(engine)
    tenant = env.tid(0)
    ours = asyncio.current_task()
    before = asyncio.all_tasks()

    running = asyncio.create_task(engine.run())
    await wait_for(lambda: len(recorder.events) == 30)
    polls = env.sim.request_count(tenant)
    await wait_for(lambda: env.sim.request_count(tenant) >= polls + 2)  # it keeps polling
    item = env.sim.items(tenant)[0]
    env.sim.update_item(tenant, item["id"], amount=4.0)
    await wait_for(lambda: len(recorder.events) == 31)
    assert (recorder.events[-1].subject, recorder.events[-1].type) == (item["id"], "updated")
    assert not running.done()

    await engine.stop()
    assert await asyncio.wait_for(running, timeout=5) is None

    leftover = {
        t for t in asyncio.all_tasks() - before if t is not ours and not _is_simulator_side(t)
    }
    assert leftover == set()
    stopped_at = env.sim.request_count()
    await asyncio.sleep(0.3)
    assert env.sim.request_count() == stopped_at  # nothing polls any more


def _is_simulator_side(task: asyncio.Task[Any]) -> bool:
    """The simulator's aiohttp server keeps a task per open (keep-alive) connection."""
    coro = task.get_coro()
    code = getattr(coro, "cr_code", None)
    return (
        getattr(coro, "__qualname__", "") == "RequestHandler.start"
        and code is not None
        and "aiohttp" in code.co_filename
    )


async def test_run_after_engine_tick_continues_from_the_committed_state(env: Env) -> None:
    poller = env.make_poller(schedule={"min": 0.05, "max": 0.2})
    engine = env.make_engine(poller, clock=SystemClock())
    recorder = env.recorder(engine)
    await engine.tick()
    assert len(recorder.take()) == 30

    tenant = env.tid(2)
    created = env.sim.create_item(tenant)
    running = asyncio.create_task(engine.run())
    try:
        await wait_for(lambda: len(recorder.events) == 1)
    finally:
        await engine.stop()
        await asyncio.wait_for(running, timeout=5)
    assert [(e.partition, e.subject, e.sequence) for e in recorder.events] == [
        (tenant, created["id"], 11)
    ]
