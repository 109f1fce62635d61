"""Fixtures of the engine tests: a running vendor simulator, the reference poller, engines.

See :mod:`tests.engine.support` for what they build.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from integration.simulator import VendorSimulator, running_simulator
from tests.engine.support import Env
from watukuy import Engine, FakeClock, MemoryStore, Poller


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sim(clock: FakeClock) -> VendorSimulator:
    return VendorSimulator(tenants=3, items_per_tenant=10, seed=1, now=clock.now)


@pytest.fixture
async def env(sim: VendorSimulator, clock: FakeClock) -> AsyncIterator[Env]:
    async with running_simulator(sim) as base_url:
        environment = Env(sim=sim, base_url=base_url, clock=clock)
        try:
            yield environment
        finally:
            for engine in environment.engines:
                await engine.close()


@pytest.fixture
def make_poller(env: Env) -> Callable[..., Poller]:
    return env.make_poller


@pytest.fixture
def engine(env: Env) -> Engine:
    """An engine running the reference ``invoices`` poller on a fresh ``MemoryStore``."""
    return env.make_engine(env.make_poller())


@pytest.fixture
def store(engine: Engine) -> MemoryStore:
    assert isinstance(engine.store, MemoryStore)
    return engine.store
