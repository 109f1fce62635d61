"""What the streams of one connector share per tenant (CONTRACT.md, "Several streams"): one
partitions listing per refresh, one OAuth2 token cache, and the vendor's rate-limit pacing.
(The budget is shared by its name already.) One :class:`Shared` is made per connector entry by
:func:`~watukuy.declarative.streams.compile_connector_entry` and handed to each stream's poller,
so the streams hold the same objects rather than copies.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from watukuy.declarative.auth import TokenCache
from watukuy.http import Throttled

__all__ = ["PacedByStream", "Pacing", "Shared", "SharedListing"]

Clock = Callable[[], float]


class SharedListing:
    """One tenant listing per refresh for several streams.

    Every stream's poller refreshes its partitions on its own (the engine knows nothing of
    connectors), so each gets a callable from :meth:`for_stream`. A listing is reused by each
    stream once: the first stream to refresh lists, the others take that result at their own
    refresh; a stream asking again (its next refresh, or a forced one) lists anew, and that new
    listing serves the others in turn. No timer decides it, so the streams need not refresh in
    step; ``max_age`` (the refresh interval) only keeps a stream that lagged (stopped for a
    while) from taking an old listing. A failed listing is shared too: a vendor that is down is
    asked once per refresh, not once per stream.
    """

    def __init__(
        self, source: Callable[[], Any], max_age: float, clock: Clock = time.monotonic
    ) -> None:
        self._source = source
        self._max_age = max_age
        self._clock = clock
        self._lock = asyncio.Lock()
        self._generation = 0
        self._listed_at = 0.0
        self._result: list[Any] | BaseException | None = None
        self._seen: dict[str, int] = {}
        self.listings = 0
        """Listings made so far (what a test or a metric can count)."""

    def for_stream(self, stream: str) -> Callable[[], Awaitable[list[Any]]]:
        """The ``partitions`` callable of one stream's poller."""

        async def partitions() -> list[Any]:
            return await self._take(stream)

        partitions.__qualname__ = partitions.__name__ = f"shared_partitions_{stream}"
        return partitions

    async def _take(self, stream: str) -> list[Any]:
        async with self._lock:  # a stream arriving while another lists waits for that listing
            fresh = self._clock() - self._listed_at < self._max_age
            if self._result is None or self._seen.get(stream) == self._generation or not fresh:
                await self._list()
            self._seen[stream] = self._generation
            result = self._result
        if isinstance(result, BaseException):
            raise result
        assert result is not None
        return list(result)  # each stream's own list: the roster may keep it

    async def _list(self) -> None:
        self.listings += 1
        self._generation += 1
        self._listed_at = self._clock()
        try:
            returned = self._source()
            if inspect.isawaitable(returned):
                returned = await returned
            self._result = list(returned)
        except Exception as exc:  # the engine logs it and keeps each stream's previous list
            self._result = exc


class PacedByStream(Throttled):
    """A stream's poll not sent because another stream of the same connector was told by the
    vendor to slow down for this tenant (429 with Retry-After, or a spent quota)."""

    def __init__(self, *, connector: str, until: float, method: str, template: str) -> None:
        super().__init__(until=until, status=429, method=method, template=template)
        self.args = (
            f"connector {connector}: this tenant is rate-limited (seen by another stream) "
            f"until {until:.3f}; not sent",
        )


@dataclass(slots=True)
class Pacing:
    """Until when each tenant of a connector must not be asked again, by partition key.

    Keyed by (connector, partition): one object per connector, one entry per tenant, so a 429
    for a tenant slows that tenant's other streams and no other tenant. The times are the
    engine's clock (``ctx.http.now()``), as :class:`~watukuy.http.Throttled` carries them.
    """

    connector: str
    _until: dict[str, float] = field(default_factory=dict)

    def note(self, tenant: str, until: float | None) -> None:
        if until is not None and until > self._until.get(tenant, 0.0):
            self._until[tenant] = until

    def until(self, tenant: str, now: float) -> float | None:
        """When ``tenant`` may be asked again, if that is still ahead of ``now``."""
        found = self._until.get(tenant)
        if found is None:
            return None
        if found <= now:
            del self._until[tenant]  # passed: the table holds only tenants being paced
            return None
        return found


@dataclass(frozen=True, slots=True)
class Shared:
    """One connector's shared parts; ``listing`` is ``None`` without ``partitions``."""

    connector: str
    listing: SharedListing | None
    refresh: float | None
    tokens: TokenCache = field(default_factory=TokenCache)
    pacing: Pacing = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pacing", Pacing(self.connector))
