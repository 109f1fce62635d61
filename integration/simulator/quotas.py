"""An endpoint with a quota of its own, as vendors meter their expensive endpoints (issue 44).

Modelled on Harvest's API v2 "Rate limiting" (https://help.getharvest.com/api-v2/introduction/
overview/general/#rate-limiting): general requests are limited to 100 per 15 seconds per
account, reports requests to 100 per 15 *minutes*; a request over the limit is answered 429
with ``Retry-After`` (seconds). A connector reading reports beside the rest must then pace
them by a second budget (``budget: [vendor, reports]``).

``GET /{slug}/reports/time?page=&per_page=`` with ``Authorization: Bearer <token>``
    The tenant's ``items`` as report rows, page by page: ``{"results": [...], "next_page":
    str|null}`` (``next_page`` is sent back as ``page``). Counted first against the reports
    quota of the tenant (a fixed window; 100 per 900 s unless changed below): over it, 429
    ``{"message": ...}`` with ``Retry-After``; within it, ``X-Reports-Limit`` and
    ``X-Reports-Remaining`` tell how much is left. Then served as any listing, under the
    tenant's general quota, faults and ETags.

Admin API (not counted):

- ``GET /_admin/reports-quota``: ``{"limit", "window", "tenants": {slug: {"served",
  "refused", "times"}}}``: per tenant, the reports requests admitted and refused, and the
  times (seconds on the simulator's monotonic clock) of those admitted.
- ``POST /_admin/reports-quota`` ``{"limit"?, "window"?}``: a quota a test can see work in
  seconds rather than in 15 minutes; the windows start afresh.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .paging import Page
from .records import Item

__all__ = ["HARVEST_REPORTS", "ReportsQuota", "add_routes"]

HARVEST_REPORTS = (100, 900.0)
"""Harvest's reports quota: 100 requests per 15 minutes per account."""

Answer = Callable[..., Awaitable[web.Response]]
Listing = Any  # the app's Listing (cursor, updated_since, limit, shape)


@dataclass
class _Window:
    started: float
    used: int = 0
    served: int = 0
    refused: int = 0
    times: list[float] = field(default_factory=list)


class ReportsQuota:
    """A fixed window of ``limit`` requests per ``window`` seconds, per tenant."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window = HARVEST_REPORTS
        self._now = now
        self._tenants: dict[str, _Window] = {}

    def admit(self, tenant: str) -> tuple[bool, int, float]:
        """Count a request: whether it is allowed, what is left, seconds to the next window."""
        now = self._now()
        state = self._tenants.setdefault(tenant, _Window(now))
        if now - state.started >= self.window:
            state.started, state.used = now, 0
        reset = state.started + self.window - now
        if state.used >= self.limit:
            state.refused += 1
            return False, 0, reset
        state.used += 1
        state.served += 1
        state.times.append(now)
        return True, self.limit - state.used, reset

    def set(self, limit: object = None, window: object = None) -> None:
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValueError("limit must be an integer >= 1")
            self.limit = limit
        if window is not None:
            if isinstance(window, bool) or not isinstance(window, int | float) or window <= 0:
                raise ValueError("window must be a positive number of seconds")
            self.window = float(window)
        for state in self._tenants.values():
            state.started, state.used = self._now(), 0

    def shown(self) -> dict[str, Any]:
        tenants = {
            slug: {"served": s.served, "refused": s.refused, "times": list(s.times)}
            for slug, s in self._tenants.items()
        }
        return {"limit": self.limit, "window": self.window, "tenants": tenants}


def add_routes(
    routes: web.UrlDispatcher,
    answer: Answer,
    listing: type,
    authorised: Callable[[web.Request], bool],
) -> ReportsQuota:
    """Register the reports endpoint and its admin routes; ``answer``, ``listing`` and
    ``authorised`` are the app's (as :func:`.shapes.add_routes` takes them)."""
    quota = ReportsQuota()

    def shape(page: Page[Item], items: list[Any], request: web.Request) -> dict[str, Any]:
        return {"results": items, "next_page": page.next}

    async def reports(request: web.Request) -> web.Response:
        if not authorised(request):  # a wrong token is no report request of the account
            return web.json_response({"message": "Invalid credentials"}, status=401)
        allowed, remaining, reset = quota.admit(request.match_info["slug"])
        headers = {"X-Reports-Limit": str(quota.limit), "X-Reports-Remaining": str(remaining)}
        if not allowed:
            headers["Retry-After"] = str(max(1, math.ceil(reset)))
            message = f"API rate limit exceeded: {quota.limit} report requests per window"
            return web.json_response({"message": message}, status=429, headers=headers)
        query = request.query
        page = listing(query.get("page"), None, query.get("per_page"), shape)
        response = await answer(request, page)
        response.headers.update(headers)
        return response

    async def show(request: web.Request) -> web.Response:
        return web.json_response(quota.shown())

    async def change(request: web.Request) -> web.Response:
        body = await request.json()
        if not isinstance(body, dict) or set(body) - {"limit", "window"}:
            raise ValueError("expected {limit?, window?}")
        quota.set(body.get("limit"), body.get("window"))
        return web.json_response(quota.shown())

    routes.add_get("/{slug}/reports/time", reports)
    routes.add_get("/_admin/reports-quota", show)
    routes.add_post("/_admin/reports-quota", change)
    return quota
