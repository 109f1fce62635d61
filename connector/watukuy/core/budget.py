"""Named rate budgets: one token bucket shared by many requesters, handed out fairly.

When two hundred tenants poll the same vendor under one quota, the budget is one
:class:`TokenBucket` and :class:`Budget` decides who gets the next token:

1. lane priority first (``live`` > ``reconcile`` > ``backfill``): a tenant's live poll
   beats another tenant's backfill, always;
2. then fairness among the waiters of the best lane: ``round-robin`` serves the requester
   served least recently (ties by arrival order), ``weighted`` shares tokens in proportion
   to each requester's weight (stride scheduling).

A budget's rate is for the whole deployment. With several runner instances each one holds a
bucket for its *share* of it (:meth:`Budget.rescale`): the fraction of the budget's keys it
owns, so the instances together spend the configured rate, not one rate each.

No I/O and no clock: every call takes ``now`` (seconds). The classes are mutable (a grant
both consumes a token and changes who is next) but deterministic, so tests replay timelines.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum
from typing import Literal, get_args

__all__ = [
    "Budget",
    "Fairness",
    "Grant",
    "Lane",
    "Request",
    "TokenBucket",
    "parse_rate",
]

Fairness = Literal["round-robin", "weighted"]

_UNITS = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
}
_RATE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)?\s*([a-z]+)\s*", re.IGNORECASE)

_EPSILON = 1e-9
"""Tokens lost to float rounding: ``0.1 * 10`` must still make one token."""


def parse_rate(value: str | float) -> float:
    """Tokens per second from ``"10/s"``, ``"600/m"``, ``"5/h"``, ``"100/d"`` or a number.

    The unit may have a count, as vendors write their windows: ``"100/15s"`` (Harvest, per
    account), ``"100/15m"`` (Harvest's reports). A bare number is already tokens per second.
    Raises ``ValueError`` on anything else, including zero, negative and non-finite rates.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"rate must be a number or a string like '10/s', got {value!r}")
    if isinstance(value, str):
        match = _RATE.fullmatch(value)
        unit = _UNITS.get(match.group(3).lower()) if match else None
        if match is None or unit is None:
            raise ValueError(
                f"invalid rate {value!r}: expected '<count>/<unit>' with unit s, m, h or d "
                "(e.g. '10/s', '600/m', '5/h', '100/15s')"
            )
        period = float(match.group(2) or 1) * unit
        rate = float(match.group(1)) / period if period > 0 else math.inf
    else:
        rate = float(value)
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"invalid rate {value!r}: must be a positive, finite number per second")
    return rate


class Lane(Enum):
    """The kind of work a request is for; see :attr:`priority`."""

    LIVE = "live"
    RECONCILE = "reconcile"
    BACKFILL = "backfill"

    @property
    def priority(self) -> int:
        """Higher is served first: live (2) > reconcile (1) > backfill (0)."""
        return _LANE_PRIORITY[self]


_LANE_PRIORITY = {Lane.LIVE: 2, Lane.RECONCILE: 1, Lane.BACKFILL: 0}


