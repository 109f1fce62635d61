"""``auth.session``: log in, then send the token the login answered (for APIs with session
logins rather than OAuth2, e.g. a ``POST /login`` that answers a session token).

    session:
      login: {url: "https://{partition.data.host}/login", method: POST,
              body: {username: "{partition.data.user}", password: "{partition.data.password}"}}
      token: {path: token}
      header: {X-Session: "{session.token}"}     # default Authorization: Bearer {session.token}
      expires: 1h

One session per tenant of the connector, shared by its streams (the connector's token cache,
keyed by the rendered login, so a tenant's new password logs in anew). It is renewed when it
expires, and once after a 401 (the request is then sent again once). A failed login fails the
poll naming "session login" and the status, never the URL, the body or the answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.paths import Path, parse_path
from watukuy.declarative.auth_common import (
    Compile,
    Credentials,
    Send,
    TokenCache,
    rendered,
)
from watukuy.declarative.errors import OAuthError
from watukuy.declarative.templates import Scope, Template
from watukuy.declarative.token_requests import ask, unanswered
from watukuy.declarative.values import choice, duration, section
from watukuy.engine.credentials import Vault
from watukuy.http import KeyHttp, Response

__all__ = ["Session", "parse_session"]

PLACEHOLDER = "{session.token}"


@dataclass(frozen=True, slots=True)
class Session:
    connector: str
    url: Template
    method: str
    body: Mapping[str, Template]
    headers: Mapping[str, Template]
    token: Path
    sends: Mapping[str, str]
    """The headers that carry the token, each with ``{session.token}`` in it."""
    lifetime: float
    cache: TokenCache
    secret_query: str | None = None

    @property
    def templates(self) -> tuple[Template, ...]:
        return (self.url, *self.body.values(), *self.headers.values())

    async def send(
        self, scope: Scope, http: KeyHttp, send: Send, vault: Vault | None = None
    ) -> Response:
        token = await self._token(scope, http)
        response = await send(self._credentials(token))
        if response.status == 401:
            token = await self._token(scope, http, stale=token)
            response = await send(self._credentials(token))
        return response

    def _credentials(self, token: str) -> Credentials:
        headers = {name: value.replace(PLACEHOLDER, token) for name, value in self.sends.items()}
        return Credentials(headers=headers, token=token)

    async def _token(self, scope: Scope, http: KeyHttp, *, stale: str | None = None) -> str:
        url = rendered(self.url, scope)
        body = {name: template.render(scope) for name, template in self.body.items()}
        headers = {name: rendered(template, scope) for name, template in self.headers.items()}
        login = json.dumps([url, body, headers], sort_keys=True).encode()
        key = ("session", self.connector, hashlib.sha256(login).hexdigest())

        async def fetch() -> tuple[str, float | None]:
            return await self._login(http, url, body, headers), self.lifetime

        return await self.cache.token(key, fetch, http.now, stale=stale)

    async def _login(
        self, http: KeyHttp, url: str, body: dict[str, Any], headers: dict[str, str]
    ) -> str:
        what = "session login"
        status, answer = await ask(
            http, self.method, url, what=what, shown=self.url.shown, headers=headers,
            json=body or None,
        )  # fmt: skip
        unanswered(status, answer, what, " (check the credentials)")
        try:
            token = self.token.get(answer)
        except LookupError:
            token = None
        if not isinstance(token, str) or not token:
            raise OAuthError(f"session login -> {status}: no token at {self.token.text!r}")
        return token


def parse_session(
    given: object, path: str, at: str, compile_value: Compile, connector: str, cache: TokenCache
) -> Session:
    values = section(given, path, at)
    login = section(values["login"], f"{path}.login", f"{at}.login")
    token = section(values["token"], f"{path}.token", f"{at}.token")
    return Session(
        connector=connector,
        url=compile_value(login["url"], f"{at}.login.url"),
        method=choice(
            login.get("method"),
            f"{at}.login.method",
            f"{path}.login.method",
            ("POST", "GET", "PUT"),
        ),
        body=_templates(login.get("body"), f"{at}.login.body", compile_value),
        headers=_templates(login.get("headers"), f"{at}.login.headers", compile_value),
        token=parse_path(token["path"], f"{at}.token.path"),
        sends=_sends(values.get("header"), f"{at}.header"),
        lifetime=duration(values.get("expires", "1h"), f"{at}.expires"),
        cache=cache,
    )


def _templates(raw: object, at: str, compile_value: Compile) -> dict[str, Template]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a mapping of names to values", at)
    return {str(name): compile_value(value, f"{at}.{name}") for name, value in raw.items()}


def _sends(raw: object, at: str) -> dict[str, str]:
    if raw is None:
        return {"Authorization": f"Bearer {PLACEHOLDER}"}
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError("must map header names to values with {session.token} in them", at)
    out: dict[str, str] = {}
    for name, value in raw.items():
        if not isinstance(value, str) or PLACEHOLDER not in value:
            raise ConfigError(f"must contain {PLACEHOLDER}", f"{at}.{name}")
        out[str(name)] = value
    return out
