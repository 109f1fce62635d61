"""The vendor simulator over HTTP (aiohttp), as the pollers under test see it.

Public API (what a poller talks to):

``GET /tenants``
    ``{"tenants": [{"id", "slug", "token"}]}``: the listing a ``partitions`` callable uses.

``GET /{slug}/items?cursor=&limit=&updated_since=`` with ``Authorization: Bearer <token>``
    Items in ``(updated_at, id)`` order, as ``{"data": [...], "next": str|null, "resume": str}``.

    - ``next`` continues the listing; it is ``null`` on the last page.
    - ``resume`` is always present: passed later as ``?cursor=``, it lists only the items
      created or updated after the last item of this page (``updated_at`` is strictly
      increasing per tenant). A poller follows ``next`` to the end, keeps the last ``resume``
      and polls incrementally from it. Deleted items simply vanish: only a full scan (no
      cursor) shows that they are gone.
    - ``updated_since`` (ISO-8601; naive means UTC) keeps items with ``updated_at >=`` it.
    - ``limit``: 1..500, default 50. A bad ``limit``, ``cursor`` or ``updated_since`` is a
      400 ``{"error": ...}``; an unknown slug 404; a missing or wrong token 401.
    - ``ETag`` is a digest of the body; a matching ``If-None-Match`` gets a bodiless 304.
    - Each tenant has a fixed-window quota; every authenticated answer carries
      ``RateLimit-Limit``, ``RateLimit-Remaining`` and ``RateLimit-Reset`` (seconds), and
      once the quota is spent the answer is 429 with ``Retry-After`` (seconds).
    - The tenant's :class:`~.vendor.Faults` apply after authentication and rate limiting.

A tracker's collections, with the same paging, cursors, ETags, auth, quota and faults (one
quota per tenant across all of them), each record also carrying ``etag``:

``GET /{slug}/projects``: ``{"id", "name", "archived", "updated_at"}``
``GET /{slug}/projects/{project}/issues``: ``{"id", "title", "status"`` (open, pending or
    closed)``, "spam", "reporter": {"email", "internal_note"}, "updated_at"}``
``GET /{slug}/projects/{project}/issues/{issue}/comments``: ``{"id", "body", "author",
    "updated_at"}``
``GET /{slug}/users``: ``{"id", "email", "name", "updated_at"}``
    A parent that does not exist (or not under that project) is a 404 after the quota and
    faults, as a vendor checks it; an archived project's issues are still served. Deleting a
    record deletes what is under it. A change to a child does not touch its parent.

An OAuth2 identity provider (rotating refresh tokens, reuse revoking the authorisation) and a
session login, with the APIs their tokens open: see :mod:`.identity_http`. Signed webhooks
when a subscribed tenant's records change, and their admin routes: see :mod:`.webhooks_http`.

Admin API (test control; not counted, not rate-limited, never faulty; ids are tenant ids):

- ``POST /_admin/tenants`` ``{"slug"?, "items"?}`` → 201 tenant; ``DELETE /_admin/tenants/{id}``
- ``GET|POST /_admin/tenants/{id}/faults``: read, or replace with the given fields
  (:class:`~.records.Faults`; ``"heal_after": seconds`` lifts them that long from now)
- ``GET|POST /_admin/tenants/{id}/{collection}``: every record, or create one (201); a
  collection is ``items``, ``projects``, ``issues``, ``comments`` or ``users``. An issue names
  its project in ``"project"``, a comment its issue in ``"issue"`` (given to create one, and
  shown in the listing); unspecified fields are generated
- ``PUT|PATCH|DELETE /_admin/tenants/{id}/{collection}/{item_id}``: merge-update, or delete
  (204) with everything under it
- ``GET /_admin/tenants/{id}/served?collection=items``: ``[{"id", "version"}]`` (plus the parent
  field in a child collection), every version (``etag``) served intact in a page, once each,
  first-served order; the ground truth of the fault suite
- ``GET /_admin/tenants/{id}/poisoned?collection=items``: ``[{"id", "version", "kind"}]``, the
  versions served poisoned (``poison_rate`` or ``drop_id``): no event, one dead letter each
- ``GET /_admin/tenants/{id}/log``: ``[{"path", "query", "status"}]``, every API request
- ``GET /_admin/stats``: ``{"total": n, "tenants": {id: n}}`` request counts
- ``GET /_admin/first-requests``: ``{"tenants": n, "requested": n, "earliest": t, "latest": t}``,
  how many tenants had an API request yet and the first and last of their first ones (Unix
  time; ``null`` before any): when every tenant was polled once
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from . import identity_http, quotas, shapes, webhooks_http, windows
from .paging import BadRequest, Page, lower_bound, parse_limit
from .records import COLLECTIONS, Conflict, Item, NotFound
from .vendor import VendorSimulator

SIMULATOR = web.AppKey("simulator", VendorSimulator)
_ADMIN = "/_admin/"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_app(sim: VendorSimulator) -> web.Application:
    """An aiohttp application serving ``sim``; the model stays the single source of truth."""
    app = web.Application(middlewares=[_account, _errors])
    app[SIMULATOR] = sim
    routes = app.router
    routes.add_post("/_admin/tenants", _add_tenant)
    routes.add_delete("/_admin/tenants/{tenant_id}", _remove_tenant)
    routes.add_get("/_admin/tenants/{tenant_id}/faults", _get_faults)
    routes.add_post("/_admin/tenants/{tenant_id}/faults", _set_faults)
    records = f"/_admin/tenants/{{tenant_id}}/{{collection:{'|'.join(COLLECTIONS)}}}"
    routes.add_get(records, _all_items)
    routes.add_post(records, _create_item)
    routes.add_put(records + "/{item_id}", _update_item)
    routes.add_patch(records + "/{item_id}", _update_item)
    routes.add_delete(records + "/{item_id}", _delete_item)
    routes.add_get("/_admin/tenants/{tenant_id}/served", _served)
    routes.add_get("/_admin/tenants/{tenant_id}/poisoned", _poisoned)
    routes.add_get("/_admin/tenants/{tenant_id}/log", _log)
    routes.add_get("/_admin/stats", _stats)
    routes.add_get("/_admin/first-requests", _first_requests)
    routes.add_get("/tenants", _list_tenants)
    routes.add_get("/{slug}/items", _lister("items"))
    routes.add_get("/{slug}/projects", _lister("projects"))
    routes.add_get("/{slug}/users", _lister("users"))
    routes.add_get("/{slug}/projects/{project}/issues", _lister("issues", "project"))
    comments = "/{slug}/projects/{project}/issues/{issue}/comments"
    routes.add_get(comments, _lister("comments", "project", "issue"))
    shapes.add_routes(routes, _list_shaped, Listing, _authorised)
    quotas.add_routes(routes, _list_shaped, Listing, _authorised)
    windows.add_routes(routes, _list_shaped, Listing)
    identity_http.add_routes(routes, sim, _list_authenticated)
    webhooks_http.install(app, sim)
    return app


@asynccontextmanager
async def running_simulator(
    sim: VendorSimulator, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[str]:
    """Serve ``sim`` (on a free port by default) and yield its base URL, e.g. for tests."""
    runner = web.AppRunner(build_app(sim), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_port = runner.addresses[0][1]
        url_host = "127.0.0.1" if host in ("", "0.0.0.0") else host
        yield f"http://{url_host}:{bound_port}"
    finally:
        await runner.cleanup()


# -- middlewares ----------------------------------------------------------------------------


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn model errors into JSON answers; bad input is only expected on the admin API."""
    try:
        return await handler(request)
    except NotFound as exc:
        return _error(404, str(exc))
    except Conflict as exc:
        return _error(409, str(exc))
    except ValueError as exc:
        if not request.path.startswith(_ADMIN):
            raise
        return _error(400, str(exc))


