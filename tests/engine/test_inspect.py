"""inspect(): one PollerInspect per active partition, and a failing tenant that stays its own
problem (its circuit, its lag) while the others' events flow in the same tick."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import replace
from datetime import UTC, datetime

from tests.engine.support import Env
from watukuy import Engine, PollerInspect
from watukuy.control.keystatus import KeyStatus, Target, key_status


def only(engine: Engine, partition: str) -> PollerInspect:
    (entry,) = [i for i in engine.inspect() if i.partition == partition]
    return entry


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


async def test_inspect_reports_each_active_partition(env: Env, engine: Engine) -> None:
    assert engine.inspect() == []  # nothing evaluated yet
    await engine.tick()
    start = env.clock.now()

    entries = engine.inspect()

    assert all(isinstance(i, PollerInspect) for i in entries)
    assert [(i.poller, i.partition) for i in entries] == [("invoices", t.id) for t in env.tenants]
    for entry in entries:
        assert entry.paused is False
        assert entry.circuit == "closed"
        assert entry.interval == 30.0
        assert entry.next_due == at(start + 30)
        assert entry.lag == 0.0
        assert entry.parked == {"invalid": 0, "poison": 0}
        assert entry.owner is None
        assert entry.sequence == 10

    env.clock.advance(12)
    assert [i.lag for i in engine.inspect()] == [12.0] * 3
    await engine.pause("invoices", partition=env.tid(1))
    assert [(i.partition, i.paused, i.next_due) for i in engine.inspect()] == [
        (env.tid(0), False, at(start + 30)),
        (env.tid(1), True, None),
        (env.tid(2), False, at(start + 30)),
    ]


async def test_a_failing_tenant_opens_only_its_own_circuit_and_delays_no_one(env: Env) -> None:
    poller = env.make_poller(circuit={"failure_threshold": 2, "cooldown": "60s"})
    engine = env.make_engine(poller)
    recorder = env.recorder(engine)
    sick, healthy = env.tid(0), env.tid(1)
    env.sim.faults(sick).error_rate = 1.0
    start = env.clock.now()

    await engine.tick()

    assert recorder.of(sick) == []
    assert len(recorder.of(healthy)) == 10  # the same tick delivered the healthy tenants
    assert len(recorder.of(env.tid(2))) == 10
    entry = only(engine, sick)
    assert entry.circuit == "closed"  # one failure, threshold 2
    assert entry.lag is None  # never succeeded
    assert entry.last_error is not None and "503" in entry.last_error
    assert entry.next_due == at(start + 30)

    env.clock.advance(30)
    item = env.sim.items(healthy)[0]
    env.sim.update_item(healthy, item["id"], amount=2.0)
    await engine.tick()

    entry = only(engine, sick)
    assert entry.circuit == "open"
    assert entry.next_due == at(start + 30 + 60)  # the cooldown
    assert [(e.subject, e.type) for e in recorder.of(healthy)[10:]] == [(item["id"], "updated")]
    assert only(engine, healthy).circuit == "closed"
    assert only(engine, env.tid(2)).circuit == "closed"
    requests = env.sim.request_count(sick)
    assert requests == 2

    env.clock.advance(59)
    await engine.tick()
    assert env.sim.request_count(sick) == requests  # open: no request before the cooldown

    env.sim.faults(sick).error_rate = 0.0
    env.clock.advance(1)
    await engine.tick()  # the probe succeeds
    assert only(engine, sick).circuit == "closed"
    assert only(engine, sick).lag == 0.0
    assert only(engine, sick).last_error is None
    assert [e.sequence for e in recorder.of(sick)] == list(range(1, 11))


async def test_a_status_round_misses_nothing_that_changed(env: Env, engine: Engine) -> None:
    """What a runner's status round relies on to look at only some keys each second: a key
    not touched since the watcher's last look shows the same inspection (but for the time),
    and while a key's status mark is equal, so is its status, whatever the engine did."""
    watcher = engine.watch_keys()

    def timeless(entry: PollerInspect) -> PollerInspect:
        return replace(entry, lag=None if entry.lag is None else 0.0, throttled_until=None)

    def seen() -> dict[str, tuple[PollerInspect, Hashable, KeyStatus]]:
        """Each key's inspection without the time, its status mark, and its status."""
        shown = {}
        for entry in engine.inspect():
            key = f"{entry.poller}/{entry.partition}"
            (mark,) = watcher.marks([key]).values()
            status = key_status(
                timeless(entry), now=0.0, target=Target(engine.target(entry.poller))
            )
            shown[key] = (timeless(entry), mark, status)
        return shown

    async def tick_later(seconds: float) -> None:
        env.clock.advance(seconds)
        await engine.tick()

    first, sick = env.tid(0), env.tid(1)

    async def change_an_item() -> None:
        env.sim.update_item(first, env.sim.items(first)[0]["id"], amount=7.0)
        await tick_later(30)

    async def throttle() -> None:
        faults = env.sim.faults(sick)
        faults.fail_next, faults.fail_status, faults.retry_after = 1, 429, 40
        await engine.trigger("invoices", partition=sick)
        await engine.tick()
        (shown,) = [i for i in engine.inspect() if i.partition == sick]
        assert shown.throttled_until is not None

    steps = [
        engine.tick,
        lambda: tick_later(1),  # nothing due: nothing moves
        lambda: engine.pause("invoices", partition=first),
        lambda: engine.resume("invoices", partition=first),
        change_an_item,
        throttle,
        lambda: asyncio.sleep(0, env.clock.advance(41)),  # the throttle is over: time alone
        lambda: engine.backfill("invoices", partition=first),
        lambda: tick_later(0),
        lambda: engine.set_target("invoices", "PAUSED"),
        lambda: engine.set_target("invoices", "STOPPED"),
    ]
    before = seen()
    assert watcher.take() == set(before)  # every key held when it began watching
    touched_at_all: set[str] = set()
    marks_moved = 0
    for step in steps:
        await step()
        after = seen()
        touched = watcher.take()
        touched_at_all |= touched
        for key, (shown, mark, status) in after.items():
            if key in before and key not in touched:
                assert before[key][0] == shown, (step, key)
            if key in before and before[key][1] == mark:
                assert before[key][2] == status, (step, key)
            elif key in before:
                marks_moved += 1
        assert set(before) - set(after) <= touched  # a key let go is touched too
        before = after
    assert marks_moved >= 8  # the marks did move with what the steps changed
    assert touched_at_all == {f"invoices/{t.id}" for t in env.tenants}

    await tick_later(0.5)  # nothing happens: no key is touched, so none is looked at again
    assert watcher.take() == set()
