"""Helpers of the engine tests: they run against the in-process vendor simulator and the
in-memory store (no Kafka).

The ``env`` fixture serves a :class:`VendorSimulator` over HTTP on a free port and builds
the pollers and engines the tests drive with ``await engine.tick()`` on a :class:`FakeClock`
(the simulator stamps its changes with the same clock). Every engine made through ``env`` is
closed at teardown.

The reference poller is ``invoices``: one partition per simulator tenant (``data`` is the
:class:`Tenant`, token included), a token cursor following ``next`` to the end and keeping
the last ``resume``, identity ``id``, version ``etag``, schedule 30s..15m.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from integration.simulator import Tenant, VendorSimulator, running_simulator
from watukuy import Engine, Event, FakeClock, MemoryStore, Poller, define_poller
from watukuy.store.base import KeyCommit

Fetch = Callable[[Any], Any]


@dataclass
class Recorder:
    """An ``engine.on`` handler that keeps what it was given."""

    events: list[Event] = field(default_factory=list)
    contexts: list[Any] = field(default_factory=list)

    async def __call__(self, event: Event, ctx: Any) -> None:
        self.events.append(event)
        self.contexts.append(ctx)

    def take(self) -> list[Event]:
        out, self.events = self.events, []
        self.contexts = []
        return out

    def of(self, partition: str) -> list[Event]:
        return [e for e in self.events if e.partition == partition]


@dataclass
class Env:
    sim: VendorSimulator
    base_url: str
    clock: FakeClock
    hidden: set[str] = field(default_factory=set)
    """Tenant ids the ``partitions`` callable leaves out (a tenant that churned)."""
    partitions_error: Exception | None = None
    """When set, the ``partitions`` callable raises it."""
    partitions_calls: int = 0
    engines: list[Engine] = field(default_factory=list)

    @property
    def tenants(self) -> list[Tenant]:
        return self.sim.tenants

    def tid(self, index: int) -> str:
        return self.sim.tenants[index].id

    def partitions(self) -> list[dict[str, Any]]:
        self.partitions_calls += 1
        if self.partitions_error is not None:
            raise self.partitions_error
        return [{"key": t.id, "data": t} for t in self.sim.tenants if t.id not in self.hidden]

    def token_fetch(
        self, limit: int = 50, tenant: Tenant | None = None, *, conditional: bool = True
    ) -> Fetch:
        """The reference token-cursor fetch: follow ``next``, then keep ``resume``.

        ``tenant`` fixes the tenant (a poller without partitions); else it is the partition's.
        ``conditional=False`` opts out of conditional requests (an explicit ``If-None-Match``
        that never matches wins over the stored validators), so the vendor never answers 304.
        """
        fixed = tenant

        async def fetch(ctx: Any) -> dict[str, Any]:
            tenant: Tenant = fixed or ctx.partition.data
            headers = {"Authorization": f"Bearer {tenant.token}"}
            if not conditional:
                headers["If-None-Match"] = '"never-matches"'
            response = await ctx.http.get(
                f"{self.base_url}/{tenant.slug}/items",
                query={"cursor": ctx.cursor.value, "limit": limit},
                headers=headers,
            )
            body = await response.json()
            return {
                "items": body["data"],
                "cursor": body["next"] or body["resume"],
                "has_more": body["next"] is not None,
            }

        return fetch

    def make_poller(self, *, limit: int = 50, **overrides: Any) -> Poller:
        options: dict[str, Any] = {
            "name": "invoices",
            "partitions": self.partitions,
            "identity": lambda item: item["id"],
            "version": lambda item: item["etag"],
            "cursor": {"strategy": "token", "initial": None},
            "fetch": self.token_fetch(limit),
            "schedule": {"min": "30s", "max": "15m"},
        }
        options.update(overrides)
        return define_poller(**options)

    def make_engine(self, *pollers: Poller, **options: Any) -> Engine:
        options.setdefault("store", MemoryStore())
        options.setdefault("clock", self.clock)
        engine = Engine(list(pollers) or [self.make_poller()], **options)
        self.engines.append(engine)
        return engine

    def recorder(self, engine: Engine, poller: str = "invoices") -> Recorder:
        recorder = Recorder()
        engine.on(poller, recorder)
        return recorder


INVOICE_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Invoice",
    "namespace": "dev.example",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "name", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string"},
        {"name": "status", "type": "string"},
    ],
}
"""An Avro schema the simulator's items conform to (extra fields are dropped from ``data``)."""


@asynccontextmanager
async def simulated(tenants: int, items: int, seed: int) -> AsyncIterator[Env]:
    """A served simulator on a fake clock; the engines made through the env close on exit."""
    clock = FakeClock()
    sim = VendorSimulator(tenants=tenants, items_per_tenant=items, seed=seed, now=clock.now)
    async with running_simulator(sim) as base_url:
        environment = Env(sim=sim, base_url=base_url, clock=clock)
        try:
            yield environment
        finally:
            for engine in environment.engines:
                await engine.close()


async def wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    """Until ``condition()`` holds, looking every 5 ms; ``AssertionError`` after ``seconds``."""
    for _ in range(int(seconds / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not met in time")


@asynccontextmanager
async def running_in_background(engine: Engine) -> AsyncIterator[asyncio.Task[None]]:
    """``engine.run()`` while the block runs; then stop it and wait for it to end."""
    running = asyncio.create_task(engine.run())
    try:
        yield running
    finally:
        await engine.stop()
        await asyncio.wait_for(running, timeout=5)


async def run_until(engine: Engine, condition: Callable[[], bool], seconds: float = 5.0) -> None:
    """``engine.run()`` until ``condition()`` holds, then stop it and wait for it to end."""
    async with running_in_background(engine) as running:
        await wait_for(lambda: condition() or running.done(), seconds)
        assert not running.done(), "run() ended by itself"


class HeldCommits(MemoryStore):
    """A memory store that keeps what the engine says it served, holds the commits
    :meth:`hold` picks until :meth:`release`, and tells the engine ownership moved
    (:meth:`moved`: a rebalance, which a memory store never has)."""

    def __init__(self) -> None:
        super().__init__()
        self.said: list[float] = []
        self.held: list[KeyCommit] = []
        self.waiting = asyncio.Event()
        self._picked: Callable[[KeyCommit], bool] = lambda entry: False
        self._open = asyncio.Event()
        self._open.set()
        self._told: list[Callable[[], None]] = []

    def watch(self, changed: Callable[[], None]) -> None:
        super().watch(changed)
        self._told.append(changed)

    def moved(self) -> None:
        for changed in self._told:
            changed()

    def served_until(self, until: float) -> None:
        self.said.append(until)

    def hold(self, picked: Callable[[KeyCommit], bool]) -> None:
        self._picked = picked
        self._open.clear()

    def release(self) -> None:
        self._picked = lambda entry: False
        self._open.set()

    async def commit(self, batch: Sequence[KeyCommit]) -> None:
        if any(self._picked(entry) for entry in batch):
            self.held += batch
            self.waiting.set()
            await self._open.wait()
        await super().commit(batch)