class TokenBucket:
    """``rate`` tokens per second, holding at most ``burst``; full when first observed.

    Over any interval ``[t0, t1]`` it grants at most ``rate * (t1 - t0) + burst`` tokens.
    A clock going backwards refills nothing (it never mints tokens). :meth:`resize` changes
    rate and burst on the way, still without minting tokens.
    """

    __slots__ = ("_last", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: float) -> None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"token bucket rate must be positive, got {rate!r}")
        if not (math.isfinite(burst) and burst >= 1):
            raise ValueError(f"token bucket burst must be >= 1, got {burst!r}")
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._last: float | None = None

    def tokens(self, now: float) -> float:
        """Tokens available at ``now`` (fractional)."""
        self._refill(now)
        return self._tokens

    def try_take(self, now: float) -> bool:
        """Take one token if one is available at ``now``."""
        self._refill(now)
        if self._tokens < 1 - _EPSILON:
            return False
        self._tokens = max(0.0, self._tokens - 1)
        return True

    def next_token_at(self, now: float) -> float:
        """When a whole token will be available (``now`` if one already is).

        ``math.inf`` when none ever will: a bucket resized to rate 0, or to a burst below one.
        """
        missing = 1 - self.tokens(now)
        if missing <= _EPSILON:
            return now
        if self.rate <= 0 or self.burst < 1 - _EPSILON:
            return math.inf
        return now + missing / self.rate

    def resize(self, rate: float, burst: float, now: float) -> None:
        """From ``now`` on, refill at ``rate`` up to ``burst``; zero for both stops it.

        Tokens earned at the old rate until ``now`` are kept, capped at the new burst; a
        larger burst is not filled up (its tokens are earned at the new rate), so a resize
        never hands out more than the old bucket until ``now`` plus the new one after.
        """
        if not (math.isfinite(rate) and rate >= 0):
            raise ValueError(f"token bucket rate must be >= 0, got {rate!r}")
        if not (math.isfinite(burst) and burst >= 0):
            raise ValueError(f"token bucket burst must be >= 0, got {burst!r}")
        self._refill(now)
        self.rate = rate
        self.burst = burst
        self._tokens = min(self._tokens, burst)

    def _refill(self, now: float) -> None:
        if self._last is not None and now > self._last:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        if self._last is None or now > self._last:
            self._last = now


@dataclass(frozen=True, slots=True)
class Grant:
    """A token handed to ``requester`` for work in ``lane``."""

    requester: str
    lane: Lane


@dataclass(frozen=True, slots=True)
class Request:
    """An outstanding request: ``arrival`` orders requests, ``since`` is when it was made."""

    requester: str
    lane: Lane
    arrival: int
    since: float


