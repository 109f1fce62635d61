"""The tenants' items as incremental endpoints that take a time window serve them (issue 44).
Each is modelled on the public API documentation cited beside it, never on another project's
code; both serve the app's ``items`` collection (auth, quota, faults, ETags, ground truth), and
add the item's ``updated_at`` as epoch seconds, the form these vendors write times in.

``GET /{slug}/v1/charges?created[gte]=&created[lt]=&limit=&page=``
    A window in epoch seconds, ``[gte, lt)``, as Stripe's list endpoints filter ``created``
    (https://docs.stripe.com/api/charges/list, "created.gte" / "created.lt"), answered in
    Stripe's list object ``{"object": "list", "data", "has_more"}`` with the next page's token
    in ``next_page``, as Stripe's search results carry it
    (https://docs.stripe.com/search#search-query-language, "next_page"). The start is
    required, as Zendesk's incremental exports require ``start_time``
    (https://developer.zendesk.com/api-reference/ticketing/ticket-management/incremental_exports/),
    and a window longer than 31 days is refused with a 400, as PayPal's transaction search
    refuses one (https://developer.paypal.com/docs/api/transaction-search/v1/, "The maximum
    supported range is 31 days").
``GET /{slug}/incremental/tickets.json?start_time=``
    Zendesk's time-based incremental export: ``start_time`` in epoch seconds, required;
    ``{"tickets", "count", "end_time", "next_page", "end_of_stream"}``, ``next_page`` an
    absolute URL carrying the next ``start_time`` (the same link as the page's, on its last
    page), ``end_of_stream`` true on the last page. Pages here go on by the app's own cursor
    in the link, so an item is never split across two.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from .paging import Page, from_iso
from .records import Item

__all__ = ["MAX_SPAN", "add_routes"]

MAX_SPAN = 31 * 86_400
"""The longest window ``/v1/charges`` answers, in seconds."""

Answer = Callable[..., Awaitable[web.Response]]
_MICROS = 1_000_000


def add_routes(routes: web.UrlDispatcher, answer: Answer, listing: type) -> None:
    """Register the windowed endpoints; ``answer`` serves a listing as the app does."""
    windows = _Windows(answer, listing)
    routes.add_get("/{slug}/v1/charges", windows.charges)
    routes.add_get("/{slug}/incremental/tickets.json", windows.zendesk)


def _epoch(body: dict[str, Any]) -> dict[str, Any]:
    return body | {"updated": from_iso(body["updated_at"]) // _MICROS}


def _bad(message: str) -> web.Response:
    error = {"error": {"type": "invalid_request_error", "message": message}}
    return web.json_response(error, status=400)


def _seconds(raw: str | None, name: str) -> int | web.Response:
    if raw is None:
        return _bad(f"Missing required param: {name}.")
    try:
        return int(raw)
    except ValueError:
        return _bad(f"Invalid integer: {name}")


class _Windows:
    def __init__(self, answer: Answer, listing: type) -> None:
        self._answer = answer
        self._listing = listing

    async def charges(self, request: web.Request) -> web.Response:
        query = request.query
        start = _seconds(query.get("created[gte]"), "created[gte]")
        if isinstance(start, web.Response):
            return start
        end: int | None = None
        if "created[lt]" in query:
            given = _seconds(query["created[lt]"], "created[lt]")
            if isinstance(given, web.Response):
                return given
            end = given
        if end is not None and end - start > MAX_SPAN:
            return _bad("The date range may span at most 31 days.")

        def shape(page: Page[Item], items: list[Any], request: web.Request) -> dict[str, Any]:
            more = page.next is not None
            data = [_epoch(item) for item in items]
            return {"object": "list", "data": data, "has_more": more, "next_page": page.next}

        since = _iso_of(start)
        listing = self._listing(query.get("page"), since, query.get("limit"), shape)
        if end is None:
            return await self._answer(request, listing)
        bound = end * _MICROS
        return await self._answer(request, listing, lambda item: item.stamp < bound)

    async def zendesk(self, request: web.Request) -> web.Response:
        start = _seconds(request.query.get("start_time"), "start_time")
        if isinstance(start, web.Response):
            return start

        def shape(page: Page[Item], items: list[Any], request: web.Request) -> dict[str, Any]:
            data = [_epoch(item) for item in items]
            end_time = max((item["updated"] for item in data), default=start)
            query: dict[str, Any] = {"start_time": start}
            if page.next is not None:
                query["cursor"] = page.next
            link = str(request.url.with_query(None)) + "?" + urlencode(query)
            return {
                "tickets": data,
                "count": len(data),
                "end_time": end_time,
                "next_page": link,
                "end_of_stream": page.next is None,
            }

        listing = self._listing(request.query.get("cursor"), _iso_of(start), "100", shape)
        return await self._answer(request, listing)


def _iso_of(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat()
