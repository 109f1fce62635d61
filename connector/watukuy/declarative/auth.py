"""``auth``: how a declarative request authenticates. Exactly one of::

    bearer: "{partition.data.token}"                     Authorization: Bearer <token>
    basic: {username: "...", password: "..."}            HTTP basic
    api_key: {header: X-Api-Key, value: "..."}           a header ...
    api_key: {query: api_key, value: "..."}              ... or a query parameter
    oauth2: {token_url, client_id, client_secret, scope, client_auth: basic | body}

Every value is a template (see :mod:`watukuy.declarative.templates`), so each tenant may have
its own credentials.

OAuth2 is the client-credentials grant (RFC 6749 section 4.4): a form POST of
``grant_type=client_credentials`` (and ``scope``) to ``token_url``, the client authenticating
with HTTP basic (default) or with ``client_id``/``client_secret`` in the form
(``client_auth: body``). The token is cached in memory per rendered (token URL, client id,
scope, secret) until ``expires_in`` minus a small margin, shared by the partitions that render
the same values, and fetched again when the API answers 401 (the request is then retried
once). A token endpoint failure fails the poll with a message naming "oauth2 token request"
and the status, never the URL, the client secret or the answer.

Hand-written rather than through authlib: the token request must go through the poll's
``ctx.http`` (its budget, clock and transport), which authlib's clients cannot.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.validation import non_empty_string
from watukuy.declarative.auth_common import (
    ALL_STATUSES,
    Auth,
    Compile,
    Credentials,
    Send,
    TokenCache,
    basic_header,
    json_or_none,
    rendered,
)
from watukuy.declarative.errors import RenderError
from watukuy.declarative.oauth_refresh import parse_refresh_grant
from watukuy.declarative.session import parse_session
from watukuy.declarative.templates import Scope, Template
from watukuy.declarative.token_requests import (
    ask,
    bearer_answer,
    expires_in,
    token_form,
    unanswered,
)
from watukuy.declarative.values import choice, parse_kind, section
from watukuy.engine.credentials import Vault
from watukuy.http import KeyHttp, Response

__all__ = [
    "ALL_STATUSES",
    "AUTH_KINDS",
    "Auth",
    "Credentials",
    "Send",
    "TokenCache",
    "basic_header",
    "client_auth",
    "json_or_none",
    "parse_auth",
    "rendered",
]


class _Static:
    """Credentials that do not change between requests: sent once, never renewed."""

    @property
    def secret_query(self) -> str | None:
        return None

    async def credentials(self, scope: Scope, http: KeyHttp) -> Credentials:
        raise NotImplementedError

    async def send(
        self, scope: Scope, http: KeyHttp, send: Send, vault: Vault | None = None
    ) -> Response:
        return await send(await self.credentials(scope, http))


@dataclass(frozen=True)
class Bearer(_Static):
    token: Template

    @property
    def templates(self) -> tuple[Template, ...]:
        return (self.token,)

    async def credentials(self, scope: Scope, http: KeyHttp) -> Credentials:
        return Credentials(headers={"Authorization": f"Bearer {rendered(self.token, scope)}"})


@dataclass(frozen=True)
class Basic(_Static):
    username: Template
    password: Template

    @property
    def templates(self) -> tuple[Template, ...]:
        return (self.username, self.password)

    async def credentials(self, scope: Scope, http: KeyHttp) -> Credentials:
        user = rendered(self.username, scope)
        if ":" in user:
            raise RenderError(f"{self.username.where}: a user name must not contain ':'")
        password = self.password.render(scope) or ""
        return Credentials(headers={"Authorization": basic_header(user, password)})


@dataclass(frozen=True)
class ApiKey(_Static):
    value: Template
    header: str | None = None
    query: str | None = None

    @property
    def secret_query(self) -> str | None:
        return self.query

    @property
    def templates(self) -> tuple[Template, ...]:
        return (self.value,)

    async def credentials(self, scope: Scope, http: KeyHttp) -> Credentials:
        key = rendered(self.value, scope)
        if self.header is not None:
            return Credentials(headers={self.header: key})
        return Credentials(query={str(self.query): key})


@dataclass(frozen=True, slots=True)
class OAuth2:
    token_url: Template
    client_id: Template
    client_secret: Template
    scope: Template | None
    client_auth: str
    cache: TokenCache
    secret_query: str | None = None

    @property
    def templates(self) -> tuple[Template, ...]:
        optional = () if self.scope is None else (self.scope,)
        return (self.token_url, self.client_id, self.client_secret, *optional)

    async def send(
        self, scope: Scope, http: KeyHttp, send: Send, vault: Vault | None = None
    ) -> Response:
        """With the cached token; after a 401, with a new one, once."""
        credentials = await self.credentials(scope, http)
        response = await send(credentials)
        if response.status == 401:
            credentials = await self.credentials(scope, http, stale=credentials.token)
            response = await send(credentials)
        return response

    async def credentials(
        self, scope: Scope, http: KeyHttp, *, stale: str | None = None
    ) -> Credentials:
        url = rendered(self.token_url, scope)
        client_id = rendered(self.client_id, scope)
        secret = rendered(self.client_secret, scope)
        wanted = None if self.scope is None else self.scope.render(scope) or None
        digest = hashlib.sha256(secret.encode()).hexdigest()
        key = (url, client_id, wanted or "", digest)

        async def fetch() -> tuple[str, float | None]:
            return await self._request(http, url, client_id, secret, wanted)

        token = await self.cache.token(key, fetch, http.now, stale=stale)
        return Credentials(headers={"Authorization": f"Bearer {token}"}, token=token)

    async def _request(
        self, http: KeyHttp, url: str, client_id: str, secret: str, wanted: str | None
    ) -> tuple[str, float | None]:
        form = {"grant_type": "client_credentials"}
        if wanted:
            form["scope"] = wanted
        data, headers = token_form(form, client_id, secret, self.client_auth)
        what = "oauth2 token request"
        shown = self.token_url.shown
        status, body = await ask(
            http, "POST", url, what=what, shown=shown, headers=headers, data=data
        )
        unanswered(status, body, what)
        token, answer = bearer_answer(status, body, what)
        return token, expires_in(answer.get("expires_in"))


@dataclass(frozen=True, slots=True)
class _Context:
    compile_value: Compile
    tokens: TokenCache | None
    connector: str | None
    """The connector whose tenants' grants these are; ``None`` for a tenants listing."""


