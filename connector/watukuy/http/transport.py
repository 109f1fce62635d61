"""The transport seam under :class:`~watukuy.http.HttpClient`: one request out, one answer in.

Everything the client adds (validators, budgets, rate-limit reading, sorting 304/429/5xx)
sits above this line; below it is only moving bytes. The client's default is
:class:`~watukuy.http.http11.Http11Transport`; :class:`AiohttpTransport` does the same over
aiohttp's client (both pass ``tests/http/test_transport_contract.py``);
:class:`~watukuy.http.scripted.ScriptedTransport` answers from a script, so pollers, auth and
paging are tested without sockets.

A transport raises ``TimeoutError`` when the request took longer than ``request.timeout`` (no
limit of its own when ``None``: its caller bounds it, as a poll's fetch timeout does) and
:class:`TransportError` when there was no usable answer (refused, reset, broken body). Both are
translated into ``VendorUnavailable`` by the client, which knows the redacted URL to report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

if TYPE_CHECKING:  # aiohttp's client is imported where it is used: the default transport is
    # Http11Transport, and aiohttp's import is 0.1 s of a runner's start
    import aiohttp

__all__ = [
    "AiohttpTransport",
    "RawResponse",
    "Request",
    "Transport",
    "TransportError",
    "frozen_headers",
]


class TransportError(Exception):
    """No usable answer: the connection failed or the body could not be read.

    ``reason`` never holds the URL or a header: it is what an operator may read.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the client built it: the URL parsed, the body already bytes."""

    method: str
    url: URL
    headers: Mapping[str, str]
    body: bytes | None = None
    timeout: float | None = 30.0
    """Seconds the whole round trip may take; ``None``: the caller's own timeout bounds it."""


@dataclass(frozen=True, slots=True)
class RawResponse:
    """One answer read in full. ``headers`` are case-insensitive."""

    status: int
    headers: Mapping[str, str]
    body: bytes = b""
    url: str = ""
    charset: str | None = None


@runtime_checkable
class Transport(Protocol):
    """What :class:`~watukuy.http.HttpClient` sends requests through."""

    async def send(self, request: Request) -> RawResponse:
        """Send ``request`` and read its whole answer; see the module docstring for errors."""
        ...

    async def close(self) -> None:
        """Release pooled connections; ``send`` after ``close`` raises ``RuntimeError``."""
        ...


_EMPTY_HEADERS: Mapping[str, str] = CIMultiDictProxy(CIMultiDict())


class AiohttpTransport:
    """A transport over one ``aiohttp.ClientSession`` (pool, limits, User-Agent).

    The session opens on first use; :meth:`close` refuses later requests instead of silently
    reopening, which catches a ``fetch`` still running after the engine shut down.
    """

    def __init__(
        self, *, limit: int = 100, user_agent: str = "watukuy/0.1", timeout: float = 30.0
    ) -> None:
        self.limit = limit
        self.user_agent = user_agent
        self.timeout = timeout
        self._timeouts: dict[float | None, aiohttp.ClientTimeout] = {}
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def reopen(self) -> None:
        self._closed = False

    async def send(self, request: Request) -> RawResponse:
        import aiohttp

        session = self.session()
        try:
            async with session.request(
                request.method,
                request.url,
                headers=request.headers,
                data=request.body,
                timeout=self.client_timeout(request.timeout),
            ) as raw:
                body = await raw.read()
                status = raw.status
                return RawResponse(
                    status=status,
                    headers=raw.headers,
                    url=str(raw.url),
                    body=body,
                    # A 304 has no body: no Content-Type to parse.
                    charset=raw.charset if status != 304 else None,
                )
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise TransportError(f"connection failed ({exc.__class__.__name__})") from exc
        except aiohttp.ClientError as exc:
            # Not chained: some aiohttp errors (redirect loops, bad redirect targets) embed the
            # URL, whose query may carry a token, in their own message.
            raise TransportError(f"request failed ({exc.__class__.__name__})") from None

    async def close(self) -> None:
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    @property
    def state(self) -> str:
        return "closed" if self._closed else "open" if self._session is not None else "idle"

    def session(self) -> aiohttp.ClientSession:
        """The shared session, opened on first use."""
        if self._closed:
            raise RuntimeError("HttpClient is closed")
        if self._session is None:
            import aiohttp

            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.limit),
                # One session serves every tenant: a cookie one tenant's answer sets must never
                # ride along on another tenant's request to the same host.
                cookie_jar=aiohttp.DummyCookieJar(),
                headers={"User-Agent": self.user_agent},
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            )
        return self._session

    def client_timeout(self, total: float | None) -> aiohttp.ClientTimeout:
        """The (immutable, shareable) ``ClientTimeout`` for ``total`` seconds (``None``: no
        limit), made once."""
        found = self._timeouts.get(total)
        if found is None:
            import aiohttp

            if len(self._timeouts) >= 64:  # timeouts come from config: a handful at most
                self._timeouts.clear()
            found = self._timeouts[total] = aiohttp.ClientTimeout(total=total)
        return found


def frozen_headers(headers: Mapping[str, str] | None) -> Mapping[str, str]:
    """Case-insensitive, read-only headers for a :class:`RawResponse` built by hand."""
    if not headers:
        return _EMPTY_HEADERS
    if isinstance(headers, CIMultiDictProxy):
        return headers
    return CIMultiDictProxy(CIMultiDict(headers))
