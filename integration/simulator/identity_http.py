"""The identity provider (:mod:`.identity`) over HTTP, and the APIs its tokens open.

``GET /oauth/tenants``
    The app's own tenant list, as a tenants source reads it: ``{"tenants": [{"id", "slug",
    "refresh_token", "username", "password"}]}``. ``refresh_token`` is the FIRST grant of the
    tenant's current authorisation, still handed out once rotated away and spent (the
    partition data is never updated by a refresh); ``username`` is the slug.
``POST /oauth/token`` (form: ``grant_type=refresh_token&refresh_token=...``)
    The client authenticates with HTTP Basic (RFC 6749 section 2.3.1) or ``client_id`` and
    ``client_secret`` in the form. 200: ``{"access_token", "token_type": "Bearer",
    "expires_in", "refresh_token"}`` (section 5.1; no ``refresh_token`` when ``rotate`` is
    off), ``Cache-Control: no-store``. Errors (section 5.2): a wrong client 401
    ``invalid_client`` with ``WWW-Authenticate: Basic``; a grant type other than
    refresh_token 400 ``unsupported_grant_type``; no refresh token 400 ``invalid_request``;
    an unknown, revoked or reused one 400 ``invalid_grant`` (a reuse revokes the tenant's
    authorisation, RFC 9700 section 4.14). The answer leaves ``delay`` after the work.
``GET /oauth-api/{slug}/contacts`` and ``/oauth-api/{slug}/deals`` with ``Authorization:
Bearer <access token>``
    The tenant's ``users`` and ``items`` as ``/{slug}/items`` lists them (``{"data", "next",
    "resume"}``, ``cursor``/``limit``/``updated_since``, quota, faults, ETags, ground truth
    under ``served?collection=users|items``). No token: 401 ``WWW-Authenticate: Bearer
    realm="simulator"``; an unknown, other tenant's, expired or revoked one: 401 with
    ``error="invalid_token"`` (RFC 6750 section 3.1).
``POST /session/login`` ``{"username", "password"}``
    ``{"token", "expires_in"}``, or 401 ``{"error": "invalid credentials"}``.
``GET /session-api/{slug}/contacts`` and ``/session-api/{slug}/deals`` with ``X-Session:
<token>``
    As above; a missing, unknown or expired session is a 401 ``{"error": ...}``.

Admin API (ids are tenant ids; not counted):

- ``GET /_admin/identity``: ``{"client_id", "settings", "calls": [{"tenant", "family",
  "generation", "result", "at"}], "reuses": [{"tenant", "family", "generation", "at"}],
  "logins": [{"tenant", "result", "at"}], "tenants": {id: {"family", "generation", "revoked",
  "settings"}}}``
- ``POST /_admin/identity`` ``{"expires_in"?, "delay"?, "rotate"?, "session_expires_in"?,
  "client_id"?, "client_secret"?}``: every tenant's settings, and the client
- ``POST /_admin/identity/{tenant_id}``: the same settings (no client) for one tenant
- ``POST /_admin/identity/{tenant_id}/authorize``: ``{"refresh_token", "family"}``, a new
  first grant (the previous authorisation revoked); ``POST .../revoke``: 204
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

from aiohttp import web

from .identity import Granted

if TYPE_CHECKING:
    from .vendor import VendorSimulator

__all__ = ["STREAMS", "add_routes"]

STREAMS = {"contacts": "users", "deals": "items"}
"""The protected APIs' streams and the collections they list."""

Answer = Callable[[web.Request, str], Awaitable[web.Response]]
"""The app's listing of a collection for a request it has authenticated itself."""

_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}  # RFC 6749 section 5.1
_REALM = 'Bearer realm="simulator"'


def add_routes(routes: web.UrlDispatcher, sim: VendorSimulator, answer: Answer) -> None:
    http = _IdentityHttp(sim, answer)
    routes.add_get("/oauth/tenants", http.tenants)
    routes.add_post("/oauth/token", http.token)
    routes.add_post("/session/login", http.login)
    for stream, collection in STREAMS.items():
        routes.add_get(f"/oauth-api/{{slug}}/{stream}", http.bearer(collection))
        routes.add_get(f"/session-api/{{slug}}/{stream}", http.session(collection))
    routes.add_get("/_admin/identity", http.show)
    routes.add_post("/_admin/identity", http.configure)
    routes.add_post("/_admin/identity/{tenant_id}", http.configure)
    routes.add_post("/_admin/identity/{tenant_id}/authorize", http.authorize)
    routes.add_post("/_admin/identity/{tenant_id}/revoke", http.revoke)


def _oauth_error(status: int, error: str, description: str, **headers: str) -> web.Response:
    body = {"error": error, "error_description": description}
    return web.json_response(body, status=status, headers=_NO_STORE | headers)


def _client(request: web.Request, form: dict[str, str]) -> tuple[str | None, str | None]:
    """The client's id and secret from HTTP Basic (each form-urlencoded, RFC 6749 section
    2.3.1) or else from the form."""
    header = request.headers.get("Authorization", "")
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return form.get("client_id"), form.get("client_secret")
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    client_id, sep, secret = decoded.partition(":")
    return (unquote_plus(client_id), unquote_plus(secret)) if sep else (None, None)


