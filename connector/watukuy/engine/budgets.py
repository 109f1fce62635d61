"""The async gate in front of the pure budgets: ``acquire`` waits for a token.

Each waiter registers a request with the core ``Budget`` and waits on a future. One pump task
per gate, running only while someone waits, sleeps until the budget's next token, asks the
budget which requesters are granted and resolves their futures. So the pure budget decides
fairness and lanes, this shell only waits, and a token costs one wake-up however many
requesters wait for it (not one per waiter).

Across runner instances a budget is split (:func:`split_budgets`): each instance's bucket gets
the share of the budget's keys it owns, recomputed whenever ownership or the partition lists
change, so N replicas spend the vendor's quota once, not N times.

A ``per: tenant`` budget is a :class:`TenantGate`: a gate per tenant in use, each split by the
share of that tenant's keys the instance owns (see :mod:`watukuy.core.tenant_budget`). A
poller naming several budgets waits at each (:func:`acquirer`).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from watukuy.core.budget import Budget, Lane, parse_rate
from watukuy.core.children import tenant_of
from watukuy.core.clock import Clock
from watukuy.core.errors import ConfigError
from watukuy.core.keys import KeyId
from watukuy.core.observe import Observer
from watukuy.core.poller import Partition, Poller
from watukuy.core.tenant_budget import PER, TenantBudgetSpec, TenantRate, idle, tenant_shares

FAIRNESS = ("round-robin", "weighted")

Aside = Callable[[], AbstractAsyncContextManager[None]]
"""What a request waiting for a token enters around its wait (:meth:`Turn.set_aside`)."""

_SLACK = 1e-6
"""Seconds the pump oversleeps: epoch-valued floats lose ~2e-7 s, and a wake-up landing just
short of the token would cost another one."""


def build_budgets(
    specs: Mapping[str, Any] | None, path: str = "budgets"
) -> dict[str, Budget | TenantBudgetSpec]:
    """Budgets from ``{"vendor": {"rate": "10/s", "burst": 20, "fairness": "round-robin"}}``.

    ``per: tenant`` makes a :class:`TenantBudgetSpec` (a bucket per tenant, made when used);
    its ``rate`` may then be a callable of the partition (or a :class:`TenantRate`): the
    tenant's rate as written. The config loader turns a rate template into one.
    """
    out: dict[str, Budget | TenantBudgetSpec] = {}
    for name, spec in (specs or {}).items():
        where = f"{path}.{name}"
        if not isinstance(spec, Mapping):
            raise ConfigError("must be a mapping with rate, burst, fairness, per", where)
        unknown = sorted(set(spec) - {"rate", "burst", "fairness", "per"})
        if unknown:
            raise ConfigError(f"unknown key {unknown[0]!r}", where)
        if "rate" not in spec:
            raise ConfigError("is required, e.g. '10/s'", f"{where}.rate")
        per = spec.get("per", "connector")
        if per not in PER:
            raise ConfigError(f"must be one of {', '.join(PER)}, got {per!r}", f"{where}.per")
        rate = _rate(spec["rate"], per, f"{where}.rate")
        burst = spec.get("burst", max(1.0, rate) if isinstance(rate, float) else None)
        if burst is not None and (
            isinstance(burst, bool) or not isinstance(burst, int | float) or burst < 1
        ):
            raise ConfigError(f"must be a number >= 1, got {burst!r}", f"{where}.burst")
        fairness = spec.get("fairness", "round-robin")
        if fairness not in FAIRNESS:
            raise ConfigError(f"must be one of {', '.join(FAIRNESS)}", f"{where}.fairness")
        if per == "tenant":
            given = None if burst is None or "burst" not in spec else float(burst)
            out[name] = TenantBudgetSpec(name, rate, given, fairness)
        else:
            assert isinstance(rate, float) and burst is not None
            out[name] = Budget(name, rate, float(burst), fairness)
    return out


def _rate(given: object, per: str, where: str) -> float | TenantRate:
    """A fixed rate, or (``per: tenant`` only) a rate each tenant's data gives."""
    if isinstance(given, TenantRate) or callable(given):
        if per != "tenant":
            raise ConfigError("a rate that depends on the tenant needs per: tenant", where)
        return given if isinstance(given, TenantRate) else TenantRate(given)
    try:
        return parse_rate(given)  # type: ignore[arg-type]  # parse_rate checks the type
    except ValueError as exc:
        raise ConfigError(str(exc), where) from exc


