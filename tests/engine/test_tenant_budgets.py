"""Budgets per tenant and several budgets per poller, through the engine (issue 44).

What is asserted is what the vendor saw: which tenant asked when. Several tenants' buckets
wait at once, which a :class:`FakeClock` (each wait jumps it) cannot show, so the engine
runs on the real clock with rates of a token every 50-200 ms, far longer than a local round
trip (``test_budget_sharing``'s recording simulator and sharing store are used as they are).
The gate's own bookkeeping (which buckets it holds) runs on the fake clock.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
from typing import Any

import pytest

from tests.engine.support import Env
from tests.engine.test_budget_sharing import RecordingSimulator, SharedStore, only, received
from watukuy import Engine, FakeClock, Poller, SystemClock, define_poller
from watukuy.config.budgets import engine_budgets
from watukuy.core.budget import Lane
from watukuy.core.errors import ConfigError
from watukuy.core.poller import Partition
from watukuy.core.tenant_budget import TenantBudgetSpec
from watukuy.engine.budgets import SWEEP_EVERY, TenantGate
from watukuy.observe.metrics import PrometheusObserver

pytestmark = pytest.mark.unit


@pytest.fixture
def sim() -> RecordingSimulator:
    """Four tenants of 12 items: with 2 items a page, each asks six times a poll."""
    return RecordingSimulator(tenants=4, items_per_tenant=12, seed=1, clock=SystemClock())  # type: ignore[arg-type]


def gaps(env: Env, tenant: str) -> list[float]:
    """Seconds between the tenant's consecutive requests, as the vendor saw them."""
    times = [at for who, at in received(env).received if who == tenant]
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def paced(gaps: list[float], rate: float, count: int) -> None:
    """``count`` requests no faster than ``rate`` (the budget's bound), and at about that
    pace (not behind another tenant's or another budget's): the median gap is within half a
    token's time of the rate's own. The clock is real and the machine shared, and the vendor
    sees arrivals, not sends: one request that arrives late makes the gap after it short
    without any request going early, so the bound is on the whole run's span (less one
    token's time for that), not on its shortest gap."""
    assert len(gaps) == count - 1
    assert sum(gaps) >= (len(gaps) - 1) / rate
    assert statistics.median(gaps) <= 1.5 / rate


async def tick(engine: Engine) -> None:
    await asyncio.wait_for(engine.tick(), timeout=20)


def make(env: Env, name: str, tenants: tuple[int, ...], budget: object) -> Poller:
    return env.make_poller(name=name, partitions=only(env, *tenants), budget=budget, limit=2)


def engine_of(env: Env, *pollers: Poller, **options: Any) -> Engine:
    return env.make_engine(*pollers, clock=SystemClock(), **options)


async def test_each_tenant_has_its_own_bucket_shared_by_the_pollers_naming_the_budget(
    env: Env,
) -> None:
    """10/s, burst 1, per tenant: two pollers of two tenants. Each tenant's requests (of both
    pollers together: 12) come no faster than 10/s; the two tenants do not wait for each
    other (one bucket for both would halve each one's pace)."""
    budgets = {"vendor": {"rate": "10/s", "burst": 1, "per": "tenant"}}
    first, second = make(env, "first", (0, 1), "vendor"), make(env, "second", (0, 1), "vendor")
    engine = engine_of(env, first, second, budgets=budgets)

    await tick(engine)

    for index in (0, 1):
        paced(gaps(env, env.tid(index)), 10.0, 12)


async def test_a_tenant_s_plan_gives_its_rate(env: Env) -> None:
    plans = {env.tid(0): "20/s", env.tid(1): "300/m"}  # a request every 50 ms, every 200 ms
    budgets = {"vendor": {"rate": lambda p: plans[p.key], "burst": 1, "per": "tenant"}}
    engine = engine_of(env, make(env, "invoices", (0, 1), "vendor"), budgets=budgets)

    await tick(engine)

    paced(gaps(env, env.tid(0)), 20.0, 6)
    paced(gaps(env, env.tid(1)), 5.0, 6)


