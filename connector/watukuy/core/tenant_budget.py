"""Budgets a tenant at a time: ``per: tenant`` gives each tenant a token bucket of its own.

A vendor's quota is often per account, not per integration: Harvest allows 100 requests per
15 s per account, Freshdesk's per-minute quota depends on the account's plan. A budget
written ``per: tenant`` is then one :class:`~watukuy.core.budget.Budget` per tenant, shared by
every poller (every stream of the connector) that names the budget; the tenant of a child or
fan-out key ``acme/P1`` is ``acme`` (:func:`~watukuy.core.children.tenant_of`).

Its rate is fixed, or the tenant's own (:class:`TenantRate`, a template over
``{partition.data.NAME}`` in the config). The buckets are made when first used and let go
once :func:`idle`: nobody waits and the bucket is full again, so a bucket made afresh later
(full when first observed) hands out exactly what the old one would have. An idle tenant
costs no bucket at all, however many tenants are listed.

Across runner instances a tenant's keys are spread: keys hash to Kafka partitions by
``poller/partition``, so ``tracker.projects/acme`` and ``tracker.issues/acme/P1`` may well be
held by different instances. Each instance holds the share of each tenant's bucket that it
holds of that tenant's keys (:func:`tenant_shares`), as named budgets are split by keys.

No I/O and no clock: every call takes ``now``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from watukuy.core.budget import Budget, Fairness, parse_rate
from watukuy.core.errors import ConfigError
from watukuy.core.poller import Partition

__all__ = [
    "PER",
    "Per",
    "TenantBudgetSpec",
    "TenantRate",
    "idle",
    "tenant_shares",
]

Per = Literal["connector", "tenant"]
PER: tuple[str, ...] = get_args(Per)

_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class TenantRate:
    """A rate that depends on the tenant: ``of(partition)`` gives it as written (``"100/15s"``,
    ``"200/m"``, a number per second). ``shown`` is how errors name it (the template as
    written, never a rendered value)."""

    of: Callable[[Partition], object]
    shown: str = "a rate per tenant"


@dataclass(frozen=True, slots=True)
class TenantBudgetSpec:
    """A ``per: tenant`` budget: what each tenant's bucket is made of.

    ``burst`` ``None`` is each tenant's own rate (at least one token), as for a named budget.
    """

    name: str
    rate: float | TenantRate
    burst: float | None = None
    fairness: Fairness = "round-robin"

    @property
    def where(self) -> str:
        return f"budgets.{self.name}.rate"

    @property
    def fixed(self) -> bool:
        """Whether every tenant has the same rate (nothing to work out per tenant)."""
        return not isinstance(self.rate, TenantRate)

    def rate_of(self, partition: Partition) -> float:
        """The tenant's rate in tokens per second; a ``ConfigError`` naming the budget's rate
        field when the tenant's data gives none.

        The message shows the rendered value (the tenant's data behind this one field), never
        the rest of the partition's data; stored texts redact data values again on top.
        """
        if not isinstance(self.rate, TenantRate):
            return self.rate
        try:
            given = self.rate.of(partition)
        except Exception as exc:  # a data name the tenant lacks, a mapping where text goes
            raise ConfigError(
                f"no rate for this tenant from {self.rate.shown!r}: {exc}", self.where
            ) from None
        try:
            return parse_rate(given)  # type: ignore[arg-type]  # parse_rate checks the type
        except ValueError:
            raise ConfigError(
                f"{self.rate.shown!r} gave {given!r} for this tenant, which is not a rate "
                "(expected '<count>/<unit>' with unit s, m, h or d, or a number per second)",
                self.where,
            ) from None

    def budget(self, rate: float) -> Budget:
        """A tenant's bucket at ``rate``: full, with the whole share until rescaled."""
        return Budget(self.name, rate, self.burst_at(rate), self.fairness)

    def burst_at(self, rate: float) -> float:
        return self.burst if self.burst is not None else max(1.0, rate)


def idle(budget: Budget, now: float) -> bool:
    """Nobody waits and the bucket is full: forgetting it changes nothing a vendor sees, as
    a bucket made again later starts full (a share of 0 holds nothing, and is idle too)."""
    if budget.waiting():
        return False
    bucket = budget.bucket
    return bucket.burst <= 0 or bucket.tokens(now) >= bucket.burst - _EPSILON


def tenant_shares(keys: Iterable[tuple[str, bool]]) -> dict[str, float]:
    """Per tenant, the part of its keys this instance owns, from ``(tenant, owned)`` pairs:
    one pair for each key of each poller naming the budget. Every tenant seen is in the
    answer, those owned elsewhere with 0."""
    owned: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for tenant, mine in keys:
        total[tenant] += 1
        owned[tenant] += mine
    return {tenant: owned[tenant] / count for tenant, count in total.items()}
