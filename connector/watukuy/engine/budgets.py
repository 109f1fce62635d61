"""The async gate in front of the pure budgets: ``acquire`` waits for a token.

Each waiter registers a request with the core ``Budget`` and waits on a future. One pump task
per gate, running only while someone waits, sleeps until the budget's next token, asks the
budget which requesters are granted and resolves their futures. So the pure budget decides
fairness and lanes, this shell only waits, and a token costs one wake-up however many
requesters wait for it (not one per waiter).

Across runner instances a budget is split (:func:`split_budgets`): each instance's bucket gets
the share of the budget's keys it owns, recomputed whenever ownership or the partition lists
change, so N replicas spend the vendor's quota once, not N times.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from watukuy.core.budget import Budget, Lane, parse_rate
from watukuy.core.clock import Clock
from watukuy.core.errors import ConfigError
from watukuy.core.keys import KeyId
from watukuy.core.observe import Observer
from watukuy.core.poller import Poller

FAIRNESS = ("round-robin", "weighted")

_SLACK = 1e-6
"""Seconds the pump oversleeps: epoch-valued floats lose ~2e-7 s, and a wake-up landing just
short of the token would cost another one."""


def build_budgets(specs: Mapping[str, Any] | None, path: str = "budgets") -> dict[str, Budget]:
    """Budgets from ``{"vendor": {"rate": "10/s", "burst": 20, "fairness": "round-robin"}}``."""
    out: dict[str, Budget] = {}
    for name, spec in (specs or {}).items():
        where = f"{path}.{name}"
        if not isinstance(spec, Mapping):
            raise ConfigError("must be a mapping with rate, burst, fairness", where)
        unknown = sorted(set(spec) - {"rate", "burst", "fairness"})
        if unknown:
            raise ConfigError(f"unknown key {unknown[0]!r}", where)
        if "rate" not in spec:
            raise ConfigError("is required, e.g. '10/s'", f"{where}.rate")
        try:
            rate = parse_rate(spec["rate"])
        except ValueError as exc:
            raise ConfigError(str(exc), f"{where}.rate") from exc
        burst = spec.get("burst", max(1.0, rate))
        if isinstance(burst, bool) or not isinstance(burst, int | float) or burst < 1:
            raise ConfigError(f"must be a number >= 1, got {burst!r}", f"{where}.burst")
        fairness = spec.get("fairness", "round-robin")
        if fairness not in FAIRNESS:
            raise ConfigError(f"must be one of {', '.join(FAIRNESS)}", f"{where}.fairness")
        out[name] = Budget(name, rate, float(burst), fairness)
    return out


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
        budget = None if poller is None else poller.budget
        if budget is None:
            continue
        for key in keys:
            total[budget] += 1
            owned[budget] += owns(name, key)
    return {budget: owned[budget] / count for budget, count in total.items()}


def split_budgets(
    gates: Mapping[str, BudgetGate],
    pollers: Mapping[str, Poller],
    listed: Mapping[str, Iterable[str]],
    owns: Callable[[str, str], bool],
) -> None:
    """Give each gate this instance's share of its budget (see :func:`budget_shares`).

    An instance owning every key (the memory store, a single runner) keeps whole budgets.
    """
    shares = budget_shares(pollers, listed, owns)
    for name, gate in gates.items():
        if name in shares:
            gate.rescale(shares[name])


class BudgetGate:
    def __init__(self, budget: Budget, clock: Clock, observer: Observer | None = None) -> None:
        self.budget = budget
        self._clock = clock
        self._observer = observer or Observer()
        self._waiters: dict[tuple[str, Lane], deque[asyncio.Future[None]]] = {}
        self._weights: dict[tuple[str, Lane], float] = {}
        self._pump: asyncio.Task[None] | None = None

    async def acquire(self, requester: str, lane: Lane, weight: float) -> None:
        """Wait until the budget grants ``requester`` a token in ``lane``.

        Concurrent calls for the same requester and lane (a ``fetch`` gathering requests) each
        wait for a token of their own, one after the other, as the budget keeps one request
        per requester and lane.
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
            await granted
        except asyncio.CancelledError:
            self._withdraw(slot, granted)
            raise
        now = self._clock.now()
        key = KeyId.parse(requester)
        tokens = self.budget.bucket.tokens(now)
        self._observer.budget_waited(
            self.budget.name, key.poller, key.partition, lane.value, now - started, tokens
        )

    def rescale(self, share: float) -> None:
        """Hold ``share`` of the budget from now on (:meth:`Budget.rescale`).

        The pump sleeps until the next token at the old rate, or has ended while the share was
        0: it is started again, so waiters see the new rate at once and none waits forever.
        """
        if not self.budget.rescale(share, self._clock.now()):
            return
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
