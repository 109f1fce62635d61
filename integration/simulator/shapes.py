"""The tenants' items as real SaaS APIs serve their lists: the answer shapes, page cursors
and errors a declarative poller has to describe (issue 43). Each is modelled on the public
API documentation cited beside it (never on another project's code); all serve the same
``items`` collection as ``/{slug}/items``, with its auth, quota, faults, ETags and ground
truth, so a connector reading them is checked like any other.

``GET /{slug}/zendesk/items?page[size]=&page[after]=``
    Zendesk's cursor pagination: ``{"items", "meta": {"has_more", "after_cursor"},
    "links": {"next"}}``, ``links.next`` an absolute URL (null at the end).
``GET /{slug}/twilio/Messages.json?PageSize=&PageToken=``
    Twilio's list paging: ``{"messages", "next_page_uri", "page_size"}``, the next page's
    URI relative to the API's host (null at the end).
``POST /{slug}/graphql`` ``{"query", "variables": {"first", "after"}}``
    Linear's GraphQL connections: ``{"data": {"issues": {"nodes", "pageInfo": {"hasNextPage",
    "endCursor"}}}}``; a cursor it cannot read is a 200 carrying ``errors``.
``POST /{slug}/contacts/search`` ``{"query", "pagination": {"per_page", "starting_after"}}``
    Intercom's search: ``{"type": "list", "data", "pages": {"next": {"starting_after"}}}``,
    ``pages.next`` absent on the last page.
``GET /{slug}/chargebee/customers?limit=&offset=``
    Chargebee's lists: ``{"list": [{"customer": {...}}], "next_offset"}`` (absent at the end).
``GET /{slug}/chargebee/quotes``
    A feature the site has not enabled: 400 ``{"message": "This API operation is not enabled
    for this site", "api_error_code": "configuration_incompatible"}``.
``GET /{slug}/users/me``
    One object, not a list: ``{"user": {"id", "name"}}`` (Zendesk's "Show Self").
``GET /{slug}/mailFolders/{folder}/messages?$top=&$skiptoken=``
    Microsoft Graph's messages of one mail folder (``inbox``, ``drafts`` or ``sent``: each item
    lives in one): ``{"value", "@odata.nextLink"}``, the link absolute, absent at the end.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from .paging import Page
from .records import Item

__all__ = ["FOLDERS", "add_routes", "folder_of"]

FOLDERS = ("inbox", "drafts", "sent")

Answer = Callable[..., Awaitable[web.Response]]
"""The app's listing answer: ``(request, listing, where=None) -> response``."""
Listing = Any  # the app's Listing (cursor, updated_since, limit, shape)


def folder_of(item_id: str) -> str:
    """The mail folder an item lives in (fixed per item)."""
    return FOLDERS[zlib.crc32(item_id.encode()) % len(FOLDERS)]


def add_routes(
    routes: web.UrlDispatcher,
    answer: Answer,
    listing: type,
    authorised: Callable[[web.Request], bool],
) -> None:
    """Register every shape; ``answer`` serves a listing as the app does, ``listing`` is the
    app's :class:`Listing`, ``authorised`` checks a tenant's token (for the answers that are
    no listing)."""
    shapes = _Shapes(answer, listing)
    routes.add_get("/{slug}/zendesk/items", shapes.zendesk)
    routes.add_get("/{slug}/twilio/Messages.json", shapes.twilio)
    routes.add_post("/{slug}/graphql", shapes.graphql)
    routes.add_post("/{slug}/contacts/search", shapes.intercom)
    routes.add_get("/{slug}/chargebee/customers", shapes.chargebee)
    routes.add_get("/{slug}/chargebee/quotes", _guarded(authorised, _not_enabled))
    routes.add_get("/{slug}/users/me", _guarded(authorised, _me))
    routes.add_get("/{slug}/mailFolders/{folder}/messages", shapes.graph)


