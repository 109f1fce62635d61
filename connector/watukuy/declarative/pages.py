"""One page of a declarative listing, the same for a poll and for a tenants endpoint: its
request placed by the paginator, sent with auth, and where the next page is.

A poll takes one step per ``fetch`` call (the engine drives the pages and commits each); a
tenant listing takes them all in a row (:mod:`watukuy.declarative.tenants`). Both judge the
status in between, each by its own rule: the poll by ``on_status``, the listing by "2xx or
fail".

Request, per page: the rendered ``url`` and ``query`` (a poll adds its cursor parameter),
then what the paginator places, then auth's query parameter (each wins over the ones before
it); the rendered ``headers``, then auth's (auth wins, whatever the case of the name).
"""

from __future__ import annotations

from collections.abc import Awaitable, Collection
from typing import Any

from multidict import CIMultiDict
from yarl import URL

from watukuy.declarative.auth import Credentials
from watukuy.declarative.paging import PageRequest, PageSeen, Paginator
from watukuy.declarative.request import Rendered, RequestSpec
from watukuy.declarative.templates import Scope
from watukuy.engine.credentials import Vault
from watukuy.http import KeyHttp, Response, build_url

__all__ = ["first_request", "next_page", "send_page"]


def first_request(rendered: Rendered, extra_query: dict[str, str] | None = None) -> PageRequest:
    """The request every page starts from: the rendered URL, query (plus ``extra_query``, a
    poll's cursor parameter) and body."""
    query = dict(rendered.query)
    if extra_query:
        query.update(extra_query)
    return PageRequest(rendered.url, query, rendered.json)


async def send_page(
    request: RequestSpec,
    http: KeyHttp,
    scope: Scope,
    rendered: Rendered,
    page: PageRequest,
    passthrough: Collection[int],
    vault: Vault | None = None,
) -> Response:
    """One page's request, authorised by the request's auth kind (which renews its
    credentials and sends again itself, when it can); ``vault`` holds the tenants' grants."""
    auth = request.auth

    def send(credentials: Credentials) -> Awaitable[Response]:
        return _send(request, http, rendered, page, credentials, passthrough)

    if auth is None:
        return await send(Credentials())
    return await auth.send(scope, http, send, vault)


async def _send(
    request: RequestSpec,
    http: KeyHttp,
    rendered: Rendered,
    page: PageRequest,
    credentials: Credentials,
    passthrough: Collection[int],
) -> Response:
    headers: CIMultiDict[str] = CIMultiDict(rendered.headers)
    for name, value in credentials.headers.items():
        headers[name] = value  # replaces a configured header of any case
    return await http.request(
        request.method,
        page.url,
        query={**page.query, **credentials.query},
        headers=headers,
        json=page.json,
        template=request.url.shown,
        passthrough=passthrough,
    )


def next_page(
    paginate: Paginator,
    position: Any,
    *,
    response: Response,
    body: Any,
    count: int,
    page: PageRequest,
    rendered: Rendered,
    secret_params: Collection[str] = (),
) -> Any:
    """Where the page after ``page`` (at ``position``, ``count`` records) is; ``None``: it
    was the last. The page's URL is worked out only for a paginator that follows URLs."""
    url = base = None
    if paginate.follows_urls:
        url = URL(response.url) if response.url else build_url(page.url, page.query)
        base = build_url(rendered.url)
    seen = PageSeen(body, response.headers, count, url, base, secret_params)
    return paginate.next(position, seen)
