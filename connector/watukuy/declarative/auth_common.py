"""What every auth kind shares: the credentials a request gets, the kind's protocol, and the
small helpers of token requests. The kinds live in :mod:`.auth` (static ones and OAuth2 client
credentials), :mod:`.oauth_refresh` (each tenant's refresh token) and :mod:`.session`."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from watukuy.declarative.errors import RenderError
from watukuy.declarative.templates import Scope, Template
from watukuy.engine.credentials import Vault
from watukuy.http import InvalidResponse, KeyHttp, Response

__all__ = [
    "ALL_STATUSES",
    "Auth",
    "Compile",
    "Credentials",
    "Send",
    "TokenCache",
    "basic_header",
    "json_or_none",
    "rendered",
]

Compile = Callable[[object, str], Template]
"""Compiles one template value at a config path (the caller decides which names exist)."""

ALL_STATUSES = range(100, 600)
"""Passthrough for the token request: it judges every status itself."""

ERROR_CODE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
"""An OAuth2 ``error`` code fit to show (RFC 6749 5.2 codes are such words)."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """What to add to one request; ``token`` is the OAuth2 token used, for a renewal."""

    headers: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    token: str | None = None


Send = Callable[[Credentials], Awaitable[Response]]
"""Sends the request with these credentials added."""


class Auth(Protocol):
    """An auth kind: how a request is authorised, and renewed when the API refuses it."""

    @property
    def templates(self) -> tuple[Template, ...]: ...

    @property
    def secret_query(self) -> str | None:
        """The query parameter that carries a secret (never stored with a page position)."""

    async def send(
        self, scope: Scope, http: KeyHttp, send: Send, vault: Vault | None = None
    ) -> Response:
        """Send the request authorised; a kind that can renew its credentials does so after a
        401 and sends it once more (as an httpx auth flow would). ``vault``: the runner's
        per-tenant grants, for the kinds that keep them there."""


def basic_header(user: str, password: str) -> str:
    """``Basic base64(user:password)``, UTF-8 (RFC 7617). Two lines of stdlib: aiohttp's
    ``BasicAuth`` is deprecated and its replacement is missing from the aiohttp versions we
    support."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def rendered(template: Template, scope: Scope) -> str:
    text = template.render(scope)
    if text is None or text == "":
        raise RenderError(f"{template.where}: renders nothing")
    return text


async def json_or_none(response: Any) -> Any:
    try:
        return await response.json()
    except InvalidResponse:
        return None


@dataclass(slots=True)
class _Cached:
    token: str
    expires_at: float | None


class TokenCache:
    """OAuth2 tokens in memory by (token URL, client id, scope, secret digest).

    One lock per entry, so partitions sharing a client fetch one token between them instead
    of one each when it expires.
    """

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, ...], _Cached] = {}
        self._locks: dict[tuple[str, ...], asyncio.Lock] = {}

    async def token(
        self,
        key: tuple[str, ...],
        fetch: Callable[[], Awaitable[tuple[str, float | None]]],
        now: Callable[[], float],
        *,
        stale: str | None = None,
    ) -> str:
        """The cached token, or a new one if there is none, it expired, or it is ``stale``
        (refused by the API; another request may already have replaced it)."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            cached = self._tokens.get(key)
            if (
                cached is not None
                and cached.token != stale
                and (cached.expires_at is None or now() < cached.expires_at)
            ):
                return cached.token
            token, expires_in = await fetch()
            expires_at = None if expires_in is None else now() + expires_in - _margin(expires_in)
            self._tokens[key] = _Cached(token, expires_at)
            return token


def _margin(expires_in: float) -> float:
    """Renew a little early, so a token does not expire between the check and the request."""
    return min(30.0, expires_in / 10)
