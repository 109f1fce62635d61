"""Per-partition operations: the lanes they start (backfill, reconcile, replay, reset_cursor),
pause/resume/trigger, and the ConfigErrors of a partitioned poller."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from integration.simulator import DEFAULT_HISTORY_END, encode_cursor
from integration.simulator.paging import seconds_to_micros
from tests.engine.support import Env
from watukuy import ConfigError, Engine, MemoryStore


def key(partition: str) -> str:
    return f"invoices/{partition}"


def only(engine: Engine, partition: str) -> Any:
    (entry,) = [i for i in engine.inspect() if i.partition == partition]
    return entry


AFTER_HISTORY = encode_cursor((seconds_to_micros(DEFAULT_HISTORY_END) + 1, ""))
"""A resume token after every initial item: a poller starting here skips the history."""


# -- 3. backfill -----------------------------------------------------------------------------


async def test_backfill_reads_history_in_its_own_lane_emitting_only_unseen_or_changed_items(
    env: Env,
) -> None:
    poller = env.make_poller(limit=3, cursor={"strategy": "token", "initial": AFTER_HISTORY})
    engine = env.make_engine(poller)
    recorder = env.recorder(engine)
    tenant = env.tid(0)
    history = [i["id"] for i in env.sim.items(tenant)]

    await engine.tick()
    assert recorder.events == []  # live starts after the history

    created = env.sim.create_item(tenant)
    env.clock.advance(900)  # an idle poll lengthened the interval
    await engine.tick()
    assert [(e.subject, e.type, e.lane, e.sequence) for e in recorder.take()] == [
        (created["id"], "created", "live", 1)
    ]
    changed = env.sim.update_item(tenant, created["id"], amount=99.0)  # not seen live yet
    requests = {t.id: env.sim.request_count(t.id) for t in env.tenants}

    await engine.backfill("invoices", from_=None, partition=tenant)

    assert only(engine, tenant).backfill is True
    assert only(engine, env.tid(1)).backfill is False
    await engine.tick()  # the clock did not move: the backfill lane is due at once

    events = recorder.take()
    assert [(e.subject, e.type) for e in events] == [(i, "created") for i in history] + [
        (created["id"], "updated")
    ]
    assert {e.lane for e in events} == {"backfill"}
    assert [e.sequence for e in events] == list(range(2, 13))
    assert events[-1].version == changed["etag"]
    assert only(engine, tenant).backfill is False
    assert env.sim.log(tenant)[requests[tenant]].query.get("cursor") is None  # from the start
    assert {t: env.sim.request_count(t) for t in requests if t != tenant} == {
        t: n for t, n in requests.items() if t != tenant
    }

    requests = env.sim.request_count(tenant)
    env.clock.advance(900)
    await engine.tick()  # live catches up on the change without repeating it
    assert recorder.events == []
    assert env.sim.request_count(tenant) == requests + 1


# -- 3. reconcile ----------------------------------------------------------------------------


async def test_reconcile_finds_a_deleted_item(env: Env) -> None:
    engine = env.make_engine(env.make_poller(limit=3))
    recorder = env.recorder(engine)
    tenant = env.tid(1)
    await engine.tick()
    originals = {e.subject: e for e in recorder.take()}
    gone = env.sim.items(tenant)[5]
    env.sim.delete_item(tenant, gone["id"])

    env.clock.advance(30)
    await engine.tick()
    assert recorder.events == []  # an incremental poll cannot see a deletion

    await engine.reconcile("invoices", partition=tenant)
    await engine.tick()

    (deleted,) = recorder.take()
    assert (deleted.partition, deleted.subject, deleted.type, deleted.lane) == (
        tenant,
        gone["id"],
        "deleted",
        "reconcile",
    )
    assert deleted.sequence == 11
    assert deleted.version == gone["etag"]
    assert deleted.data is None
    assert deleted.id != originals[gone["id"]].id
    assert only(engine, tenant).reconcile is False

    await engine.reconcile("invoices", partition=tenant)
    await engine.tick()
    assert recorder.events == []  # already known to be gone

    again = env.sim.create_item(tenant, id=gone["id"])
    env.clock.advance(900)
    await engine.tick()
    assert [(e.subject, e.type, e.sequence) for e in recorder.take()] == [
        (again["id"], "created", 12)
    ]


# -- 3. replay -------------------------------------------------------------------------------


async def _replay_scenario(env: Env, conditional: bool) -> None:
    engine = env.make_engine(env.make_poller(fetch=env.token_fetch(3, conditional=conditional)))
    recorder = env.recorder(engine)
    tenant = env.tid(0)
    await engine.tick()
    originals = recorder.of(tenant)
    recorder.take()

    await engine.replay("invoices", from_=None, partition=tenant)
    assert only(engine, tenant).replaying is True
    await engine.tick()

    replayed = recorder.take()
    assert [e.partition for e in replayed] == [tenant] * 10
    assert [e.id for e in replayed] == [e.id for e in originals]
    assert [e.subject for e in replayed] == [e.subject for e in originals]
    assert [e.version for e in replayed] == [e.version for e in originals]
    assert {(e.type, e.lane) for e in replayed} == {("updated", "live")}
    assert [e.sequence for e in replayed] == list(range(11, 21))
    assert only(engine, tenant).replaying is False

    env.clock.advance(30)
    await engine.tick()
    assert recorder.events == []  # caught up: unchanged items are quiet again


async def test_replay_from_the_start_re_emits_unchanged_items_with_their_ids(env: Env) -> None:
    await _replay_scenario(env, conditional=True)


async def test_replay_re_emits_unchanged_items_with_their_ids_when_the_vendor_never_says_304(
    env: Env,
) -> None:
    await _replay_scenario(env, conditional=False)


# -- 3. reset_cursor -------------------------------------------------------------------------


async def _reset_scenario(env: Env, conditional: bool) -> None:
    engine = env.make_engine(env.make_poller(fetch=env.token_fetch(3, conditional=conditional)))
    recorder = env.recorder(engine)
    tenant = env.tid(2)
    await engine.tick()
    originals = recorder.of(tenant)
    recorder.take()

    await engine.reset_cursor("invoices", partition=tenant, to=None, clear_snapshot=True)
    assert engine.store.snapshots[key(tenant)] == {}  # type: ignore[attr-defined]
    await engine.tick()  # due at once

    again = recorder.take()
    assert [(e.partition, e.type, e.lane) for e in again] == [(tenant, "created", "live")] * 10
    assert [e.id for e in again] == [e.id for e in originals]
    assert [e.sequence for e in again] == list(range(11, 21))


async def test_reset_cursor_with_clear_snapshot_re_emits_everything_as_created(env: Env) -> None:
    await _reset_scenario(env, conditional=True)


async def test_reset_cursor_with_clear_snapshot_re_emits_everything_when_never_304(
    env: Env,
) -> None:
    await _reset_scenario(env, conditional=False)


async def test_after_reset_cursor_the_live_lane_still_sees_new_items(env: Env) -> None:
    engine = env.make_engine(env.make_poller(limit=3))
    recorder = env.recorder(engine)
    tenant = env.tid(0)
    await engine.tick()
    recorder.take()

    await engine.reset_cursor("invoices", partition=tenant, to=None)
    await engine.tick()
    assert recorder.events == []  # re-read: nothing new

    created = env.sim.create_item(tenant)
    for _ in range(3):
        env.clock.advance(900)
        await engine.tick()
    assert [(e.subject, e.type) for e in recorder.of(tenant)] == [(created["id"], "created")]


# -- 6. pause, resume, trigger ---------------------------------------------------------------


async def test_pause_stops_polling_that_tenant_only_and_resume_restarts_it(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    paused, running = env.tid(0), env.tid(1)

    await engine.pause("invoices", partition=paused)

    assert only(engine, paused).paused is True
    assert only(engine, paused).next_due is None
    assert only(engine, running).paused is False
    assert store.states[key(paused)].paused == "user"
    requests = env.sim.request_count(paused)
    changed = {t: env.sim.items(t)[0]["id"] for t in (paused, running)}
    for tenant, item in changed.items():
        env.sim.update_item(tenant, item, amount=7.0)
    for _ in range(3):
        env.clock.advance(900)
        await engine.tick()

    assert env.sim.request_count(paused) == requests
    assert [(e.partition, e.subject) for e in recorder.take()] == [(running, changed[running])]

    await engine.resume("invoices", partition=paused)
    assert only(engine, paused).paused is False
    await engine.tick()  # overdue: polled at once

    assert [(e.partition, e.subject, e.type) for e in recorder.take()] == [
        (paused, changed[paused], "updated")
    ]
    assert store.states[key(paused)].paused is None


async def test_trigger_makes_a_key_due_now_before_its_interval(env: Env, engine: Engine) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    tenant = env.tid(2)
    item = env.sim.items(tenant)[3]
    env.sim.update_item(tenant, item["id"], amount=8.0)
    env.clock.advance(10)
    requests = {t.id: env.sim.request_count(t.id) for t in env.tenants}

    await engine.tick()
    assert recorder.events == []
    assert {t.id: env.sim.request_count(t.id) for t in env.tenants} == requests

    await engine.trigger("invoices", partition=tenant)
    assert only(engine, tenant).next_due.timestamp() == env.clock.now()
    assert only(engine, env.tid(0)).next_due.timestamp() == env.clock.now() + 20
    await engine.tick()

    assert [(e.partition, e.subject, e.type) for e in recorder.take()] == [
        (tenant, item["id"], "updated")
    ]
    after = {t.id: env.sim.request_count(t.id) for t in env.tenants}
    assert after == {**requests, tenant: requests[tenant] + 1}
    assert only(engine, tenant).interval == 30.0  # a trigger says nothing about the rate


# -- 6. ConfigErrors -------------------------------------------------------------------------

Operation = Callable[..., Awaitable[Any]]

OPERATIONS: dict[str, Operation] = {
    "trigger": lambda e, p, **kw: e.trigger(p, **kw),
    "pause": lambda e, p, **kw: e.pause(p, **kw),
    "resume": lambda e, p, **kw: e.resume(p, **kw),
    "backfill": lambda e, p, **kw: e.backfill(p, from_=None, **kw),
    "replay": lambda e, p, **kw: e.replay(p, from_="2026-09-01T00:00:00Z", **kw),
    "reset_cursor": lambda e, p, **kw: e.reset_cursor(p, to=None, clear_snapshot=True, **kw),
    "reconcile": lambda e, p, **kw: e.reconcile(p, **kw),
    "parked.list": lambda e, p, **kw: e.parked.list(p, kind="poison", **kw),
    "parked.retry": lambda e, p, **kw: e.parked.retry(p, [], **kw),
}


@pytest.mark.parametrize("operation", OPERATIONS.values(), ids=OPERATIONS.keys())
async def test_an_operation_without_partition_on_a_partitioned_poller_raises(
    env: Env, engine: Engine, store: MemoryStore, operation: Operation
) -> None:
    await engine.tick()
    commits = store.commits
    states = dict(store.states)

    with pytest.raises(ConfigError) as raised:
        await operation(engine, "invoices")

    assert str(raised.value) == "poller 'invoices' is partitioned; pass partition=..."
    assert store.commits == commits
    assert store.states == states


@pytest.mark.parametrize("operation", OPERATIONS.values(), ids=OPERATIONS.keys())
async def test_an_operation_without_partition_raises_before_the_first_tick(
    env: Env, engine: Engine, operation: Operation
) -> None:
    with pytest.raises(ConfigError, match=re.escape("pass partition=...")):
        await operation(engine, "invoices")


@pytest.mark.parametrize("operation", OPERATIONS.values(), ids=OPERATIONS.keys())
async def test_an_operation_on_an_unknown_poller_or_partition_names_it(
    env: Env, engine: Engine, operation: Operation
) -> None:
    with pytest.raises(ConfigError, match=re.escape("unknown poller 'nope'")):
        await operation(engine, "nope", partition=env.tid(0))
    with pytest.raises(ConfigError, match=re.escape("has no active partition 't_9999'")):
        await operation(engine, "invoices", partition="t_9999")


async def test_other_entry_points_name_an_unknown_poller(env: Env, engine: Engine) -> None:
    with pytest.raises(ConfigError, match=re.escape("unknown poller 'nope'")):
        await engine.partitions.list("nope")
    with pytest.raises(ConfigError, match=re.escape("unknown poller 'nope'")):
        engine.on("nope", lambda event, ctx: None)
    with pytest.raises(ConfigError, match=re.escape("unknown poller 'nope'")):
        engine.subscribe("nope")


async def test_backfill_advances_even_when_every_tick_finds_live_due(env: Env) -> None:
    # A caller that ticks less often than the interval always finds the live lane due; the
    # backfill must still get its turn after it in the same tick, or it would never run.
    poller = env.make_poller(limit=3, cursor={"strategy": "token", "initial": AFTER_HISTORY})
    engine = env.make_engine(poller)
    recorder = env.recorder(engine)
    tenant = env.tid(0)
    history = [i["id"] for i in env.sim.items(tenant)]
    await engine.tick()
    await engine.backfill("invoices", from_=None, partition=tenant)

    env.clock.advance(3600)  # live is due again at this tick
    await engine.tick()

    events = recorder.take()
    assert [e.subject for e in events if e.lane == "backfill"] == history
    assert only(engine, tenant).backfill is False