async def test_a_tenant_without_a_usable_rate_fails_alone_naming_the_budget(env: Env) -> None:
    plans = {env.tid(0): "100/s", env.tid(1): "unlimited"}
    budgets = {"vendor": {"rate": lambda p: plans[p.key], "per": "tenant"}}
    engine = engine_of(env, make(env, "invoices", (0, 1), "vendor"), budgets=budgets)
    recorder = env.recorder(engine)

    await tick(engine)

    assert len(recorder.of(env.tid(0))) == 12
    assert recorder.of(env.tid(1)) == []
    assert env.tid(1) not in received(env).order  # no request went without a token
    errors = {i.partition: i.last_error for i in engine.inspect()}
    assert errors[env.tid(0)] is None
    error = errors[env.tid(1)]
    assert error is not None and "budgets.vendor.rate" in error
    assert "gave 'unlimited' for this tenant, which is not a rate" in error
    assert env.tenants[1].token not in error


async def test_a_poller_naming_two_budgets_is_held_by_the_stricter(env: Env) -> None:
    """vendor 20/s per tenant, reports 5/s: the reports poller asks every 200 ms; a poller
    naming vendor only, beside it, keeps its 20/s."""
    budgets = {
        "vendor": {"rate": "20/s", "burst": 1, "per": "tenant"},
        "reports": {"rate": "5/s", "burst": 1},
    }
    reports = make(env, "reports", (0,), ["vendor", "reports"])
    items = make(env, "items", (1,), "vendor")
    engine = engine_of(env, reports, items, budgets=budgets)

    await tick(engine)

    paced(gaps(env, env.tid(0)), 5.0, 6)
    paced(gaps(env, env.tid(1)), 20.0, 6)


async def test_two_budgets_the_other_way_round_are_held_by_the_stricter_too(env: Env) -> None:
    budgets = {
        "vendor": {"rate": "5/s", "burst": 1, "per": "tenant"},
        "reports": {"rate": "20/s", "burst": 1},
    }
    engine = engine_of(env, make(env, "reports", (0,), ["reports", "vendor"]), budgets=budgets)

    await tick(engine)

    paced(gaps(env, env.tid(0)), 5.0, 6)


async def test_an_instance_holding_half_a_tenant_s_keys_spends_half_its_bucket(env: Env) -> None:
    """Tenant 0's key of poller ``first`` is here, its key of ``second`` on another instance
    (keys hash apart, so a tenant's streams are spread): here, tenant 0 gets half of 10/s.
    Tenant 1 has both its keys here: its whole 10/s."""
    store = SharedStore()
    store.owns = lambda poller, key: key == env.tid(1) or poller == "first"  # type: ignore[method-assign]
    budgets = {"vendor": {"rate": "10/s", "burst": 1, "per": "tenant"}}
    first, second = make(env, "first", (0, 1), "vendor"), make(env, "second", (0, 1), "vendor")
    engine = engine_of(env, first, second, store=store, budgets=budgets)

    await tick(engine)

    paced(gaps(env, env.tid(0)), 5.0, 6)  # first's pages only
    paced(gaps(env, env.tid(1)), 10.0, 12)


async def test_a_budget_per_tenant_adds_no_metric_series_per_tenant(env: Env) -> None:
    """Four tenants, four buckets: the budget's series are one per budget (and lane) still."""
    metrics = PrometheusObserver(partition_label=True, process=False)
    budgets = {"vendor": {"rate": "100/s", "per": "tenant"}}
    poller = make(env, "invoices", (0, 1, 2, 3), "vendor")
    engine = engine_of(env, poller, budgets=budgets, observers=[metrics])

    await tick(engine)

    scrape = metrics.render()[0].decode().splitlines()
    series = [line for line in scrape if line.startswith("watukuy_budget")]
    assert 'watukuy_budget_waits_total{budget="vendor",lane="live"} 24.0' in series
    assert [line.split(" ")[0] for line in series if "tokens" in line] == [
        'watukuy_budget_tokens{budget="vendor"}'
    ]
    assert not any(t.id in line for t in env.tenants for line in series)


# -- the gate: buckets only for tenants in use -----------------------------------------------------


async def test_idle_tenants_hold_no_bucket(clock: FakeClock) -> None:
    gate = TenantGate(TenantBudgetSpec("vendor", 1.0, 1.0), clock)
    for index in range(1000):
        key = f"t{index}"
        await gate.gate_for(Partition(key, None)).acquire(f"p/{key}", Lane.LIVE, 1.0)
    assert len(gate.tenants) == 1000  # each took its one token: none is full yet

    clock.advance(SWEEP_EVERY)  # full again, and a sweep is due
    await gate.gate_for(Partition("t0", None)).acquire("p/t0", Lane.LIVE, 1.0)
    assert gate.tenants == ["t0"]