def budget_shares(
    pollers: Mapping[str, Poller],
    listed: Mapping[str, Iterable[str]],
    owns: Callable[[str, str], bool],
) -> dict[str, float]:
    """Per budget: the keys this instance owns over all the keys listed, of the pollers using it.

    ``listed`` maps a poller to its current partition keys, which every instance knows; ``owns``
    is the store's. A budget with no listed key is left out (nobody polls for it). Keys count
    alike whatever their poller's ``budget_weight``: weights share tokens within an instance.
    """
    owned: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for name, keys in listed.items():
        poller = pollers.get(name)  # a table may outlive its poller (one removed at run time)
        names = () if poller is None else poller.budgets
        for key in keys:
            mine = owns(name, key)
            for budget in names:
                total[budget] += 1
                owned[budget] += mine
    return {budget: owned[budget] / count for budget, count in total.items()}


def tenant_keys(
    budget: str,
    pollers: Mapping[str, Poller],
    listed: Mapping[str, Mapping[str, Partition]],
    owns: Callable[[str, str], bool],
) -> Iterator[tuple[str, bool]]:
    """``(tenant, owned)`` for every listed key of the pollers naming ``budget``."""
    for name, partitions in listed.items():
        poller = pollers.get(name)
        if poller is None or budget not in poller.budgets:
            continue
        for key, partition in partitions.items():
            yield tenant_of(partition), owns(name, key)


def split_budgets(
    gates: Mapping[str, BudgetGate | TenantGate],
    pollers: Mapping[str, Poller],
    listed: Mapping[str, Mapping[str, Partition]],
    owns: Callable[[str, str], bool],
) -> None:
    """Give each gate this instance's share of its budget (see :func:`budget_shares`); a
    ``per: tenant`` budget, its share of each tenant's keys (:func:`tenant_shares`).

    An instance owning every key (the memory store, a single runner) keeps whole budgets.

    Every instance knows every listed tenant and fan-out key; a child key is known to its
    owner only (the Kafka store restores the keys of its own partitions), so an instance
    counts the child keys it holds and not the others': shares that add up to more than one
    where a tenant's children are spread, spending more than the budget there, rather than an
    instance holding a tenant's children with a share of 0, which would never poll them.
    """
    shares = budget_shares(pollers, listed, owns)
    for name, gate in gates.items():
        if isinstance(gate, TenantGate):
            gate.rescale_tenants(tenant_shares(tenant_keys(name, pollers, listed, owns)))
        elif name in shares:
            gate.rescale(shares[name])