@web.middleware
async def _account(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count and log every vendor API request with the status it got (admin calls excluded)."""
    if request.path.startswith(_ADMIN):
        return await handler(request)
    sim = request.app[SIMULATOR]
    slug = request.match_info.get("slug")
    tenant = sim.tenant_by_slug(slug) if slug is not None else None
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        tenant_id = tenant.id if tenant is not None else None
        sim.record(tenant_id, request.path, dict(request.query), status)


# -- vendor API -----------------------------------------------------------------------------


async def _list_tenants(request: web.Request) -> web.Response:
    sim = request.app[SIMULATOR]
    return web.json_response({"tenants": [tenant.to_json() for tenant in sim.tenants]})


def _lister(name: str, *ancestors: str) -> Handler:
    """The handler of collection ``name``'s listing; ``ancestors`` name the path parameters
    holding its parents' ids, outermost first (``project``, ``issue``)."""

    async def handler(request: web.Request) -> web.Response:
        parents = tuple(request.match_info[ancestor] for ancestor in ancestors)
        return await _list(request, name, parents)

    return handler


async def _list_shaped(
    request: web.Request, listing: Listing, where: Callable[[Item], bool] | None = None
) -> web.Response:
    """An ``items`` listing as another API shapes it (:mod:`.shapes`)."""
    return await _list(request, "items", (), listing, where)


async def _list_authenticated(request: web.Request, name: str) -> web.Response:
    """A listing of ``name`` whose caller the route authenticated itself (with the identity
    provider's tokens, :mod:`.identity_http`), not with the tenant's static token."""
    return await _list(request, name, (), authenticated=True)


async def _list(
    request: web.Request,
    name: str,
    parents: tuple[str, ...],
    listing: Listing | None = None,
    where: Callable[[Item], bool] | None = None,
    *,
    authenticated: bool = False,
) -> web.Response:
    """Authenticate, rate-limit, inject faults, then serve one page of ``name``.

    A ``delay`` fault is the tenant's answer time: the answer leaves that long after the
    request came, the simulator's own work on it included, as a vendor's answer time includes
    its own. (Sleeping first and working after made a 20 ms vendor answer in about 23 ms, and
    measured the simulator's page selection as if it were the client's.)"""
    loop = asyncio.get_running_loop()
    arrived = loop.time()
    response, delay = _answer_listing(request, name, parents, listing, where, authenticated)
    if delay:
        await asyncio.sleep(max(0.0, arrived + delay - loop.time()))
    return response


@dataclass(frozen=True)
class Listing:
    """What one listing request asks for, however the API spells it: the page's start (a
    cursor, an ``updated_since``) and size, and how its answer is written (``shape``: the
    page, its items as served, the request -> the JSON body)."""

    cursor: str | None = None
    updated_since: str | None = None
    limit: str | None = None
    shape: Callable[[Page[Item], list[Any], web.Request], dict[str, Any]] | None = None


def _authorised(request: web.Request) -> bool:
    """Whether the request names a tenant and carries its token (for the answers that are no
    listing: one object, a refusal)."""
    sim = request.app[SIMULATOR]
    tenant = sim.tenant_by_slug(request.match_info["slug"])
    return tenant is not None and sim.check_token(tenant.id, request.headers.get("Authorization"))


def _from_query(request: web.Request) -> Listing:
    query = request.query
    return Listing(query.get("cursor"), query.get("updated_since"), query.get("limit"))


def _answer_listing(
    request: web.Request,
    name: str,
    parents: tuple[str, ...],
    listing: Listing | None = None,
    where: Callable[[Item], bool] | None = None,
    authenticated: bool = False,
) -> tuple[web.Response, float]:
    """The answer, and how long after the request it leaves (refusals leave at once)."""
    sim = request.app[SIMULATOR]
    tenant = sim.tenant_by_slug(request.match_info["slug"])
    if tenant is None:
        return _error(404, f"no tenant {request.match_info['slug']!r}"), 0.0
    if not authenticated and not sim.check_token(tenant.id, request.headers.get("Authorization")):
        return _error(
            401, "missing or wrong bearer token", sim.rate_status(tenant.id).headers()
        ), 0.0
    admission = sim.admit(tenant.id)
    headers = admission.headers()
    if not admission.allowed:
        return _error(429, "rate limit exceeded", headers), 0.0
    delay = sim.faults(tenant.id).delay
    if sim.take_failure(tenant.id):
        faults = sim.faults(tenant.id)
        if faults.fail_status == 429:
            headers = headers | {"Retry-After": str(faults.retry_after)}
        if faults.echo_request:
            return _echo(request, faults.fail_status, headers), delay
        return _error(faults.fail_status, "injected failure", headers), delay
    listing = listing or _from_query(request)
    try:
        after = lower_bound(listing.cursor, listing.updated_since)
        limit = parse_limit(listing.limit)
    except BadRequest as exc:
        return _error(400, str(exc), headers), delay
    try:
        page = sim.page(tenant.id, after, limit, name, parents, where)
    except NotFound as exc:  # a parent that is not (or no longer) there
        return _error(404, str(exc), headers), delay
    scope = (name, parents)
    return _page_response(request, tenant.id, page, headers, scope, listing.shape), delay


def _page_response(
    request: web.Request,
    tenant_id: str,
    page: Page[Item],
    headers: dict[str, str],
    scope: tuple[str, tuple[str, ...]] = ("items", ()),
    shape: Callable[[Page[Item], list[Any], web.Request], dict[str, Any]] | None = None,
) -> web.Response:
    """Serialise a page of the collection ``scope`` names (and its parents' ids), honouring
    ``If-None-Match`` and the body-mangling faults; note the versions it hands out intact (a
    304 hands out the same versions again). ``shape`` writes the body (default: ``data``,
    ``next``, ``resume``)."""
    sim = request.app[SIMULATOR]
    name, parents = scope
    rendered = [sim.render(tenant_id, item, name) for item in page.items]
    bodies = [body for body, _ in rendered]
    if shape is None:
        payload = {"data": bodies, "next": page.next, "resume": page.resume}
    else:
        payload = shape(page, bodies, request)
    body = json.dumps(payload, separators=(",", ":")).encode()
    if sim.faults(tenant_id).malformed_json:
        # Half of a JSON object never parses: its braces cannot balance.
        return _json_body(body[: len(body) // 2], headers)
    kinds = (kind for _, kind in rendered)
    parent = parents[-1] if parents else None
    sim.record_served(tenant_id, zip(page.items, kinds, strict=True), name, parent)
    etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
    headers = headers | {"ETag": etag}
    if _etag_matches(request.headers.get("If-None-Match"), etag):
        return web.Response(status=304, headers=headers)
    return _json_body(body, headers)


def _etag_matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 weak comparison: ``*`` or any listed tag, with or without ``W/``."""
    if if_none_match is None:
        return False
    tags = (tag.strip().removeprefix("W/") for tag in if_none_match.split(","))
    return any(tag in ("*", etag) for tag in tags)


# -- admin API ------------------------------------------------------------------------------


async def _add_tenant(request: web.Request) -> web.Response:
    body = await _json_object(request, allowed={"slug", "items"})
    items = body.get("items")
    if items is not None and (type(items) is not int or items < 0):
        raise ValueError("items must be an integer >= 0")
    tenant = request.app[SIMULATOR].add_tenant(slug=body.get("slug"), items=items)
    return web.json_response(tenant.to_json(), status=201)


async def _remove_tenant(request: web.Request) -> web.Response:
    request.app[SIMULATOR].remove_tenant(request.match_info["tenant_id"])
    return web.Response(status=204)


async def _get_faults(request: web.Request) -> web.Response:
    faults = request.app[SIMULATOR].faults(request.match_info["tenant_id"])
    return web.json_response(faults.to_json())


async def _set_faults(request: web.Request) -> web.Response:
    body = await _json_object(request)
    faults = request.app[SIMULATOR].set_faults(request.match_info["tenant_id"], **body)
    return web.json_response(faults.to_json())


async def _all_items(request: web.Request) -> web.Response:
    tenant_id, name = request.match_info["tenant_id"], request.match_info["collection"]
    return web.json_response({"data": request.app[SIMULATOR].records(tenant_id, name)})


async def _create_item(request: web.Request) -> web.Response:
    body = await _json_object(request)
    tenant_id, name = request.match_info["tenant_id"], request.match_info["collection"]
    item = request.app[SIMULATOR].create_record(tenant_id, name, **body)
    return web.json_response(item, status=201)


async def _update_item(request: web.Request) -> web.Response:
    body = await _json_object(request)
    tenant_id, name = request.match_info["tenant_id"], request.match_info["collection"]
    item = request.app[SIMULATOR].update_record(
        tenant_id, name, request.match_info["item_id"], **body
    )
    return web.json_response(item)


async def _delete_item(request: web.Request) -> web.Response:
    tenant_id, name = request.match_info["tenant_id"], request.match_info["collection"]
    request.app[SIMULATOR].delete_record(tenant_id, name, request.match_info["item_id"])
    return web.Response(status=204)


async def _served(request: web.Request) -> web.Response:
    tenant_id, name = request.match_info["tenant_id"], request.query.get("collection", "items")
    return web.json_response(request.app[SIMULATOR].served(tenant_id, name))


async def _poisoned(request: web.Request) -> web.Response:
    tenant_id, name = request.match_info["tenant_id"], request.query.get("collection", "items")
    return web.json_response(request.app[SIMULATOR].poisoned(tenant_id, name))


async def _log(request: web.Request) -> web.Response:
    entries = request.app[SIMULATOR].log(request.match_info["tenant_id"])
    return web.json_response([entry._asdict() for entry in entries])


async def _stats(request: web.Request) -> web.Response:
    sim = request.app[SIMULATOR]
    counts = {tenant.id: sim.request_count(tenant.id) for tenant in sim.tenants}
    return web.json_response({"total": sim.request_count(), "tenants": counts})


# -- helpers --------------------------------------------------------------------------------


async def _json_object(request: web.Request, allowed: set[str] | None = None) -> dict[str, Any]:
    """The request body as a JSON object (empty body: ``{}``); anything else is a 400."""
    text = await request.text()
    try:
        body = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object")
    unknown = set(body) - allowed if allowed is not None else set()
    if unknown:
        raise ValueError(f"unknown field(s): {', '.join(sorted(unknown))}")
    return body


def _json_body(body: bytes, headers: dict[str, str]) -> web.Response:
    return web.Response(body=body, content_type="application/json", headers=headers)


def _echo(request: web.Request, status: int, headers: dict[str, str]) -> web.Response:
    """An injected failure whose body quotes the request, secrets and all."""
    quoted = {
        "path": request.path_qs,
        "authorization": request.headers.get("Authorization"),
        "headers": dict(request.headers),
    }
    body = {"error": f"injected failure for {request.url}", "request": quoted}
    return web.json_response(body, status=status, headers=headers)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


async def _first_requests(request: web.Request) -> web.Response:
    tenants, times = request.app[SIMULATOR].first_requests()
    earliest, latest = (times[0], times[-1]) if times else (None, None)
    body = {"tenants": tenants, "requested": len(times), "earliest": earliest, "latest": latest}
    return web.json_response(body)