async def test_a_tenant_s_bucket_is_one_for_its_child_keys_too(clock: FakeClock) -> None:
    gate = TenantGate(TenantBudgetSpec("vendor", 1.0, 1.0), clock)
    started = clock.now()
    await gate.gate_for(Partition("acme", None)).acquire("projects/acme", Lane.LIVE, 1.0)
    child = Partition("acme/P1", None, ("P1",))
    await gate.gate_for(child).acquire("issues/acme/P1", Lane.LIVE, 1.0)
    assert gate.tenants == ["acme"]
    assert clock.now() - started == pytest.approx(1.0, abs=0.01)  # the second paid for its token


async def test_tenants_no_longer_listed_or_held_here_lose_their_bucket(clock: FakeClock) -> None:
    gate = TenantGate(TenantBudgetSpec("vendor", 1.0, 1.0), clock)
    for key in ("a", "b", "c"):
        await gate.gate_for(Partition(key, None)).acquire(f"p/{key}", Lane.LIVE, 1.0)
    gate.rescale_tenants({"a": 1.0, "b": 0.0})  # c is no longer listed, b is held elsewhere
    assert gate.tenants == ["a"]


async def test_a_new_plan_applies_once_the_tenant_s_data_changes(clock: FakeClock) -> None:
    spec = TenantBudgetSpec("vendor", _plan_rate(), 1.0)
    gate = TenantGate(spec, clock)
    started = clock.now()
    for data in ({"rate": "1/s"}, {"rate": "1/s"}, {"rate": "10/s"}, {"rate": "10/s"}):
        await gate.gate_for(Partition("acme", data)).acquire("p/acme", Lane.LIVE, 1.0)
    # full, then 1 s at 1/s; then the new plan's rate: 0.1 s (a new data object each time)
    assert clock.now() - started == pytest.approx(1.0 + 0.1 + 0.1, abs=0.01)


def _plan_rate() -> Any:
    from watukuy.core.tenant_budget import TenantRate

    return TenantRate(lambda p: p.data["rate"], "{partition.data.rate}")


def test_an_unknown_budget_in_a_python_poller_s_list_is_named(env: Env) -> None:
    poller = make(env, "invoices", (0,), ["vendor", "reports"])
    with pytest.raises(ConfigError) as raised:
        Engine([poller], budgets={"vendor": {"rate": "1/s"}})
    assert str(raised.value) == "poller 'invoices'.budget[1]: unknown budget 'reports'"


def test_a_rate_of_the_tenant_needs_per_tenant() -> None:
    with pytest.raises(ConfigError) as raised:
        Engine([], budgets={"vendor": {"rate": lambda partition: "1/s"}})
    assert raised.value.path == "budgets.vendor.rate"
    assert "a rate that depends on the tenant needs per: tenant" in str(raised.value)


async def test_a_bad_plan_in_the_config_s_template_is_named_and_the_data_kept_out() -> None:
    """Through the config's template: the error names the budget's field, the template and
    what it rendered; stored, the rendered value is redacted like any value of the tenant's
    data long enough to be one (``lots``), and the rest of the data never appears."""

    async def fetch(ctx: Any) -> dict[str, Any]:
        await ctx.http.get("http://127.0.0.1:9/never-sent")
        return {"items": []}

    tenants = [
        {"key": "acme", "data": {"rate_limit": "lots", "token": "s3cret-tok"}},
        {"key": "beta", "data": {"rate_limit": "0", "token": "s3cret-tok"}},
    ]
    poller = define_poller(
        name="p", fetch=fetch, identity=lambda i: i, budget="vendor", partitions=lambda: tenants
    )
    budgets = {"vendor": {"rate": "{partition.data.rate_limit}/m", "per": "tenant"}}
    async with Engine([poller], budgets=engine_budgets(budgets)) as engine:
        await tick(engine)
        errors = {i.partition: i.last_error for i in engine.inspect()}
    said = "ConfigError: budgets.vendor.rate: '{partition.data.rate_limit}/m' gave '%s' for "
    rest = (
        "this tenant, which is not a rate (expected '<count>/<unit>' with unit s, m, h or d, "
        "or a number per second)"
    )
    assert errors == {"acme": said % "[redacted]/m" + rest, "beta": said % "0/m" + rest}