class _Shapes:
    def __init__(self, answer: Answer, listing: type) -> None:
        self._answer = answer
        self._listing = listing

    async def zendesk(self, request: web.Request) -> web.Response:
        # https://developer.zendesk.com/api-reference/introduction/pagination/#using-cursor-pagination
        size = request.query.get("page[size]")

        def shape(page: Page[Item], items: list[Any], request: web.Request) -> dict[str, Any]:
            following = None
            if page.next is not None:
                query = urlencode({"page[size]": size or "50", "page[after]": page.next})
                following = str(request.url.with_query(None)) + "?" + query
            meta = {"has_more": page.next is not None, "after_cursor": page.resume}
            return {"items": items, "meta": meta, "links": {"next": following}}

        query = request.query
        return await self._answer(
            request, self._listing(query.get("page[after]"), None, size, shape)
        )

    async def twilio(self, request: web.Request) -> web.Response:
        # https://www.twilio.com/docs/usage/twilios-response#response-formats-list-paging-information
        size = request.query.get("PageSize")

        def shape(page: Page[Item], items: list[Any], request: web.Request) -> dict[str, Any]:
            uri = None
            if page.next is not None:
                query = urlencode({"PageSize": size or "50", "PageToken": page.next})
                uri = f"{request.path}?{query}"  # relative to the host, as Twilio's is
            return {"messages": items, "next_page_uri": uri, "page_size": int(size or 50)}

        token = request.query.get("PageToken")
        return await self._answer(request, self._listing(token, None, size, shape))

    async def graphql(self, request: web.Request) -> web.Response:
        # https://linear.app/developers/pagination (Relay-style connections: first/after,
        # pageInfo.hasNextPage, pageInfo.endCursor); errors come as a 200 with "errors"
        body = await _json(request)
        found = body.get("variables")
        variables: dict[str, Any] = found if isinstance(found, dict) else {}
        after, first = variables.get("after"), variables.get("first")

        def shape(page: Page[Item], items: list[Any], request: web.Request) -> dict[str, Any]:
            info = {"hasNextPage": page.next is not None, "endCursor": page.next or page.resume}
            return {"data": {"issues": {"nodes": items, "pageInfo": info}}}

        limit = None if first is None else str(first)
        answered = await self._answer(request, self._listing(after, None, limit, shape))
        if answered.status == 400:  # GraphQL says so in a 200, not with the status
            error = {"message": "invalid cursor", "extensions": {"code": "INVALID_CURSOR"}}
            return web.json_response({"errors": [error], "data": None}, headers=_kept(answered))
        return answered

    async def intercom(self, request: web.Request) -> web.Response:
        # https://developers.intercom.com/docs/build-an-integration/learn-more/rest-apis/pagination-search-endpoints
        body = await _json(request)
        found = body.get("pagination")
        paging: dict[str, Any] = found if isinstance(found, dict) else {}
        after, size = paging.get("starting_after"), paging.get("per_page")

        def shape(page: Page[Item], items: list[Any], request: web.Request) -> dict[str, Any]:
            pages: dict[str, Any] = {"type": "pages", "per_page": int(size or 50)}
            if page.next is not None:
                pages["next"] = {"per_page": int(size or 50), "starting_after": page.next}
            return {"type": "list", "data": items, "pages": pages}

        limit = None if size is None else str(size)
        return await self._answer(request, self._listing(after, None, limit, shape))

    async def chargebee(self, request: web.Request) -> web.Response:
        # https://apidocs.chargebee.com/docs/api/customers#list_customers and
        # https://apidocs.chargebee.com/docs/api#pagination_and_filtering
        def shape(page: Page[Item], items: list[Any], request: web.Request) -> dict[str, Any]:
            out: dict[str, Any] = {"list": [{"customer": item} for item in items]}
            if page.next is not None:
                out["next_offset"] = page.next
            return out

        query = request.query
        listing = self._listing(query.get("offset"), None, query.get("limit"), shape)
        return await self._answer(request, listing)

    async def graph(self, request: web.Request) -> web.Response:
        # https://learn.microsoft.com/en-us/graph/api/mailfolder-list-messages and
        # https://learn.microsoft.com/en-us/graph/paging (@odata.nextLink, absolute)
        folder = request.match_info["folder"]
        if folder not in FOLDERS:
            return web.json_response({"error": {"code": "ErrorItemNotFound"}}, status=404)
        size = request.query.get("$top")

        def shape(page: Page[Item], items: list[Any], request: web.Request) -> dict[str, Any]:
            out: dict[str, Any] = {"value": items}
            if page.next is not None:
                query = urlencode({"$top": size or "50", "$skiptoken": page.next})
                out["@odata.nextLink"] = str(request.url.with_query(None)) + "?" + query
            return out

        listing = self._listing(request.query.get("$skiptoken"), None, size, shape)
        return await self._answer(request, listing, lambda item: folder_of(item.id) == folder)


async def _not_enabled(request: web.Request) -> web.Response:
    # https://apidocs.chargebee.com/docs/api/error-handling (api_error_code
    # configuration_incompatible: the site's configuration does not allow the operation)
    error = {
        "message": "This API operation is not enabled for this site",
        "api_error_code": "configuration_incompatible",
        "type": "invalid_request",
        "http_status_code": 400,
    }
    return web.json_response(error, status=400)


async def _me(request: web.Request) -> web.Response:
    # https://developer.zendesk.com/api-reference/ticketing/users/users/#show-self
    slug = request.match_info["slug"]
    return web.json_response({"user": {"id": f"user-{slug}", "name": f"{slug} admin"}})


def _guarded(
    authorised: Callable[[web.Request], bool],
    handler: Callable[[web.Request], Awaitable[web.Response]],
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def guarded(request: web.Request) -> web.Response:
        if not authorised(request):
            return web.json_response({"error": "missing or wrong bearer token"}, status=401)
        return await handler(request)

    return guarded


async def _json(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _kept(answered: web.Response) -> dict[str, str]:
    return {k: v for k, v in answered.headers.items() if k.lower().startswith("ratelimit")}
