"""``auth.oauth2.grant: refresh_token``: each tenant's own authorisation (RFC 6749 section 6).

The tenants source hands in the grant the tenant authorised (``refresh_token``, a template
over partition data). The access token comes from the runner's :class:`~watukuy.engine.
credentials.Vault`, which refreshes it ahead of expiry (``refresh_early``), once across every
stream and runner, and keeps each rotated refresh token in the credential store. This module
is the token request itself and how its answer is read:

- a form POST of ``grant_type=refresh_token`` to ``token_url``, the client authenticating as
  for client credentials (basic, or ``client_id``/``client_secret`` in the form; a public
  client without a secret sends its ``client_id`` in the form);
- 2xx: ``access_token`` (required), ``refresh_token`` (the rotated one, if the provider
  rotates), and the expiry read at ``expires.path`` (default ``expires_in``, seconds; or an
  absolute time with ``expires.format``; 1 hour when the answer has none);
- 400/401: the grant is refused (``invalid_grant`` named when the answer says so): the
  tenant needs authorising again; 429/5xx/unreachable: :class:`OAuthUnavailable`, retried.

A 401 from the API on an access token renews it once and sends the request once more, here
in the auth kind, as an httpx auth flow would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from watukuy.core.children import tenant_of
from watukuy.core.errors import ConfigError
from watukuy.core.grants import GrantRef, Reauthorize, TokenAnswer
from watukuy.core.paths import Path, parse_path
from watukuy.core.timewindows import TimeFormat
from watukuy.declarative.auth_common import (
    Compile,
    Credentials,
    Send,
    rendered,
)
from watukuy.declarative.errors import OAuthError
from watukuy.declarative.templates import Scope, Template
from watukuy.declarative.token_requests import (
    ask,
    bearer_answer,
    expires_in,
    token_form,
    unanswered,
)
from watukuy.declarative.values import choice, duration, section
from watukuy.engine.credentials import RefreshRefused, Vault
from watukuy.http import KeyHttp, Response

__all__ = ["DEFAULT_LIFETIME", "Expiry", "RefreshGrant", "parse_refresh_grant"]

WHAT = "oauth2 refresh request"  # how errors name it

DEFAULT_LIFETIME = 3600.0
"""An access token whose answer says nothing of its expiry is used for an hour (or a 401)."""


@dataclass(frozen=True, slots=True)
class Expiry:
    """Where a token answer says when its access token expires."""

    path: Path
    format: TimeFormat | None = None
    """``None``: a lifetime in seconds from now; else the instant, in this format."""

    def at(self, body: Mapping[str, Any], now: float) -> float:
        try:
            value = self.path.get(body)
        except LookupError:
            return now + DEFAULT_LIFETIME
        if self.format is None:
            seconds = expires_in(value)
            return now + (DEFAULT_LIFETIME if seconds is None else seconds)
        moment = self.format.read(value)
        if moment is None:
            return now + DEFAULT_LIFETIME
        return (moment - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()


@dataclass(frozen=True, slots=True)
class RefreshGrant:
    connector: str
    token_url: Template
    client_id: Template
    client_secret: Template | None
    scope: Template | None
    client_auth: str
    refresh_token: Template
    expires: Expiry
    refresh_early: float
    secret_query: str | None = None

    @property
    def templates(self) -> tuple[Template, ...]:
        optional = tuple(t for t in (self.client_secret, self.scope) if t is not None)
        return (self.token_url, self.client_id, self.refresh_token, *optional)

    async def send(
        self, scope: Scope, http: KeyHttp, send: Send, vault: Vault | None = None
    ) -> Response:
        """With the tenant's access token; after a 401, with a renewed one, once."""
        if vault is None:
            raise OAuthError("oauth2 refresh_token: this engine has no credential store")
        ref = GrantRef(self.connector, tenant_of(scope.partition))
        source = self.refresh_token.render(scope) or None

        async def refresh(token: str) -> TokenAnswer:
            return await self._request(scope, http, token)

        token = await vault.access_token(
            ref, source, refresh, now=http.now, early=self.refresh_early
        )
        response = await send(_bearer(token))
        if response.status == 401:
            token = await vault.access_token(
                ref, source, refresh, now=http.now, early=self.refresh_early, stale=token
            )
            response = await send(_bearer(token))
        return response

    async def _request(self, scope: Scope, http: KeyHttp, refresh_token: str) -> TokenAnswer:
        client_id = rendered(self.client_id, scope)
        secret = None if self.client_secret is None else rendered(self.client_secret, scope)
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        wanted = None if self.scope is None else self.scope.render(scope) or None
        if wanted:
            form["scope"] = wanted
        data, headers = token_form(form, client_id, secret, self.client_auth)
        status, body = await ask(
            http, "POST", rendered(self.token_url, scope), what=WHAT,
            shown=self.token_url.shown, headers=headers, data=data,
        )  # fmt: skip
        return _answer(status, body, self.expires, http.now())


