"""The ``fetch`` of a declarative poller: one page per call, as the engine drives any poller.

Each call reads where the poll stands from ``ctx.cursor.value`` (see
:mod:`watukuy.declarative.cursors`), renders the request for ``ctx.partition``, sends it
through ``ctx.http`` (budget, validators, rate-limit headers), judges the status
(:mod:`watukuy.declarative.status`), takes the records out of the body and returns
``FetchResult(items, cursor, has_more)``: ``has_more`` and a mid-listing cursor when another
page follows, else the plain cursor for the next poll.

The page itself (its request, sent with auth, and where the next one is) is
:mod:`watukuy.declarative.pages`, shared with the tenant listings.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from watukuy.core.children import tenant_of
from watukuy.core.poller import FetchResult
from watukuy.core.ratelimit import throttle_until
from watukuy.declarative import cursors
from watukuy.declarative.errors import BadBody, StatusFailed
from watukuy.declarative.listings import START_OVER, Listings
from watukuy.declarative.pages import first_request, next_page, send_page
from watukuy.declarative.paging import Paginator
from watukuy.declarative.records import Records
from watukuy.declarative.request import RequestSpec
from watukuy.declarative.shared import PacedByStream, Pacing
from watukuy.declarative.status import StatusTable
from watukuy.declarative.templates import Scope
from watukuy.engine.credentials import Vault
from watukuy.http import InvalidResponse, KeyHttp, Response, Throttled, VendorError
from watukuy.http.errors import request_line

__all__ = ["PollSpec", "fetch_page", "make_fetch"]

log = logging.getLogger("watukuy.declarative")


@dataclass(frozen=True, slots=True)
class PollSpec:
    request: RequestSpec
    records: Records
    paginate: Paginator
    cursor: cursors.Cursor
    status: StatusTable
    throttle_default: float
    """Seconds to wait after a ``rate-limited`` status that does not say how long."""
    passthrough: frozenset[int] = frozenset()
    """``status.passthrough()``, computed once."""
    paginate_where: str = "paginate"
    """The config path of ``paginate``, for its errors."""
    listings: Listings = field(default_factory=Listings, compare=False)
    """What this poller keeps of its keys' listings in memory (:mod:`.listings`)."""

    @property
    def secret_params(self) -> tuple[str, ...]:
        """An API key's query parameter: never stored with a ``Link`` position."""
        auth = self.request.auth
        secret = None if auth is None else auth.secret_query
        return () if secret is None else (secret,)


def make_fetch(
    spec: PollSpec, pacing: Pacing | None = None
) -> Callable[[Any], Awaitable[FetchResult]]:
    """The ``fetch`` to give ``define_poller``. ``pacing``: shared by the streams of one
    connector, so a tenant the vendor slowed down on one stream is not asked on another."""
    if pacing is not None:
        return _paced_fetch(spec, pacing)

    async def fetch(ctx: Any) -> FetchResult:
        return await fetch_page(spec, ctx.partition, ctx.cursor.value, ctx.http, ctx.credentials)

    fetch.__qualname__ = fetch.__name__ = "declarative_fetch"
    return fetch


def _paced_fetch(spec: PollSpec, pacing: Pacing) -> Callable[[Any], Awaitable[FetchResult]]:
    async def fetch(ctx: Any) -> FetchResult:
        tenant = tenant_of(ctx.partition)  # a child stream's key waits with its tenant
        until = pacing.until(tenant, ctx.http.now())
        if until is not None:  # not sent: the vendor already said this tenant must wait
            raise PacedByStream(
                connector=pacing.connector,
                until=until,
                method=spec.request.method,
                template=spec.request.url.shown,
            )
        try:
            result = await fetch_page(
                spec, ctx.partition, ctx.cursor.value, ctx.http, ctx.credentials
            )
        except Throttled as exc:
            pacing.note(tenant, exc.until)
            raise
        pacing.note(tenant, ctx.http.throttle_until)  # a spent quota on a page that succeeded
        return result

    fetch.__qualname__ = fetch.__name__ = "declarative_fetch"
    return fetch


