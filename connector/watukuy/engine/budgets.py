"""The async gate in front of the pure budgets: ``acquire`` waits for a token.

Each waiter registers a request with the core ``Budget`` and sleeps; whoever wakes first asks
the budget which requesters are granted now and hands their futures the token. So the pure
budget decides fairness and lanes, and this shell only waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from watukuy.core.budget import Budget, Lane, parse_rate
from watukuy.core.errors import ConfigError
from watukuy.engine.clock import Clock

FAIRNESS = ("round-robin", "weighted")


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


class BudgetGate:
    def __init__(self, budget: Budget, clock: Clock) -> None:
        self.budget = budget
        self._clock = clock
        self._granted: set[tuple[str, Lane]] = set()

    async def acquire(self, requester: str, lane: Lane, weight: float) -> None:
        """Wait until the budget grants ``requester`` a token in ``lane``."""
        slot = (requester, lane)
        self.budget.request(requester, lane, weight, self._clock.now())
        try:
            while True:
                now = self._clock.now()
                for grant in self.budget.grant_lanes(now):
                    self._granted.add((grant.requester, grant.lane))
                if slot in self._granted:
                    self._granted.discard(slot)
                    return
                wake_at = self.budget.next_grant_at(now)
                await self._clock.sleep(max(0.001, (wake_at or now) - now))
        except asyncio.CancelledError:
            self.budget.cancel(requester, lane)
            self._granted.discard(slot)
            raise