def _answer(status: int, body: Any, expires: Expiry, now: float) -> TokenAnswer:
    if status in (400, 401):  # RFC 6749 5.2: the grant is refused (spent, revoked, expired)
        code = body.get("error") if isinstance(body, Mapping) else None
        reason = Reauthorize.INVALID_GRANT if code == "invalid_grant" else Reauthorize.REFUSED
        raise RefreshRefused(reason, status)
    unanswered(status, body, WHAT)
    access, answer = bearer_answer(status, body, WHAT)
    rotated = answer.get("refresh_token")
    return TokenAnswer(
        access_token=access,
        refresh_token=rotated if isinstance(rotated, str) and rotated else None,
        expires_at=expires.at(answer, now),
    )


def _bearer(token: str) -> Credentials:
    return Credentials(headers={"Authorization": f"Bearer {token}"}, token=token)


def parse_refresh_grant(
    values: Mapping[str, Any], path: str, at: str, compile_value: Compile, connector: str
) -> RefreshGrant:
    """``oauth2`` with ``grant: refresh_token`` (its keys already checked against the table)."""
    if "refresh_token" not in values:
        raise ConfigError(
            "is required with grant: refresh_token (the grant the tenants source hands in, "
            "e.g. '{partition.data.refresh_token}')",
            f"{at}.refresh_token",
        )
    secret = values.get("client_secret")
    scope = values.get("scope")
    early = values.get("refresh_early")
    return RefreshGrant(
        connector=connector,
        token_url=compile_value(values["token_url"], f"{at}.token_url"),
        client_id=compile_value(values["client_id"], f"{at}.client_id"),
        client_secret=None if secret is None else compile_value(secret, f"{at}.client_secret"),
        scope=None if scope is None else compile_value(scope, f"{at}.scope"),
        client_auth=choice(
            values.get("client_auth"), f"{at}.client_auth", f"{path}.client_auth", ("basic", "body")
        ),
        refresh_token=compile_value(values["refresh_token"], f"{at}.refresh_token"),
        expires=_expiry(values.get("expires"), f"{path}.expires", f"{at}.expires"),
        refresh_early=300.0 if early is None else duration(early, f"{at}.refresh_early"),
    )


def _expiry(raw: object, path: str, at: str) -> Expiry:
    if raw is None:
        return Expiry(parse_path("expires_in", at))
    given = section(raw, path, at)
    where = parse_path(given.get("path", "expires_in"), f"{at}.path")
    written = given.get("format", "seconds")
    if written == "seconds":
        return Expiry(where)
    if written not in ("iso", "epoch", "epoch_ms"):
        raise ConfigError(
            f"must be one of: seconds, iso, epoch, epoch_ms; got {written!r}", f"{at}.format"
        )
    return Expiry(where, TimeFormat.parse(written, f"{at}.format"))