def _parse_bearer(given: object, path: str, at: str, context: _Context) -> Auth:
    return Bearer(context.compile_value(given, at))


def _parse_basic(given: object, path: str, at: str, context: _Context) -> Auth:
    values = section(given, path, at)
    return Basic(
        context.compile_value(values["username"], f"{at}.username"),
        context.compile_value(values.get("password", ""), f"{at}.password"),
    )


def _parse_api_key(given: object, path: str, at: str, context: _Context) -> Auth:
    values = section(given, path, at)
    places = [name for name in ("header", "query") if name in values]
    if len(places) != 1:
        found = f"; found {' and '.join(places)}" if places else ""
        raise ConfigError(f"set exactly one of: header, query{found}", at)
    place = places[0]
    name = non_empty_string(
        values[place], f"{at}.{place}", "X-Api-Key" if place == "header" else "key"
    )
    value = context.compile_value(values["value"], f"{at}.value")
    if place == "header":
        return ApiKey(value, header=name, query=None)
    return ApiKey(value, header=None, query=name)


def _parse_oauth2(given: object, path: str, at: str, context: _Context) -> Auth:
    values = section(given, path, at)
    grant = choice(
        values.get("grant"), f"{at}.grant", f"{path}.grant", ("client_credentials", "refresh_token")
    )
    if grant == "refresh_token":
        if context.connector is None:
            raise ConfigError(
                "grant: refresh_token is for a connector's requests, not its tenants listing",
                f"{at}.grant",
            )
        return parse_refresh_grant(values, path, at, context.compile_value, context.connector)
    for name in ("refresh_token", "expires", "refresh_early"):
        if name in values:
            raise ConfigError("only with grant: refresh_token", f"{at}.{name}")
    if "client_secret" not in values:
        raise ConfigError("is required for the client_credentials grant", f"{at}.client_secret")
    scope = values.get("scope")
    compile_value = context.compile_value
    return OAuth2(
        token_url=compile_value(values["token_url"], f"{at}.token_url"),
        client_id=compile_value(values["client_id"], f"{at}.client_id"),
        client_secret=compile_value(values["client_secret"], f"{at}.client_secret"),
        scope=None if scope is None else compile_value(scope, f"{at}.scope"),
        client_auth=client_auth(values, path, at),
        cache=TokenCache() if context.tokens is None else context.tokens,
    )


def client_auth(values: Mapping[str, Any], path: str, at: str) -> str:
    return choice(
        values.get("client_auth"), f"{at}.client_auth", f"{path}.client_auth", ("basic", "body")
    )


def _parse_session(given: object, path: str, at: str, context: _Context) -> Auth:
    cache = TokenCache() if context.tokens is None else context.tokens
    return parse_session(given, path, at, context.compile_value, context.connector or "", cache)


AUTH_KINDS: Mapping[str, Callable[[object, str, str, _Context], Auth]] = {
    "bearer": _parse_bearer,
    "basic": _parse_basic,
    "api_key": _parse_api_key,
    "oauth2": _parse_oauth2,
    "session": _parse_session,
}
"""Every auth kind, by its key under ``auth``: one entry per kind."""


def parse_auth(
    raw: object,
    path: str,
    where: str,
    compile_value: Compile,
    tokens: TokenCache | None = None,
    connector: str | None = None,
) -> Auth:
    """The ``auth`` section at ``path`` in the key table (``request.auth`` or
    ``partitions.http.auth``), reported at ``where``. ``tokens``: an OAuth2 token cache shared
    with other pollers (the streams of one connector); without it, one of its own.
    ``connector``: whose tenants' grants a ``refresh_token`` grant keeps (``None``: a tenants
    listing, which has none)."""
    context = _Context(compile_value, tokens, connector)

    def bound(parse: Callable[[object, str, str, _Context], Auth]) -> Callable[..., Auth]:
        return lambda given, sub, at: parse(given, sub, at, context)

    return parse_kind(raw, path, where, {name: bound(p) for name, p in AUTH_KINDS.items()})
