"""The ``fetch`` of a declarative poller: one page per call, as the engine drives any poller.

Each call reads where the poll stands from ``ctx.cursor.value`` (see
:mod:`watukuy.declarative.cursors`), renders the request for ``ctx.partition``, sends it
through ``ctx.http`` (budget, validators, rate-limit headers), judges the status
(:mod:`watukuy.declarative.status`), takes the records out of the body and returns
``FetchResult(items, cursor, has_more)``: ``has_more`` and a mid-listing cursor when another
page follows, else the plain cursor for the next poll.

Request, per page: the rendered ``url`` and ``query``, then the cursor parameter, then the
page parameter, then auth's query parameter (each wins over the ones before it); the rendered
``headers``, then auth's (auth wins, whatever the case of the name).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from multidict import CIMultiDict
from yarl import URL

from watukuy.core.children import tenant_of
from watukuy.core.poller import FetchResult
from watukuy.core.ratelimit import throttle_until
from watukuy.declarative import cursors
from watukuy.declarative.auth import ApiKey, Credentials
from watukuy.declarative.errors import BadBody, StatusFailed
from watukuy.declarative.paging import LinkHeader, Paginate, follow_link, next_position, page_query
from watukuy.declarative.paths import MISSING, Path
from watukuy.declarative.request import Rendered, RequestSpec
from watukuy.declarative.shared import PacedByStream, Pacing
from watukuy.declarative.status import StatusTable
from watukuy.declarative.templates import Scope
from watukuy.http import KeyHttp, Response, Throttled, VendorError, build_url
from watukuy.http.errors import request_line

__all__ = ["PollSpec", "fetch_page", "make_fetch", "read_records", "send_request"]


@dataclass(frozen=True, slots=True)
class PollSpec:
    request: RequestSpec
    records: Path
    paginate: Paginate | None
    cursor: cursors.Cursor
    status: StatusTable
    throttle_default: float
    """Seconds to wait after a ``rate-limited`` status that does not say how long."""
    passthrough: frozenset[int] = frozenset()
    """``status.passthrough()``, computed once."""

    @property
    def secret_params(self) -> tuple[str, ...]:
        """An API key's query parameter: never stored with a ``Link`` position."""
        auth = self.request.auth
        return (auth.query,) if isinstance(auth, ApiKey) and auth.query is not None else ()


def make_fetch(
    spec: PollSpec, pacing: Pacing | None = None
) -> Callable[[Any], Awaitable[FetchResult]]:
    """The ``fetch`` to give ``define_poller``. ``pacing``: shared by the streams of one
    connector, so a tenant the vendor slowed down on one stream is not asked on another."""
    if pacing is not None:
        return _paced_fetch(spec, pacing)

    async def fetch(ctx: Any) -> FetchResult:
        return await fetch_page(spec, ctx.partition, ctx.cursor.value, ctx.http)

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
            result = await fetch_page(spec, ctx.partition, ctx.cursor.value, ctx.http)
        except Throttled as exc:
            pacing.note(tenant, exc.until)
            raise
        pacing.note(tenant, ctx.http.throttle_until)  # a spent quota on a page that succeeded
        return result

    fetch.__qualname__ = fetch.__name__ = "declarative_fetch"
    return fetch


async def fetch_page(spec: PollSpec, partition: Any, value: Any, http: KeyHttp) -> FetchResult:
    position = cursors.read(value)
    sent = cursors.outgoing(spec.cursor, position.resume)
    scope = Scope(partition=partition, cursor=sent)
    rendered = spec.request.render(scope)
    url, query = _page_target(spec, rendered, position, sent)
    response = await send_request(spec.request, http, scope, rendered, url, query, spec.passthrough)
    template = spec.request.url.shown
    method = spec.request.method
    action = spec.status.action(response.status)
    if action == "ignore":
        return FetchResult(
            items=[],
            cursor=cursors.at_end(spec.cursor, position, None, position.high),
            has_more=False,
        )
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
    body = await response.json()  # InvalidResponse names the template, as the client's errors
    items = read_records(spec.records, body, request_line(method, template))
    links = isinstance(spec.paginate, LinkHeader)  # only Link targets resolve against URLs
    following = next_position(
        spec.paginate,
        position.page,
        body=body,
        headers=response.headers,
        count=len(items),
        url=(URL(response.url) if response.url else build_url(url, query)) if links else None,
        base=build_url(rendered.url) if links else None,
        secret_params=spec.secret_params,
    )
    high = cursors.highest(spec.cursor, position.high, items)
    if following is not None:
        return FetchResult(
            items=items, cursor=cursors.mid_listing(position, following, high), has_more=True
        )
    return FetchResult(
        items=items, cursor=cursors.at_end(spec.cursor, position, body, high), has_more=False
    )


def read_records(path: Path, body: Any, what: str) -> list[Any]:
    """The item list at ``path`` in ``body``; null is no items, anything else not a list is
    a :class:`BadBody` naming ``what`` (method and URL template) and the path."""
    found = path.find(body)
    if found is MISSING:
        raise BadBody(f"{what}: no records at {path.text!r} in the body")
    if found is None:
        return []
    if not isinstance(found, list):
        shown = "the body" if not path.text else repr(path.text)
        noun = "a mapping" if isinstance(found, dict) else f"a {type(found).__name__}"
        raise BadBody(f"{what}: records at {shown} is {noun}, not a list")
    return found


def _page_target(
    spec: PollSpec, rendered: Rendered, position: cursors.Position, sent: Any
) -> tuple[str, dict[str, str]]:
    """The URL and query of this page (auth not yet added)."""
    if isinstance(spec.paginate, LinkHeader) and position.page is not None:
        return str(follow_link(str(position.page), build_url(rendered.url))), {}
    query = dict(rendered.query)
    param = spec.cursor.param
    if param is not None and sent is not None:
        query[param] = str(sent)
    query.update(page_query(spec.paginate, position.page))
    return rendered.url, query


async def send_request(
    request: RequestSpec,
    http: KeyHttp,
    scope: Scope,
    rendered: Rendered,
    url: str,
    query: Mapping[str, str],
    passthrough: Collection[int],
) -> Response:
    """One request with auth, plus one retry with fresh credentials after a 401 when the auth
    can renew them (OAuth2)."""
    auth = request.auth
    credentials = Credentials() if auth is None else await auth.credentials(scope, http)
    response = await _request(request, http, rendered, url, query, credentials, passthrough)
    if response.status == 401 and auth is not None and auth.renewable:
        credentials = await auth.credentials(scope, http, stale=credentials.token)
        response = await _request(request, http, rendered, url, query, credentials, passthrough)
    return response


async def _request(
    request: RequestSpec,
    http: KeyHttp,
    rendered: Rendered,
    url: str,
    query: Mapping[str, str],
    credentials: Credentials,
    passthrough: Collection[int],
) -> Response:
    headers: CIMultiDict[str] = CIMultiDict(rendered.headers)
    for name, value in credentials.headers.items():
        headers[name] = value  # replaces a configured header of any case
    return await http.request(
        request.method,
        url,
        query={**query, **credentials.query},
        headers=headers,
        json=rendered.json,
        template=request.url.shown,
        passthrough=passthrough,
    )
