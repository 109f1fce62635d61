"""Partitions as the engine sees them: shapes ``partitions()`` may return, key validation, the
unpartitioned poller, and the refresh/add/remove/return lifecycle of a tenant."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from tests.engine.support import Env
from watukuy import ConfigError, Engine, MemoryStore, Partition

REFRESH = 300.0  # the default partitions_refresh, "5m"


def key(partition: str) -> str:
    return f"invoices/{partition}"


# -- 1. what partitions() may return ----------------------------------------------------------


def _as_partition(tenant: Any) -> Partition:
    return Partition(key=tenant.id, data=tenant)


def _as_dict(tenant: Any) -> dict[str, Any]:
    return {"key": tenant.id, "data": tenant}


@pytest.mark.parametrize("entry", [_as_partition, _as_dict], ids=["Partition", "dict"])
@pytest.mark.parametrize("container", [list, tuple, iter], ids=["list", "tuple", "iterator"])
@pytest.mark.parametrize("awaitable", [False, True], ids=["plain", "awaitable"])
async def test_partitions_may_be_partition_objects_or_dicts_plain_or_awaitable(
    env: Env, entry: Callable[[Any], Any], container: Callable[[Any], Any], awaitable: bool
) -> None:
    def listing() -> Any:
        return container([entry(t) for t in env.tenants])

    async def listing_later() -> Any:
        return listing()

    engine = env.make_engine(env.make_poller(partitions=listing_later if awaitable else listing))
    recorder = env.recorder(engine)

    current = await engine.partitions.list("invoices")

    ids = [t.id for t in env.tenants]
    assert [p.key for p in current] == ids
    assert all(isinstance(p, Partition) for p in current)
    assert [p.data for p in current] == env.tenants

    await engine.tick()

    assert [i.partition for i in engine.inspect()] == ids
    assert sorted({e.partition for e in recorder.events}) == ids
    assert len(recorder.events) == 30
    # The handler context carries the very data partitions() returned.
    by_partition = {
        e.partition: c.partition.data
        for e, c in zip(recorder.events, recorder.contexts, strict=True)
    }
    assert by_partition == {t.id: t for t in env.tenants}


@pytest.mark.parametrize(
    ("listing", "message"),
    [
        ([{"key": "", "data": None}], "partition keys must be non-empty strings, got ''"),
        ([Partition(key="")], "partition keys must be non-empty strings, got ''"),
        ([{"data": "no key"}], "partition keys must be non-empty strings, got None"),
        ([{"key": 42}], "partition keys must be non-empty strings, got 42"),
        ([{"key": "a"}, Partition(key="b"), {"key": "a"}], "duplicate partition key 'a'"),
        ([Partition(key="a"), Partition(key="a")], "duplicate partition key 'a'"),
    ],
    ids=["empty-dict", "empty-partition", "missing", "not-a-string", "dup-mixed", "dup"],
)
async def test_bad_partition_keys_raise_config_error(
    env: Env, listing: list[Any], message: str
) -> None:
    engine = env.make_engine(env.make_poller(partitions=lambda: listing))

    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        await engine.partitions.list("invoices")

    assert "poller 'invoices'" in str(raised.value)


async def test_bad_partition_keys_at_tick_are_logged_and_nothing_is_polled(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    engine = env.make_engine(env.make_poller(partitions=lambda: [{"key": ""}]))

    with caplog.at_level(logging.WARNING, logger="watukuy.partitions"):
        await engine.tick()

    assert engine.inspect() == []
    assert env.sim.request_count() == 0
    assert "partition keys must be non-empty strings" in caplog.text


async def test_a_poller_without_partitions_has_one_partition_keyed_empty(env: Env) -> None:
    tenant = env.tenants[0]
    seen_partitions: list[Partition] = []
    token_fetch = env.token_fetch(tenant=tenant)  # the one tenant is part of the poller

    async def fetch(ctx: Any) -> Any:
        seen_partitions.append(ctx.partition)
        return await token_fetch(ctx)

    poller = env.make_poller(partitions=None, fetch=fetch)
    engine = env.make_engine(poller)
    recorder = env.recorder(engine)

    assert await engine.partitions.list("invoices") == [Partition(key="")]
    await engine.tick()

    assert seen_partitions == [Partition(key="", data=None)]
    assert [(i.poller, i.partition) for i in engine.inspect()] == [("invoices", "")]
    assert len(recorder.events) == 10
    assert {e.partition for e in recorder.events} == {""}
    assert [e.sequence for e in recorder.events] == list(range(1, 11))
    assert recorder.contexts[0].partition == Partition(key="")
    assert set(engine.store.states) == {"invoices/"}  # type: ignore[attr-defined]

    # Operations need no partition= here, and refuse one.
    env.sim.update_item(tenant.id, env.sim.items(tenant.id)[0]["id"], amount=1.5)
    await engine.trigger("invoices")
    await engine.tick()
    assert [e.type for e in recorder.events[10:]] == ["updated"]
    with pytest.raises(ConfigError, match="poller 'invoices' has no partitions; omit partition="):
        await engine.trigger("invoices", partition=tenant.id)


# -- 5. refresh, add, remove, return ------------------------------------------------------------


async def test_refresh_after_partitions_refresh_picks_up_an_added_tenant_due_at_once(
    env: Env, engine: Engine
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    calls = env.partitions_calls
    added = env.sim.add_tenant()

    env.clock.advance(REFRESH - 1)
    await engine.tick()

    assert env.partitions_calls == calls  # not refreshed yet
    assert added.id not in [i.partition for i in engine.inspect()]
    assert env.sim.request_count(added.id) == 0

    env.clock.advance(1)
    await engine.tick()

    assert env.partitions_calls == calls + 1
    assert added.id in [i.partition for i in engine.inspect()]
    events = recorder.of(added.id)
    assert [e.type for e in events] == ["created"] * 10
    assert [e.sequence for e in events] == list(range(1, 11))
    assert {e.subject for e in events} == {i["id"] for i in env.sim.items(added.id)}


async def test_engine_partitions_list_forces_a_refresh(env: Env, engine: Engine) -> None:
    await engine.tick()
    added = env.sim.add_tenant()

    current = await engine.partitions.list("invoices")

    assert added.id in [p.key for p in current]
    assert added.id in [i.partition for i in engine.inspect()]
    recorder = env.recorder(engine)
    await engine.tick()  # due at once, no clock movement needed
    assert len(recorder.of(added.id)) == 10


async def test_partition_data_is_taken_afresh_at_each_refresh(env: Env) -> None:
    generation = 1

    def partitions() -> list[dict[str, Any]]:
        return [{"key": t.id, "data": {"tenant": t, "gen": generation}} for t in env.tenants]

    base = env.token_fetch()
    fetched: list[tuple[str, int]] = []

    async def fetch(ctx: Any) -> Any:
        fetched.append((ctx.partition.key, ctx.partition.data["gen"]))
        return await base(
            replace(ctx, partition=Partition(ctx.partition.key, ctx.partition.data["tenant"]))
        )

    engine = env.make_engine(env.make_poller(partitions=partitions, fetch=fetch))
    recorder = env.recorder(engine)
    await engine.tick()
    assert {gen for _, gen in fetched} == {1}
    assert {c.partition.data["gen"] for c in recorder.contexts} == {1}
    recorder.take()

    generation = 2  # e.g. rotated credentials
    tenant = env.tid(0)
    env.sim.update_item(tenant, env.sim.items(tenant)[0]["id"], amount=1.0)
    env.clock.advance(REFRESH)
    fetched.clear()
    await engine.tick()

    assert sorted(fetched) == [(t.id, 2) for t in env.tenants]
    assert [
        (e.partition, c.partition.data["gen"])
        for e, c in zip(recorder.events, recorder.contexts, strict=True)
    ] == [(tenant, 2)]


async def test_removed_tenant_is_paused_kept_in_store_and_continues_when_it_returns(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    gone, other = env.tid(0), env.tid(1)
    first = recorder.of(gone)
    recorder.take()
    state_before = store.states[key(gone)]

    env.hidden.add(gone)
    env.clock.advance(REFRESH)
    requests = env.sim.request_count(gone)
    await engine.tick()

    assert gone not in [i.partition for i in engine.inspect()]
    assert env.sim.request_count(gone) == requests
    stored = store.states[key(gone)]
    assert stored.paused == "removed"
    assert stored.live == state_before.live
    assert stored.sequence == 10
    assert len(store.snapshots[key(gone)]) == 10
    assert key(gone) in store.keys_with_records()
    with pytest.raises(ConfigError, match=f"has no active partition '{gone}'"):
        await engine.trigger("invoices", partition=gone)

    # While away it changes, and is still not polled.
    changed = env.sim.update_item(gone, env.sim.items(gone)[3]["id"], amount=9.99)
    created = env.sim.create_item(gone)
    env.sim.update_item(other, env.sim.items(other)[0]["id"], amount=1.0)
    env.clock.advance(REFRESH)
    await engine.tick()
    assert env.sim.request_count(gone) == requests
    assert recorder.of(gone) == []
    assert [e.partition for e in recorder.take()] == [other]

    env.hidden.discard(gone)
    env.clock.advance(REFRESH)
    await engine.tick()

    back = recorder.of(gone)
    assert [(e.subject, e.type, e.sequence) for e in back] == [
        (changed["id"], "updated", 11),
        (created["id"], "created", 12),
    ]
    assert not {e.id for e in back} & {e.id for e in first}
    assert store.states[key(gone)].paused is None
    assert [i.paused for i in engine.inspect() if i.partition == gone] == [False]


async def test_a_user_paused_tenant_that_is_removed_and_returns_stays_paused(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    await engine.tick()
    tenant = env.tid(0)
    await engine.pause("invoices", partition=tenant)
    env.hidden.add(tenant)
    env.clock.advance(REFRESH)
    await engine.tick()
    env.hidden.discard(tenant)
    env.clock.advance(REFRESH)
    requests = env.sim.request_count(tenant)

    await engine.tick()

    assert store.states[key(tenant)].paused == "user"
    assert [i.paused for i in engine.inspect() if i.partition == tenant] == [True]
    assert env.sim.request_count(tenant) == requests


async def test_a_failing_partitions_callable_keeps_the_previous_list(
    env: Env, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    added = env.sim.add_tenant()
    env.partitions_error = RuntimeError("tenant db is down")
    env.clock.advance(REFRESH)
    tenant = env.tid(1)
    env.sim.update_item(tenant, env.sim.items(tenant)[0]["id"], amount=3.0)

    with caplog.at_level(logging.WARNING, logger="watukuy.partitions"):
        await engine.tick()

    assert (
        "poller 'invoices': partitions() failed, keeping the previous 3 partition(s): "
        "RuntimeError: tenant db is down"
    ) in caplog.text
    assert [i.partition for i in engine.inspect()] == [env.tid(0), env.tid(1), env.tid(2)]
    assert all(not i.paused for i in engine.inspect())
    assert [(e.partition, e.type) for e in recorder.take()] == [(tenant, "updated")]
    assert env.sim.request_count(added.id) == 0

    env.partitions_error = None
    env.clock.advance(REFRESH)
    await engine.tick()
    assert added.id in [i.partition for i in engine.inspect()]
    assert len(recorder.of(added.id)) == 10


async def test_partitions_remove_leaves_no_record_of_the_key(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    tenant = env.tid(0)
    env.sim.faults(tenant).drop_id = True  # an invalid parked item too
    await engine.tick()
    env.sim.faults(tenant).drop_id = False
    assert store.parked[key(tenant)]
    env.hidden.add(tenant)
    env.clock.advance(REFRESH)
    await engine.tick()
    assert key(tenant) in store.keys_with_records()

    await engine.partitions.remove("invoices", tenant)

    assert key(tenant) not in store.keys_with_records()
    assert await store.load("invoices", tenant) is None
    assert {key(env.tid(1)), key(env.tid(2))} <= store.keys_with_records()
    with pytest.raises(ConfigError, match="unknown poller 'nope'"):
        await engine.partitions.remove("nope", tenant)


async def test_removing_a_listed_partition_deletes_it_and_it_comes_back_fresh(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    tenant = env.tid(0)
    first = recorder.of(tenant)
    recorder.take()

    await engine.partitions.remove("invoices", tenant)

    assert key(tenant) not in store.keys_with_records()
    assert tenant not in [i.partition for i in engine.inspect()]

    await engine.partitions.list("invoices")  # still listed: it is added again, fresh
    await engine.tick()
    again = recorder.of(tenant)
    assert [e.sequence for e in again] == list(range(1, 11))
    assert [e.type for e in again] == ["created"] * 10
    assert [e.id for e in again] == [e.id for e in first]


@dataclass(frozen=True)
class Credentials:
    slug: str
    token: str
    api_secret: str


CANARY = "canary-7f3c1e9a-secret"


def _credentials(env: Env) -> list[dict[str, Any]]:
    return [
        {"key": t.id, "data": Credentials(t.slug, t.token, f"{CANARY}-{t.id}")}
        for t in env.tenants
        if t.id not in env.hidden
    ]


async def test_partition_data_is_never_stored(env: Env) -> None:
    tokens = [t.token for t in env.tenants]
    seen_secrets: list[str] = []

    async def fetch(ctx: Any) -> Any:
        data: Credentials = ctx.partition.data
        seen_secrets.append(data.api_secret)
        response = await ctx.http.get(
            f"{env.base_url}/{data.slug}/items",
            query={"cursor": ctx.cursor.value, "limit": 4},
            headers={"Authorization": f"Bearer {data.token}", "X-Api-Secret": data.api_secret},
        )
        body = await response.json()
        return {
            "items": body["data"],
            "cursor": body["next"] or body["resume"],
            "has_more": body["next"] is not None,
        }

    store = MemoryStore()
    poller = env.make_poller(
        partitions=lambda: _credentials(env), fetch=fetch, handler={"attempts": 1}
    )
    engine = env.make_engine(poller, store=store)
    poisoned = env.tid(0)

    async def handler(event: Any, ctx: Any) -> None:
        if event.partition == poisoned and event.sequence == 1:
            raise RuntimeError(f"cannot upsert {event.subject}")

    engine.on("invoices", handler)
    env.sim.faults(env.tid(1)).drop_id = True  # invalid parked items
    env.sim.faults(env.tid(2)).fail_next = 1  # a failure recorded in the state
    await engine.tick()
    env.sim.faults(env.tid(1)).drop_id = False
    env.hidden.add(env.tid(2))  # a removed partition's unfenced pause
    env.clock.advance(REFRESH)
    await engine.tick()

    assert seen_secrets  # fetch did get the data
    assert store.parked[key(poisoned)] and store.parked[key(env.tid(1))]
    assert store.states[key(env.tid(2))].paused == "removed"
    assert store.outbox["invoices"]
    stored = "\n".join(
        repr(part) for part in (store.states, store.snapshots, store.parked, store.outbox)
    ) + "\n".join(repr(s.to_dict()) for s in store.states.values())
    assert CANARY not in stored
    for token in tokens:
        assert token not in stored


async def test_partition_data_in_the_request_url_is_never_stored(env: Env) -> None:
    async def fetch(ctx: Any) -> Any:
        data: Credentials = ctx.partition.data
        response = await ctx.http.get(
            f"{env.base_url}/{data.slug}/items",
            query={"cursor": ctx.cursor.value, "api_key": data.api_secret},
            headers={"Authorization": f"Bearer {data.token}"},
        )
        body = await response.json()
        return {"items": body["data"], "cursor": body["next"] or body["resume"]}

    store = MemoryStore()
    engine = env.make_engine(
        env.make_poller(partitions=lambda: _credentials(env), fetch=fetch), store=store
    )
    await engine.tick()

    assert len(store.outbox["invoices"]) == 30
    assert CANARY not in repr(store.states)
