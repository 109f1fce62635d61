"""Grants handed back to the user's own system over HTTP.

``url`` is a template over ``{partition.key}`` (the tenant) and ``{connector}``, each value
URL-quoted. ``load`` is a GET: 404 is no grant, 200 a JSON body in
:meth:`~watukuy.core.grants.Grant.to_json` form. ``save`` sends that JSON with the configured
method (PUT by default); any 2xx means the user's system holds it durably. Anything else is a
:class:`CredentialsEndpointError` (retriable) naming the method, the status and the URL
*template*: the rendered URL names a tenant and may carry what the template's secrets resolved
to, and a body may echo a token, so neither is ever shown.

Claims are not the endpoint's job: they go to the claim log this store is given (the Kafka
store's claims on a runner, memory otherwise), which this store starts and closes with itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

from watukuy.core.errors import ConfigError, Retriable, ShowsConfigOnly, StateCorrupted
from watukuy.core.grants import Claim, Grant, GrantRef
from watukuy.store.credentials import CredentialStore

if TYPE_CHECKING:  # aiohttp is imported when the store starts: the config imports this
    import aiohttp  # module, and aiohttp took 0.14 s of a runner's first second (issue 42)

__all__ = ["PLACEHOLDERS", "CredentialsEndpointError", "HttpCredentials", "check_url"]

PLACEHOLDERS = ("partition.key", "connector")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


class CredentialsEndpointError(Retriable, ShowsConfigOnly):
    """The user's credentials endpoint did not answer as it should: try again later."""


def check_url(url: str, path: str, shown: str | None = None) -> None:
    """A :class:`ConfigError` at ``path`` unless ``url`` is an http(s) template naming only
    :data:`PLACEHOLDERS`, with ``{partition.key}`` among them (one grant per tenant)."""
    shown = shown if shown is not None else repr(url)
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"must be an http:// or https:// URL, got {shown}", path)
    names = _PLACEHOLDER.findall(url)
    for name in names:
        if name not in PLACEHOLDERS:
            raise ConfigError(
                f"may name only {{partition.key}} and {{connector}}, not {{{name}}}", path
            )
    if "partition.key" not in names:
        raise ConfigError("must name {partition.key}: each tenant's grant has its own URL", path)


class HttpCredentials:
    """``url``: the template; ``claims``: the claim log; ``headers`` and ``bearer``: sent with
    every request (secrets: never shown); ``shown_url``: what errors and ``repr`` show of the
    URL (``[redacted]`` when it came from a secret), by default the template."""

    def __init__(
        self,
        url: str,
        claims: CredentialStore,
        *,
        method: str = "PUT",
        headers: Mapping[str, str] | None = None,
        bearer: str | None = None,
        timeout: float = 30.0,
        shown_url: str | None = None,
    ) -> None:
        self._url = url
        self._claims = claims
        self._method = method.upper()
        self._headers = dict(headers or {})
        if bearer is not None:
            self._headers["Authorization"] = f"Bearer {bearer}"
        self._timeout = timeout
        self._shown = shown_url if shown_url is not None else url
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"HttpCredentials(url={self._shown!r}, method={self._method!r})"

    async def start(self) -> None:
        if self._session is None:
            import aiohttp

            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout)
            )
        await self._claims.start()

    async def load(self, ref: GrantRef) -> Grant | None:
        status, body = await self._request("GET", ref, None)
        if status == 404:
            return None
        if status != 200:
            raise self._error("GET", f"answered {status}")
        if body is None:
            raise self._error("GET", "answered 200 with a body that is not JSON")
        try:
            return Grant.from_json(body)
        except StateCorrupted as exc:  # its text names fields, never values
            raise self._error("GET", f"answered what is not a grant ({exc})") from None

    async def save(self, ref: GrantRef, grant: Grant) -> None:
        status, _ = await self._request(self._method, ref, grant.to_json())
        if not 200 <= status < 300:
            raise self._error(self._method, f"answered {status}")

    async def claim(self, claim: Claim) -> Claim:
        return await self._claims.claim(claim)

    async def claimed(self, ref: GrantRef, serial: int) -> Claim | None:
        return await self._claims.claimed(ref, serial)

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        await self._claims.close()

    def render(self, ref: GrantRef) -> str:
        """The URL of ``ref``'s grant: each placeholder's value URL-quoted (a tenant named
        ``a/b`` is one path segment, ``a%2Fb``)."""
        values = {"partition.key": ref.tenant, "connector": ref.connector}
        return _PLACEHOLDER.sub(lambda m: quote(values[m.group(1)], safe=""), self._url)

    async def _request(self, method: str, ref: GrantRef, body: object) -> tuple[int, object | None]:
        """``(status, JSON body or None)``."""
        if self._session is None:
            raise self._error(method, "cannot be asked: the store is not started")
        import aiohttp  # loaded by start()

        try:
            async with self._session.request(
                method, self.render(ref), json=body, headers=self._headers, allow_redirects=False
            ) as answer:
                if answer.status != 200 or method != "GET":
                    return answer.status, None
                try:
                    return answer.status, await answer.json(content_type=None)
                except ValueError:
                    return answer.status, None
        except (aiohttp.ClientError, TimeoutError) as exc:
            # The library's text may name the rendered URL: its kind alone is shown.
            raise self._error(method, f"failed: {type(exc).__name__}") from None

    def _error(self, method: str, what: str) -> CredentialsEndpointError:
        return CredentialsEndpointError(f"credentials endpoint {method} {self._shown} {what}")