class BudgetGate:
    def __init__(self, budget: Budget, clock: Clock, observer: Observer | None = None) -> None:
        self.budget = budget
        self._clock = clock
        self._observer = observer or Observer()
        self._waiters: dict[tuple[str, Lane], deque[asyncio.Future[None]]] = {}
        self._weights: dict[tuple[str, Lane], float] = {}
        self._pump: asyncio.Task[None] | None = None

    async def acquire(
        self, requester: str, lane: Lane, weight: float, aside: Aside | None = None
    ) -> None:
        """Wait until the budget grants ``requester`` a token in ``lane``.

        Concurrent calls for the same requester and lane (a ``fetch`` gathering requests) each
        wait for a token of their own, one after the other, as the budget keeps one request
        per requester and lane. ``aside``: entered around the wait when there is one (a token
        free now is taken without it): the poll's turn is set aside meanwhile.
        """
        slot = (requester, lane)
        started = self._clock.now()
        self._weights[slot] = weight
        waiting = self._waiters.get(slot)
        if waiting is None:
            waiting = self._waiters[slot] = deque()
            self.budget.request(requester, lane, weight, self._clock.now())
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting.append(granted)
        self._grant()
        if not granted.done():
            self._start_pump()
        try:
            if aside is None or granted.done():
                await granted
            else:
                async with aside():
                    await granted
        except asyncio.CancelledError:
            self._withdraw(slot, granted)  # a no-op once granted: the token is spent
            raise
        now = self._clock.now()
        key = KeyId.parse(requester)
        tokens = self.budget.bucket.tokens(now)
        self._observer.budget_waited(
            self.budget.name, key.poller, key.partition, lane.value, now - started, tokens
        )

    def gate_for(self, partition: Partition) -> BudgetGate:
        """The gate a request of ``partition`` waits at: this one, for every partition."""
        return self

    @property
    def busy(self) -> bool:
        """Whether anyone waits here."""
        return bool(self._waiters)

    def rescale(self, share: float) -> None:
        """Hold ``share`` of the budget from now on (:meth:`Budget.rescale`).

        The pump sleeps until the next token at the old rate, or has ended while the share was
        0: it is started again, so waiters see the new rate at once and none waits forever.
        """
        if self.budget.rescale(share, self._clock.now()):
            self._restart_pump()

    def rerate(self, rate: float, burst: float) -> None:
        """The budget becomes ``rate`` and ``burst`` from now on (:meth:`Budget.rerate`)."""
        if self.budget.rerate(rate, burst, self._clock.now()):
            self._restart_pump()

    def _restart_pump(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
            self._pump = None
        if self._waiters:
            self._start_pump()

    def _grant(self) -> None:
        """Hand every token available now to the waiters the budget picks."""
        now = self._clock.now()
        for grant in self.budget.grant_lanes(now):
            slot = (grant.requester, grant.lane)
            waiting = self._waiters.get(slot)
            if not waiting:  # withdrawn meanwhile (cancel withdraws its request too)
                continue
            while waiting:
                first = waiting.popleft()
                if not first.done():  # a cancelled waiter that has not resumed yet: skip it
                    first.set_result(None)
                    break
            if waiting:  # another call of the same slot: back in the queue for the next token
                self.budget.request(grant.requester, grant.lane, self._weights[slot], now)
            else:
                del self._waiters[slot]
                del self._weights[slot]

    def _withdraw(self, slot: tuple[str, Lane], granted: asyncio.Future[None]) -> None:
        waiting = self._waiters.get(slot)
        if waiting is None or granted not in waiting:
            return  # already granted: the token is spent, like a request that failed
        waiting.remove(granted)
        if not waiting:
            del self._waiters[slot]
            del self._weights[slot]
            self.budget.cancel(*slot)
        if not self._waiters and self._pump is not None:
            self._pump.cancel()
            self._pump = None

    def _start_pump(self) -> None:
        if self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(self._run_pump())

    async def _run_pump(self) -> None:
        """Sleep until the next token while anyone waits, grant, repeat; then end."""
        try:
            while self._waiters:
                now = self._clock.now()
                wake_at = self.budget.next_grant_at(now)
                if wake_at == math.inf:
                    return  # a share of 0: rescale() starts the pump again with a share
                await self._clock.wait(max(0.001, (wake_at or now) - now + _SLACK))
                self._grant()
        except Exception as exc:  # never leave waiters hanging on a pump that died
            for waiting in self._waiters.values():
                for future in waiting:
                    if not future.done():
                        future.set_exception(exc)
            raise
        finally:
            if self._pump is asyncio.current_task():
                self._pump = None


SWEEP_EVERY = 60.0
"""Seconds between two looks for tenant buckets to let go (:func:`idle` ones)."""


class TenantGate:
    """A ``per: tenant`` budget: a :class:`BudgetGate` per tenant, made when the tenant first
    asks, let go once idle (see :mod:`watukuy.core.tenant_budget`) or once the tenant is
    neither listed nor ours. So a runner holds a bucket for each tenant polling now, not for
    each tenant listed; what stays per listed tenant is its share, where it is not 1."""

    def __init__(
        self, spec: TenantBudgetSpec, clock: Clock, observer: Observer | None = None
    ) -> None:
        self.spec = spec
        self._clock = clock
        self._observer = observer
        self._gates: dict[str, BudgetGate] = {}
        self._data: dict[str, object] = {}  # the data each tenant's rate was worked out from
        self._shares: dict[str, float] = {}  # tenants whose share is not the whole bucket
        self._next_sweep = float("-inf")

    @property
    def tenants(self) -> list[str]:
        """The tenants holding a bucket now."""
        return sorted(self._gates)

    def gate_for(self, partition: Partition) -> BudgetGate:
        """The tenant's gate, made if it has none, its rate worked out again if its data
        changed since (a plan upgraded); a ``ConfigError`` if the data gives no rate."""
        tenant = tenant_of(partition)
        now = self._clock.now()
        if now >= self._next_sweep:
            self.sweep()
        gate = self._gates.get(tenant)
        if gate is not None and (self.spec.fixed or self._data[tenant] is partition.data):
            return gate
        rate = self.spec.rate_of(partition)
        if gate is None:
            gate = BudgetGate(self.spec.budget(rate), self._clock, self._observer)
            gate.rescale(self._shares.get(tenant, 1.0))
            self._gates[tenant] = gate
        else:
            gate.rerate(rate, self.spec.burst_at(rate))
        self._data[tenant] = partition.data
        return gate

    def rescale_tenants(self, shares: Mapping[str, float]) -> None:
        """Hold each tenant's ``shares`` of its bucket (every listed tenant is there, those
        owned elsewhere with 0); the buckets of tenants gone from it are let go."""
        self._shares = {tenant: share for tenant, share in shares.items() if share != 1.0}
        for tenant, gate in list(self._gates.items()):
            if not shares.get(tenant) and not gate.busy:  # not listed, or none of it ours
                self._drop(tenant)
            else:
                gate.rescale(shares.get(tenant, 1.0))
        self.sweep()

    def sweep(self) -> None:
        """Let the idle buckets go: nobody waits and they are full again."""
        now = self._clock.now()
        self._next_sweep = now + SWEEP_EVERY
        for tenant, gate in list(self._gates.items()):
            if not gate.busy and idle(gate.budget, now):
                self._drop(tenant)

    def _drop(self, tenant: str) -> None:
        del self._gates[tenant]
        del self._data[tenant]


Gate = BudgetGate | TenantGate


def acquirer(
    gates: Sequence[Gate], requester: str, partition: Callable[[], Partition], lane: Lane,
    weight: float, aside: Aside | None = None,
) -> Callable[[], Awaitable[None]]:  # fmt: skip
    """What a key's HTTP client awaits before each request: a token of each of ``gates``.

    Several budgets (``budget: [vendor, reports]``) are taken one after the other, the
    scarcest first (the lowest rate this instance holds), each gate looked up again right
    before its wait (a tenant's bucket may be let go and made again meanwhile). Tokens are
    not locks: one taken is spent, never held against another requester, and every bucket
    refills on its own, so waiting for a second budget with the first one's token taken
    cannot deadlock. Taking the scarce one first means the plentiful one's token is taken
    just before the request goes, so it spends little of that budget's rate idle; a
    request cancelled between the two has spent the first token, as a failed request does.
    The price: a request reaches the vendor up to one wait of the later budgets after its
    scarce token, so two may arrive closer than the scarce rate's interval; in any window the
    vendor still sees at most ``rate x window + burst`` plus the requests that held a token
    while waiting (a key waits with one request per lane at most). Taking the plentiful one
    first would pace arrivals exactly by the scarce budget, but would hold a plentiful token
    for each request waiting out the scarce one (seconds to minutes for a reports quota).
    ``aside``: see :meth:`BudgetGate.acquire`.
    """
    if len(gates) == 1:
        only = gates[0]

        async def acquire_one() -> None:
            await only.gate_for(partition()).acquire(requester, lane, weight, aside)

        return acquire_one

    def scarcity(gate: Gate) -> float:
        return gate.gate_for(partition()).budget.bucket.rate

    async def acquire_all() -> None:
        for gate in sorted(gates, key=scarcity):
            await gate.gate_for(partition()).acquire(requester, lane, weight, aside)

    return acquire_all