def _bearer_token(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class _IdentityHttp:
    def __init__(self, sim: VendorSimulator, answer: Answer) -> None:
        self._sim = sim
        self._idp = sim.identity
        self._answer = answer

    async def tenants(self, request: web.Request) -> web.Response:
        listed = [
            {
                "id": tenant.id,
                "slug": tenant.slug,
                "refresh_token": self._idp.first_grant(tenant.id),
                "username": tenant.slug,
                "password": self._idp.sessions.password(tenant.id),
            }
            for tenant in self._sim.tenants
        ]
        return web.json_response({"tenants": listed})

    async def token(self, request: web.Request) -> web.Response:
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        form = {key: str(value) for key, value in (await request.post()).items()}
        response = self._token_answer(request, form)
        tenant = self._idp.calls[-1].tenant if self._idp.calls else None
        delay = self._idp.settings(tenant).delay
        if delay:  # the rotation is already committed: an answer lost now spends the grant
            await asyncio.sleep(max(0.0, arrived + delay - loop.time()))
        return response

    def _token_answer(self, request: web.Request, form: dict[str, str]) -> web.Response:
        if not self._idp.client_ok(*_client(request, form)):
            self._idp.record_call("invalid_client")
            basic = {"WWW-Authenticate": 'Basic realm="simulator"'}
            return _oauth_error(401, "invalid_client", "client authentication failed", **basic)
        if form.get("grant_type") != "refresh_token":
            self._idp.record_call("unsupported_grant_type")
            return _oauth_error(400, "unsupported_grant_type", "only refresh_token is served")
        token = form.get("refresh_token")
        if not token:
            self._idp.record_call("invalid_request")
            return _oauth_error(400, "invalid_request", "refresh_token is required")
        outcome = self._idp.refresh(token)
        if isinstance(outcome, Granted):
            return web.json_response(outcome.body, headers=_NO_STORE)
        return _oauth_error(400, outcome.error, outcome.description)

    async def login(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.text())
        except json.JSONDecodeError:
            return web.json_response({"error": "body is not JSON"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "body must be a JSON object"}, status=400)
        username = body.get("username")
        tenant = self._sim.tenant_by_slug(username) if isinstance(username, str) else None
        session = self._idp.sessions.login(
            None if tenant is None else tenant.id, body.get("password")
        )
        if session is None:
            return web.json_response({"error": "invalid credentials"}, status=401)
        token, expires_in = session
        return web.json_response({"token": token, "expires_in": expires_in}, headers=_NO_STORE)

    def bearer(self, collection: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            tenant = self._sim.tenant_by_slug(request.match_info["slug"])
            if tenant is None:
                return web.json_response({"error": "no such tenant"}, status=404)
            token = _bearer_token(request)
            why = self._idp.check_access(tenant.id, token)
            if why is not None:
                challenge = _REALM
                if token is not None:  # RFC 6750 3.1: no error code when no credentials
                    challenge += f', error="invalid_token", error_description="{why}"'
                headers = {"WWW-Authenticate": challenge}
                return web.json_response({"error": why}, status=401, headers=headers)
            return await self._answer(request, collection)

        return handler

    def session(self, collection: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            tenant = self._sim.tenant_by_slug(request.match_info["slug"])
            if tenant is None:
                return web.json_response({"error": "no such tenant"}, status=404)
            if not self._idp.sessions.check(tenant.id, request.headers.get("X-Session")):
                error = {"error": "session expired or unknown: log in again"}
                return web.json_response(error, status=401)
            return await self._answer(request, collection)

        return handler

    async def show(self, request: web.Request) -> web.Response:
        return web.json_response(self._idp.shown())

    async def configure(self, request: web.Request) -> web.Response:
        body = await _object(request)
        tenant_id = request.match_info.get("tenant_id")
        if tenant_id is None:
            self._client_change(body)
        else:
            self._sim.tenant(tenant_id)  # NotFound: 404
        settings = self._idp.configure(tenant_id, **body)
        return web.json_response(asdict(settings))

    def _client_change(self, body: dict[str, Any]) -> None:
        for name in ("client_id", "client_secret"):
            if name in body:
                value = body.pop(name)
                if not isinstance(value, str) or not value:
                    raise ValueError(f"{name} must be a non-empty string")
                setattr(self._idp, name, value)

    async def authorize(self, request: web.Request) -> web.Response:
        tenant = self._sim.tenant(request.match_info["tenant_id"]).id
        token = self._idp.authorize(tenant)
        family = self._idp.tenant_state(tenant)["family"]
        return web.json_response({"refresh_token": token, "family": family}, status=201)

    async def revoke(self, request: web.Request) -> web.Response:
        self._idp.revoke(self._sim.tenant(request.match_info["tenant_id"]).id)
        return web.Response(status=204)


async def _object(request: web.Request) -> dict[str, Any]:
    text = await request.text()
    try:
        body = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object")
    return body