async def fetch_page(
    spec: PollSpec, partition: Any, value: Any, http: KeyHttp, vault: Vault | None = None
) -> FetchResult:
    key = partition.key
    position = cursors.read(value)
    at = spec.listings.recall(key, position.page)
    if at is START_OVER:  # its next URL was never stored: the listing starts over
        log.info("%s: listing again from its first page (a next URL is never stored)", key)
        position, at = replace(position, page=None), None
    now = http.now()
    plan = spec.cursor.plan(position, partition, now)
    if plan.empty:  # a window not open yet (end: now-DURATION): nothing to ask
        return FetchResult(items=[], cursor=plan.origin or position.resume, has_more=False)
    if plan.origin is not None:
        position = replace(position, resume=plan.origin)
    scope = Scope(partition=partition, cursor=plan.sent, start=plan.start, end=plan.end)
    rendered = spec.request.render(scope)
    page = spec.paginate.place(spec.cursor.place(first_request(rendered), plan), at)
    response = await send_page(spec.request, http, scope, rendered, page, spec.passthrough, vault)
    body = await _ruled_body(spec, response)
    action = _judged(spec, response, http, body)
    if action == "ignore":
        spec.listings.ended(key)
        cursor, more = spec.cursor.finish(position, plan, None, position.high, now)
        return FetchResult(items=[], cursor=cursor, has_more=more)
    if action == "restart":
        return _restarted(spec, position, at, response.status, plan)
    if body is _UNREAD:
        body = await response.json()  # InvalidResponse names the template, as the client's
    items = spec.records.read(body, request_line(spec.request.method, spec.request.url.shown))
    items = spec.cursor.vet(items)
    following = next_page(
        spec.paginate,
        at,
        response=response,
        body=body,
        count=len(items),
        page=page,
        rendered=rendered,
        secret_params=spec.secret_params,
    )
    high = spec.cursor.highest(position.high, items)
    if following is not None:
        stored = spec.listings.walked(key, at, following, spec.paginate_where)
        cursor = cursors.mid_listing(position, stored, high, plan.end_at)
        return FetchResult(items=items, cursor=cursor, has_more=True)
    spec.listings.ended(key)
    cursor, more = spec.cursor.finish(position, plan, body, high, now)
    return FetchResult(items=items, cursor=cursor, has_more=more)


_UNREAD: Any = object()


async def _ruled_body(spec: PollSpec, response: Response) -> Any:
    """The JSON body when ``on_status`` rules read it (``None`` when it is not JSON), else
    :data:`_UNREAD` (an ``ok`` page reads it after)."""
    if not spec.status.needs_body(response.status):
        return _UNREAD
    try:
        return await response.json()
    except InvalidResponse:
        return None


def _restarted(
    spec: PollSpec, position: cursors.Position, at: Any, status: int, plan: cursors.Plan
) -> FetchResult:
    """``restart``: this page dropped, the listing again from its first page and the cursor
    the poll started from. On the first page itself that would ask the same page for ever."""
    if at is None:
        shown = request_line(spec.request.method, spec.request.url.shown)
        raise BadBody(f"{shown} -> {status}: on_status says restart, on the listing's first page")
    cursor = cursors.mid_listing(position, None, position.high, plan.end_at)
    return FetchResult(items=[], cursor=cursor, has_more=True)


def _judged(spec: PollSpec, response: Response, http: KeyHttp, body: Any) -> str:
    """The status's action by ``on_status``: ``ok``, ``ignore`` or ``restart``; the others
    raise."""
    template = spec.request.url.shown
    method = spec.request.method
    action = spec.status.action(response.status, None if body is _UNREAD else body)
    if action == "retry":
        raise VendorError(status=response.status, method=method, template=template)
    if action == "fail":
        raise StatusFailed(method=method, template=template, status=response.status)
    if action == "rate-limited":
        now = http.now()
        until = throttle_until(response.status, response.headers, now, wall=now)
        if until is None or until <= now:
            until = now + spec.throttle_default
        raise Throttled(until=until, status=response.status, method=method, template=template)
    return action
