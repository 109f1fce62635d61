"""Budgets end to end: one token bucket per budget name, shared by every partition (and every
poller) that names it, handed out fairly.

What is asserted is what a user sees: the requests the vendor simulator received (which
tenant, in which order, at which engine time) and the events the engine emitted. The
simulator below records every API request it answers, in the order it answered them.

Two clocks are used on purpose:

- the token-bucket arithmetic runs on a :class:`FakeClock` under ``tick()``: a budget wait is
  ``clock.wait``, which jumps the fake time forward, so ``tick()`` serves every tenant and
  the time the vendor saw each request is exact enough to check ``rate x elapsed + burst``;
- fairness and weights run under ``run()`` on the real clock with a small rate (a token
  every 20-25 ms, far longer than a local round trip), so every requester is back in the
  queue before the next token: the order of grants is then the budget's choice alone.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from integration.simulator import VendorSimulator
from tests.engine.support import Env, run_until
from watukuy import Engine, FakeClock, MemoryStore, SystemClock
from watukuy.core.budget import Budget, Lane
from watukuy.engine.budgets import BudgetGate


class RecordingSimulator(VendorSimulator):
    """The vendor simulator, also keeping every API request as ``(tenant id, engine time)``
    in the order it answered them."""

    def __init__(self, *args: Any, clock: FakeClock, **kwargs: Any) -> None:
        self.received: list[tuple[str, float]] = []
        self._clock = clock
        super().__init__(*args, now=clock.now, **kwargs)

    def record(self, tenant_id: str | None, path: str, query: dict[str, str], status: int) -> None:
        if tenant_id is not None:
            self.received.append((tenant_id, self._clock.now()))
        super().record(tenant_id, path, query, status)

    @property
    def order(self) -> list[str]:
        return [tenant for tenant, _ in self.received]


@pytest.fixture
def sim(clock: FakeClock) -> RecordingSimulator:
    """Five tenants of 12 items (the engine tests' fixture has three of ten)."""
    return RecordingSimulator(tenants=5, items_per_tenant=12, seed=1, clock=clock)


def received(env: Env) -> RecordingSimulator:
    assert isinstance(env.sim, RecordingSimulator)
    return env.sim


def only(env: Env, *indexes: int) -> Callable[[], list[dict[str, Any]]]:
    """A ``partitions`` callable listing only the given simulator tenants."""
    tenants = [env.tenants[i] for i in indexes]
    return lambda: [{"key": t.id, "data": t} for t in tenants]


# -- one bucket per budget, shared by every partition -------------------------------------------


async def test_a_budget_is_one_bucket_for_all_partitions_of_its_poller(env: Env) -> None:
    rate, burst = 1.0, 2
    engine = env.make_engine(
        env.make_poller(budget="vendor"), budgets={"vendor": {"rate": "1/s", "burst": burst}}
    )
    recorder = env.recorder(engine)
    sim = received(env)
    started = env.clock.now()

    await engine.tick()

    # Every tenant is served in the tick (waiting for tokens, not skipped) and fully emitted.
    assert sorted(sim.order) == sorted(t.id for t in env.tenants)  # one page each (12 < 50)
    for tenant in env.tenants:
        assert [e.sequence for e in recorder.of(tenant.id)] == list(range(1, 13))
    # ...but through one bucket: 5 requests, 2 from the burst, 3 paid for at 1/s. Five
    # buckets (one per partition) would have let all five through at once.
    assert sum(1 for _, at in sim.received if at == started) <= burst
    assert env.clock.now() - started >= (len(env.tenants) - burst) / rate
    for _, at in sim.received:
        seen_by_then = sum(1 for _, other in sim.received if other <= at)
        assert seen_by_then <= rate * (at - started) + burst + 1e-6


async def test_without_a_budget_the_same_tick_sends_everything_at_once(env: Env) -> None:
    """The control of the test above: the waiting comes from the budget alone."""
    engine = env.make_engine(env.make_poller())
    started = env.clock.now()

    await engine.tick()

    assert sorted(received(env).order) == sorted(t.id for t in env.tenants)
    assert {at for _, at in received(env).received} == {started}
    assert env.clock.now() == started


async def test_two_pollers_naming_one_budget_share_its_bucket(env: Env) -> None:
    budgets = {"vendor": {"rate": "1/s", "burst": 2}}
    first = env.make_poller(name="first", partitions=only(env, 0, 1, 2), budget="vendor")
    second = env.make_poller(name="second", partitions=only(env, 3, 4), budget="vendor")
    engine = env.make_engine(first, second, budgets=budgets)
    started = env.clock.now()

    await engine.tick()

    assert sorted(received(env).order) == sorted(t.id for t in env.tenants)
    assert env.clock.now() - started >= 3.0  # 5 requests, burst 2, 1/s: one bucket, not two


async def test_pollers_naming_different_budgets_do_not_wait_for_each_other(env: Env) -> None:
    budgets = {"a": {"rate": "1/s", "burst": 3}, "b": {"rate": "1/s", "burst": 2}}
    first = env.make_poller(name="first", partitions=only(env, 0, 1, 2), budget="a")
    second = env.make_poller(name="second", partitions=only(env, 3, 4), budget="b")
    engine = env.make_engine(first, second, budgets=budgets)
    started = env.clock.now()

    await engine.tick()

    assert sorted(received(env).order) == sorted(t.id for t in env.tenants)
    assert env.clock.now() == started  # each bucket's burst covers its own pollers


# -- fairness under contention ----------------------------------------------------------------


async def test_round_robin_takes_turns_so_no_waiting_tenant_starves(
    env: Env,
) -> None:
    """Five tenants page through 6 pages each behind one token every 25 ms: the vendor sees
    them take turns, so no tenant waits long for its next page."""
    tenants = [t.id for t in env.tenants]
    poller = env.make_poller(limit=2, budget="vendor")  # 12 items: 6 pages per tenant
    engine = env.make_engine(
        poller, clock=SystemClock(), budgets={"vendor": {"rate": "40/s", "burst": 1}}
    )
    recorder = env.recorder(engine)
    sim = received(env)

    await run_until(engine, lambda: len(recorder.events) == 12 * len(tenants))

    order = sim.order
    assert sorted(order) == sorted(tenants * 6)
    for tenant in tenants:
        assert [e.sequence for e in recorder.of(tenant)] == list(range(1, 13))
    # The vendor sees them take turns (a strict rotation when nothing is slow). Allowing
    # for a slow round trip that misses its turn once: no tenant is served twice in a row
    # while the others wait, and none waits more than two rounds for its next page.
    assert all(a != b for a, b in itertools.pairwise(order)), order
    for tenant in tenants:
        served = [i for i, t in enumerate(order) if t == tenant]
        gaps = [later - earlier - 1 for earlier, later in itertools.pairwise(served)]
        assert max(gaps) <= 2 * (len(tenants) - 1), (tenant, order)


async def test_weighted_budget_shares_tokens_by_budget_weight(env: Env) -> None:
    """Two pollers, weights 3 and 1, both always waiting: the vendor sees about three
    requests of the heavy one for each of the light one while they contend."""
    heavy, light = env.tid(0), env.tid(1)
    budgets = {"vendor": {"rate": "50/s", "burst": 1, "fairness": "weighted"}}
    engine = env.make_engine(
        env.make_poller(
            name="heavy", partitions=only(env, 0), limit=1, budget="vendor", budget_weight=3
        ),
        env.make_poller(
            name="light", partitions=only(env, 1), limit=1, budget="vendor", budget_weight=1
        ),
        clock=SystemClock(),
        budgets=budgets,
    )
    sim = received(env)

    # Heavy pages through its 12 items one per request; stop as soon as it is done.
    await run_until(engine, lambda: env.sim.request_count(heavy) >= 12)

    order = sim.order
    contended = order[: len(order) - order[::-1].index(heavy)]  # up to heavy's last request
    share = contended.count(light) / len(contended)
    assert 0.15 <= share <= 0.35, (share, order)  # 1/4 wanted; round-robin would give 1/2
    # Neither side starves: the light one is never left out for long.
    assert max(len(list(run)) for t, run in itertools.groupby(contended) if t == heavy) <= 8


async def test_round_robin_budget_ignores_weights(env: Env) -> None:
    """The control of the test above: the same pollers under round-robin alternate."""
    heavy, light = env.tid(0), env.tid(1)
    budgets = {"vendor": {"rate": "50/s", "burst": 1}}
    engine = env.make_engine(
        env.make_poller(
            name="heavy", partitions=only(env, 0), limit=1, budget="vendor", budget_weight=3
        ),
        env.make_poller(
            name="light", partitions=only(env, 1), limit=1, budget="vendor", budget_weight=1
        ),
        clock=SystemClock(),
        budgets=budgets,
    )
    sim = received(env)

    await run_until(engine, lambda: env.sim.request_count(heavy) >= 8)

    contended = sim.order[: len(sim.order) - sim.order[::-1].index(heavy)]
    assert abs(contended.count(light) - contended.count(heavy)) <= 1, contended


# -- the gate: one wake-up per token, concurrent requests, cancellation --------------------------


class CountingClock(SystemClock):
    """The real clock, counting the waits taken on it."""

    def __init__(self) -> None:
        self.sleeps = 0

    async def wait(self, seconds: float) -> None:
        self.sleeps += 1
        await super().wait(seconds)


async def test_waiters_cost_one_wake_up_per_token_not_one_each() -> None:
    clock = CountingClock()
    gate = BudgetGate(Budget("vendor", 400.0, 1.0), clock)
    served: list[str] = []

    async def one(requester: str) -> None:
        await gate.acquire(requester, Lane.LIVE, 1.0)
        served.append(requester)

    requesters = [f"invoices/t_{i:04d}" for i in range(40)]
    await asyncio.wait_for(asyncio.gather(*(one(r) for r in requesters)), timeout=5)

    assert sorted(served) == requesters
    # 39 tokens to wait for (the first comes from the burst). A gate where every waiter
    # sleeps until the next token and checks would sleep about 40 * 39 / 2 = 780 times.
    assert clock.sleeps <= 2 * len(requesters), clock.sleeps


async def test_a_cancelled_waiter_leaves_no_request_behind(clock: FakeClock) -> None:
    gate = BudgetGate(Budget("vendor", 1.0, 1.0), clock)
    await gate.acquire("invoices/a", Lane.LIVE, 1.0)  # the burst
    waiting = asyncio.create_task(gate.acquire("invoices/b", Lane.LIVE, 1.0))
    await asyncio.sleep(0)

    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting

    assert gate.budget.waiting() == []
    # The token b waited for goes to the next requester, and only to it.
    await asyncio.wait_for(gate.acquire("invoices/c", Lane.LIVE, 1.0), timeout=5)
    started = clock.now()
    await asyncio.wait_for(gate.acquire("invoices/d", Lane.LIVE, 1.0), timeout=5)
    assert clock.now() - started == pytest.approx(1.0, abs=0.01)
    assert gate.budget.waiting() == []


async def test_concurrent_requests_of_one_fetch_each_get_a_token(env: Env) -> None:
    """A fetch that sends three requests at once under a budget of 1/s, burst 1: all three
    reach the vendor, one token each, none waits forever."""
    tenant = env.tenants[0]

    async def fetch(ctx: Any) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {tenant.token}"}
        url = f"{env.base_url}/{tenant.slug}/items"
        responses = await asyncio.gather(
            *(ctx.http.get(url, query={"limit": 50, "page": n}, headers=headers) for n in "abc")
        )
        return {"items": (await responses[0].json())["data"], "cursor": None}

    poller = env.make_poller(
        partitions=only(env, 0), fetch=fetch, budget="vendor", fetch_timeout="2s"
    )
    engine = env.make_engine(poller, budgets={"vendor": {"rate": "1/s", "burst": 1}})
    recorder = env.recorder(engine)
    started = env.clock.now()

    await asyncio.wait_for(engine.tick(), timeout=5)

    assert received(env).order == [tenant.id] * 3
    assert len(recorder.of(tenant.id)) == 12
    assert env.clock.now() - started >= 2.0  # three requests, one from the burst
    (entry,) = engine.inspect()
    assert entry.last_error is None


# -- one budget across instances: each holds the share of the keys it owns -----------------------


class SharedStore(MemoryStore):
    """The memory store as one instance of several: it owns only the partitions it is handed,
    and tells the engine when that changes, as the Kafka store does on a rebalance."""

    def __init__(self, owned: Iterable[str] = ()) -> None:
        super().__init__()
        self.owned = set(owned)
        self.watchers: list[Callable[[], None]] = []

    def owns(self, poller: str, partition: str) -> bool:
        return partition in self.owned

    def watch(self, changed: Callable[[], None]) -> None:
        self.watchers.append(changed)

    def hand_over(self, owned: Iterable[str]) -> None:
        self.owned = set(owned)
        for changed in self.watchers:
            changed()


async def paced_tick(env: Env, engine: Engine) -> tuple[list[str], float]:
    """The tenants of the requests the vendor saw during one ``tick()``, and the seconds of
    engine time the tick took: with burst 1 and keys always waiting, the budget's pace."""
    sim = received(env)
    before, started = len(sim.received), env.clock.now()
    await asyncio.wait_for(engine.tick(), timeout=10)
    for index, (_, at) in enumerate(sim.received[before:], start=1):
        assert index <= 1.0 * (at - started) + 1 + 1e-6  # never beyond the whole budget
    return sim.order[before:], env.clock.now() - started


async def test_an_instance_owning_half_the_keys_spends_half_the_budget(env: Env) -> None:
    """Two of four tenants are this instance's: under a budget of 1/s, burst 1, its requests
    come one every 2 s, so with the instance owning the other two the vendor sees 1/s."""
    store = SharedStore({env.tid(0), env.tid(1)})
    poller = env.make_poller(partitions=only(env, 0, 1, 2, 3), limit=4, budget="vendor")
    engine = env.make_engine(poller, store=store, budgets={"vendor": {"rate": "1/s", "burst": 1}})
    recorder = env.recorder(engine)

    requests, elapsed = await paced_tick(env, engine)

    assert set(requests) == {env.tid(0), env.tid(1)}
    assert len(recorder.events) == 24  # both owned tenants in full, 4 items a page
    assert len(requests) >= 6
    assert elapsed == pytest.approx((len(requests) - 1) / 0.5, abs=0.01)


async def test_a_rebalance_resplits_the_budget_and_a_waiter_outlives_owning_nothing(
    env: Env,
) -> None:
    store = SharedStore()  # owns nothing yet: its share is 0
    poller = env.make_poller(partitions=only(env, 0, 1, 2, 3), limit=4, budget="vendor")
    engine = env.make_engine(poller, store=store, budgets={"vendor": {"rate": "1/s", "burst": 1}})

    requests, _ = await paced_tick(env, engine)
    assert requests == []
    assert engine.inspect() == []

    store.hand_over({env.tid(0), env.tid(1)})  # two of four: half the budget
    requests, elapsed = await paced_tick(env, engine)
    assert set(requests) == {env.tid(0), env.tid(1)}
    assert len(requests) >= 6
    # Even the first request paid for its token: a share of 0 held none, and a share that
    # arrives brings no tokens with it, only the rate to earn them.
    assert elapsed == pytest.approx(len(requests) / 0.5, abs=0.01)

    store.hand_over({t.id for t in env.tenants})  # the other instance left: all of it
    env.clock.advance(900)
    requests, elapsed = await paced_tick(env, engine)
    assert set(requests) == {env.tid(i) for i in range(4)}
    assert len(requests) >= 8  # the two new tenants in full, the two others once
    assert elapsed == pytest.approx((len(requests) - 1) / 1.0, abs=0.01)


async def test_a_partitions_refresh_resplits_the_budget(env: Env) -> None:
    """The instance owns tenants 0 and 1. Listed alone, they have the whole budget; once the
    vendor lists two more tenants (owned elsewhere), this instance's share is half."""
    store = SharedStore({env.tid(0), env.tid(1)})
    env.hidden = {env.tid(2), env.tid(3), env.tid(4)}
    poller = env.make_poller(limit=4, budget="vendor")
    engine = env.make_engine(poller, store=store, budgets={"vendor": {"rate": "1/s", "burst": 1}})

    requests, elapsed = await paced_tick(env, engine)
    assert len(requests) >= 6
    assert elapsed == pytest.approx((len(requests) - 1) / 1.0, abs=0.01)

    env.hidden = {env.tid(4)}
    for tenant in (env.tid(0), env.tid(1)):
        for _ in range(8):
            env.sim.create_item(tenant)
    env.clock.advance(900)  # past partitions_refresh (5m): the tick lists the tenants again
    requests, elapsed = await paced_tick(env, engine)
    assert set(requests) == {env.tid(0), env.tid(1)}
    assert len(requests) >= 4
    assert elapsed == pytest.approx((len(requests) - 1) / 0.5, abs=0.01)


async def test_a_waiter_of_a_zero_share_is_served_once_a_share_arrives(clock: FakeClock) -> None:
    gate = BudgetGate(Budget("vendor", 1.0, 1.0), clock)
    gate.rescale(0.0)
    started = clock.now()
    waiting = asyncio.create_task(gate.acquire("invoices/a", Lane.LIVE, 1.0))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()
    assert clock.now() == started  # nobody sleeps towards a token that never comes

    gate.rescale(0.5)
    await asyncio.wait_for(waiting, timeout=5)
    assert clock.now() - started == pytest.approx(2.0, abs=0.01)  # earned at 0.5/s from 0


async def test_a_waiter_sees_a_larger_share_at_once() -> None:
    """At a share of 0.05 of 10/s the next token is 2 s away; given the whole budget, the
    waiter is served within a tenth of a second, not after the sleep the pump had started."""
    gate = BudgetGate(Budget("vendor", 10.0, 1.0), SystemClock())
    gate.rescale(0.05)
    await gate.acquire("invoices/a", Lane.LIVE, 1.0)  # the one token of the burst
    waiting = asyncio.create_task(gate.acquire("invoices/b", Lane.LIVE, 1.0))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    started = time.monotonic()

    gate.rescale(1.0)
    await asyncio.wait_for(waiting, timeout=5)
    assert time.monotonic() - started < 0.5