class Budget:
    """A named token bucket with a queue of waiting requesters.

    A requester (``"poller/partition"``) has at most **one outstanding request per lane**:
    requesting again in a lane where it already waits only updates its weight and keeps its
    place. It may wait in several lanes at once; each is granted separately.

    ``rate`` and ``burst`` are the budget as configured, for every instance together; the
    bucket holds this instance's :attr:`share` of them (1 until :meth:`rescale`).
    """

    def __init__(
        self,
        name: str,
        rate: float | str,
        burst: float = 1.0,
        fairness: Fairness = "round-robin",
    ) -> None:
        if fairness not in get_args(Fairness):
            raise ValueError(
                f"budget {name!r}: fairness must be 'round-robin' or 'weighted', got {fairness!r}"
            )
        self.name = name
        self.fairness: Fairness = fairness
        self.rate = parse_rate(rate)
        self.bucket = TokenBucket(self.rate, burst)
        self.burst = self.bucket.burst
        self.share = 1.0
        self._waiting: dict[tuple[str, Lane], Request] = {}
        self._arrivals = 0
        # round-robin: grant counter at which each requester was last served
        self._served = 0
        self._last_served: dict[str, int] = {}
        # weighted (stride scheduling): per-requester pass and stride, and global virtual time
        self._weight: dict[str, float] = {}
        self._pass: dict[str, float] = {}
        self._vtime = 0.0

    def rescale(self, share: float, now: float) -> bool:
        """Hold ``share`` (0..1) of the budget from ``now`` on; ``True`` if the share changed.

        The bucket refills at ``rate * share`` and holds ``burst * share`` tokens, but never
        less than one while the share is positive (a request needs a whole token). So
        instances whose shares add up to 1 together grant at most ``rate * (t1 - t0)`` plus the
        sum of their bursts: ``burst``, plus under one per instance whose ``burst * share`` is
        below one. Share 0 stops the bucket: its waiters wait until a share comes back (see
        :meth:`next_grant_at`). Tokens are kept, capped at the new burst (see
        :meth:`TokenBucket.resize`).
        """
        if isinstance(share, bool) or not (math.isfinite(share) and 0 <= share <= 1):
            raise ValueError(f"budget {self.name!r}: share must be within 0..1, got {share!r}")
        if share == self.share:
            return False
        self.share = float(share)
        burst = max(1.0, self.burst * share) if share > 0 else 0.0
        self.bucket.resize(self.rate * share, burst, now)
        return True

    def rerate(self, rate: float, burst: float, now: float) -> bool:
        """The budget as configured becomes ``rate`` and ``burst`` from ``now`` on (a tenant
        whose plan changed); ``True`` if either changed. The share stays; tokens are kept,
        capped at the new burst, and a larger burst is earned, not handed out."""
        rate = parse_rate(rate)
        if not (math.isfinite(burst) and burst >= 1):
            raise ValueError(f"budget {self.name!r}: burst must be >= 1, got {burst!r}")
        if (rate, burst) == (self.rate, self.burst):
            return False
        self.rate, self.burst = rate, float(burst)
        share = self.share
        scaled = max(1.0, burst * share) if share > 0 else 0.0
        self.bucket.resize(rate * share, scaled, now)
        return True

    def request(self, requester: str, lane: Lane, weight: float, now: float) -> None:
        """Queue ``requester`` for a token in ``lane`` (idempotent per requester and lane)."""
        if not (math.isfinite(weight) and weight > 0):
            raise ValueError(f"budget {self.name!r}: weight must be positive, got {weight!r}")
        self._weight[requester] = weight
        if (requester, lane) in self._waiting:
            return
        if not self._is_waiting(requester):
            # Stride scheduling: a requester (re)joining starts at the current virtual time, so
            # time spent idle is not credit it can spend to crowd out the others.
            self._pass[requester] = max(self._pass.get(requester, self._vtime), self._vtime)
        self._arrivals += 1
        self._waiting[(requester, lane)] = Request(requester, lane, self._arrivals, now)

    def cancel(self, requester: str, lane: Lane | None = None) -> None:
        """Withdraw the requester's request in ``lane``, or in every lane. Unknown: no-op."""
        lanes = list(Lane) if lane is None else [lane]
        for each in lanes:
            self._waiting.pop((requester, each), None)

    def forget(self, requester: str) -> None:
        """Cancel everything and drop the requester's fairness history (partition removed)."""
        self.cancel(requester)
        self._last_served.pop(requester, None)
        self._weight.pop(requester, None)
        self._pass.pop(requester, None)

    def waiting(self) -> list[Request]:
        """Outstanding requests, in arrival order."""
        return sorted(self._waiting.values(), key=lambda r: r.arrival)

    def grant(self, now: float) -> list[str]:
        """Requesters granted a token at ``now``, in grant order (see :meth:`grant_lanes`)."""
        return [g.requester for g in self.grant_lanes(now)]

    def grant_lanes(self, now: float) -> list[Grant]:
        """Hand out every token available at ``now`` to the best waiters, one each."""
        granted: list[Grant] = []
        while self._waiting:
            if not self.bucket.try_take(now):
                break
            chosen = self._choose()
            del self._waiting[(chosen.requester, chosen.lane)]
            self._record_service(chosen.requester)
            granted.append(Grant(chosen.requester, chosen.lane))
        return granted

    def next_grant_at(self, now: float) -> float | None:
        """When :meth:`grant` will next hand out a token; ``None`` if nobody waits.

        ``math.inf`` while the share is 0: nothing is granted until :meth:`rescale` gives one.
        """
        if not self._waiting:
            return None
        return self.bucket.next_token_at(now)

    def _choose(self) -> Request:
        top = max(r.lane.priority for r in self._waiting.values())
        candidates = [r for r in self._waiting.values() if r.lane.priority == top]
        return min(candidates, key=self._order)

    def _order(self, request: Request) -> tuple[float, int, int]:
        """Sort key among waiters of one lane: smaller is served first."""
        last = self._last_served.get(request.requester, -1)
        if self.fairness == "weighted":
            finish = self._pass[request.requester] + 1 / self._weight[request.requester]
            return (finish, last, request.arrival)
        return (float(last), 0, request.arrival)

    def _record_service(self, requester: str) -> None:
        self._served += 1
        self._last_served[requester] = self._served
        start = self._pass.get(requester, self._vtime)
        self._vtime = max(self._vtime, start)
        self._pass[requester] = start + 1 / self._weight.get(requester, 1.0)

    def _is_waiting(self, requester: str) -> bool:
        return any((requester, lane) in self._waiting for lane in Lane)
