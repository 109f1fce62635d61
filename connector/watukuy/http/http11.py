"""The engine's HTTP/1.1 transport: keep-alive connections, answers parsed by httptools.

Why not aiohttp's client here: an idle runner's work is one conditional GET per key per
interval, mostly answered 304, and aiohttp's request path (its request and response objects,
trace signals, timers, the cookie, redirect and proxy machinery) is the largest part of it.
Here a request is written as one ``bytes`` and its answer is parsed by httptools (llhttp,
Node.js's parser, as uvicorn uses it); what is left is a pool of connections. Measured by
``integration/bench/http_transport.py`` (``RESULTS.md``, "HTTP transports"): a 304 poll
through ``KeyHttp`` costs 96 µs of CPU here against 170 µs on aiohttp one at a time, 45 µs
against 102 µs 32 at a time, loopback's kernel work included.
:class:`~watukuy.http.transport.AiohttpTransport` stays, behind the same seam and the same
contract tests (``tests/http/test_transport_contract.py``).

What it does as the aiohttp session did: at most ``limit`` requests in flight; keep-alive
connections per origin, closed after ``keepalive`` seconds unused; TLS with the default
trust store; ``User-Agent``, ``Accept`` and ``Accept-Encoding: gzip, deflate`` unless the
request sets them; chunked and compressed bodies; up to 10 redirects (a 303, or a 301/302
of a POST, becomes a GET; ``Authorization`` is dropped on another origin); no cookies; no
proxy from the environment. New: a reused connection the server closed before answering
(a keep-alive race) is retried once on a new connection when the method is idempotent.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
import zlib
from collections import deque
from collections.abc import Mapping
from typing import Final, cast

import httptools
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from watukuy.http.transport import RawResponse, Request, TransportError

__all__ = ["Http11Transport"]

MAX_REDIRECTS: Final = 10
KEEPALIVE: Final = 15.0
"""Seconds an unused connection is kept (aiohttp's default)."""

_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
_WBITS: Final = {
    "gzip": 16 + zlib.MAX_WBITS,
    "x-gzip": 16 + zlib.MAX_WBITS,
    "deflate": zlib.MAX_WBITS,
}
_DEFAULTS: Final = (("Accept", "*/*"), ("Accept-Encoding", "gzip, deflate"))

Origin = tuple[str, str, int]
"""Scheme, host and port: which connections a request may reuse."""

Answer = tuple[int, list[tuple[bytes, bytes]], bytes, bool]
"""Status, raw headers, raw body, whether the connection may be reused."""


class _Closed(Exception):
    """The connection closed before the first byte of its answer."""


class _Connection(asyncio.Protocol):
    """One connection: writes a request, parses its answer with httptools' callbacks."""

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[Answer] | None = None
        self._status = 0  # 0 until the final (non-1xx) answer's headers are in
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._received = False
        self._head_only = False
        self.closed = False
        self.idle_since = 0.0

    async def exchange(self, request: bytes, head_only: bool) -> Answer:
        if self.closed or self._transport is None:
            raise _Closed
        self._waiter = asyncio.get_running_loop().create_future()
        self._received = False
        self._head_only = head_only
        self._transport.write(request)
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # create_connection's: a stream
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # nothing asked: a server that talks out of turn
            self.close()
            return
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            # The parser's message may quote the answer: only its kind is told.
            self._fail(TransportError(f"answer unreadable ({exc.__class__.__name__})"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is None or self._waiter.done():
            return
        if self._status and not _delimited(self._headers):  # the body ran to the close
            self._finish(keep_alive=False)
        elif not self._received:
            self._fail(_Closed())
        else:
            self._fail(TransportError("connection failed (closed in the middle of an answer)"))

    # -- httptools' callbacks -----------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._status, self._headers, self._body = 0, [], []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status >= 200:  # a 1xx is followed by the real answer
            self._status = status
            if self._head_only:  # llhttp cannot be told a HEAD's answer has no body
                self._finish(keep_alive=False)

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._status:
            self._finish(keep_alive=self._parser.should_keep_alive())

    def _finish(self, *, keep_alive: bool) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
            waiter.set_result((self._status, self._headers, body, keep_alive))

    def _fail(self, exc: Exception) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


class Http11Transport:
    """The production transport (see the module docstring); opens connections on first use.

    :meth:`close` refuses later requests instead of silently reopening, which catches a
    ``fetch`` still running after the engine shut down.
    """

    def __init__(
        self,
        *,
        limit: int = 100,
        user_agent: str = "watukuy/0.1",
        timeout: float = 30.0,
        keepalive: float = KEEPALIVE,
    ) -> None:
        self.limit = limit
        self.user_agent = user_agent
        self.timeout = timeout
        self.keepalive = keepalive
        self._defaults = (("User-Agent", user_agent), *_DEFAULTS)
        self._idle: dict[Origin, deque[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._slots: asyncio.Semaphore | None = None
        self._tls: ssl.SSLContext | None = None
        self._closed = False

    def reopen(self) -> None:
        self._closed = False

    @property
    def state(self) -> str:
        return "closed" if self._closed else "open" if self._open else "idle"

    async def send(self, request: Request) -> RawResponse:
        if self._closed:
            raise RuntimeError("HttpClient is closed")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        # A ``None`` timeout arms no timer: the caller's own bounds the request.
        async with asyncio.timeout(request.timeout), self._slots:
            return await self._follow(request)

    async def close(self) -> None:
        self._closed = True
        for connection in self._open:
            connection.close()
        self._open.clear()
        self._idle.clear()

    async def _follow(self, request: Request) -> RawResponse:
        """Send ``request``, then each redirect it is answered with."""
        method, url, headers, body = request.method, request.url, request.headers, request.body
        for _ in range(MAX_REDIRECTS + 1):
            status, raw, content, _keep = await self._round_trip(method, url, headers, body)
            answer = CIMultiDictProxy(CIMultiDict([(_text(n), _text(v)) for n, v in raw]))
            location = answer.get("Location") if status in _REDIRECTS else None
            if location is None:
                return RawResponse(
                    status=status,
                    headers=answer,
                    body=_decoded(content, answer.get("Content-Encoding")),
                    url="" if url is request.url else str(url),
                    charset=_charset(answer.get("Content-Type")) if status != 304 else None,
                )
            target = _redirect_target(url, location)
            if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
                method, body = "GET", None
                headers = _without(headers, "content-type", "content-length")
            if target.origin() != url.origin():
                headers = _without(headers, "authorization")
            url = target
        raise TransportError(f"request failed (more than {MAX_REDIRECTS} redirects)")

    async def _round_trip(
        self, method: str, url: URL, headers: Mapping[str, str], body: bytes | None
    ) -> Answer:
        origin = (url.scheme, url.raw_host or "", url.port or 0)
        message = self._message(method, url, headers, body)
        connection, reused = await self._connection(origin)
        try:
            return await self._exchange(origin, connection, message, method)
        except _Closed:
            if not (reused and method in _IDEMPOTENT):
                raise TransportError("connection failed (closed before an answer)") from None
        # A keep-alive race: the server closed the idle connection as the request went out.
        # Sent once more, on a new connection (never a request that may not be repeated).
        connection, _ = await self._connection(origin, pooled=False)
        try:
            return await self._exchange(origin, connection, message, method)
        except _Closed:
            raise TransportError("connection failed (closed before an answer)") from None

    async def _exchange(
        self, origin: Origin, connection: _Connection, message: bytes, method: str
    ) -> Answer:
        """One request on ``connection``, which goes back to the pool if it may be reused."""
        try:
            answer = await connection.exchange(message, head_only=method == "HEAD")
        except BaseException:  # closed, a timeout or a cancel mid-answer: the connection is spent
            self._open.discard(connection)
            connection.close()
            raise
        if answer[3]:
            self._release(origin, connection)
        else:
            self._open.discard(connection)
            connection.close()
        return answer

    async def _connection(self, origin: Origin, *, pooled: bool = True) -> tuple[_Connection, bool]:
        """A pooled connection to ``origin`` (and ``True``), or a new one."""
        idle = self._idle.get(origin) if pooled else None
        now = time.monotonic()
        while idle:
            connection = idle.pop()  # the last used: the likeliest to be open still
            if not connection.closed and now - connection.idle_since < self.keepalive:
                return connection, True
            self._open.discard(connection)
            connection.close()
        scheme, host, port = origin
        if scheme not in ("http", "https"):
            raise TransportError(f"request failed (no HTTP URL: {scheme!r})")
        tls = self._tls_context() if scheme == "https" else None
        try:
            _, connection = await asyncio.get_running_loop().create_connection(
                _Connection, host, port, ssl=tls, server_hostname=host if tls else None
            )
        except OSError as exc:  # refused, unreachable, a name not found, TLS refused
            raise TransportError(f"connection failed ({exc.__class__.__name__})") from exc
        self._open.add(connection)
        return connection, False

    def _release(self, origin: Origin, connection: _Connection) -> None:
        now = time.monotonic()
        connection.idle_since = now
        idle = self._idle.setdefault(origin, deque())
        while idle and (idle[0].closed or now - idle[0].idle_since >= self.keepalive):
            stale = idle.popleft()
            self._open.discard(stale)
            stale.close()
        if self._closed or len(idle) >= self.limit:
            self._open.discard(connection)
            connection.close()
        else:
            idle.append(connection)

    def _message(
        self, method: str, url: URL, headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        """The request line, headers and body as one write."""
        lines = [f"{method} {url.raw_path_qs} HTTP/1.1\r\n"]
        given = set()
        for name, value in headers.items():
            if "\n" in value or "\r" in value or "\n" in name or "\r" in name:
                raise TransportError(f"request failed (a line break in header {name!r})")
            given.add(name.lower())
            lines.append(f"{name}: {value}\r\n")
        if "host" not in given:
            lines.insert(1, f"Host: {url.host_port_subcomponent}\r\n")
        lines.extend(f"{n}: {v}\r\n" for n, v in self._defaults if n.lower() not in given)
        if body is not None and "content-length" not in given:
            lines.append(f"Content-Length: {len(body)}\r\n")
        lines.append("\r\n")
        head = "".join(lines).encode()
        return head + body if body else head

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")  # as aiohttp reads header bytes


def _delimited(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the answer says where its body ends (a length, or chunks)."""
    return any(n.lower() in (b"content-length", b"transfer-encoding") for n, _ in headers)


def _decoded(body: bytes, encoding: str | None) -> bytes:
    if not body or encoding is None:
        return body
    wbits = _WBITS.get(encoding.strip().lower())
    if wbits is None:  # identity, or one we did not ask for: as sent
        return body
    try:
        return zlib.decompress(body, wbits)
    except zlib.error:
        if wbits == zlib.MAX_WBITS:  # "deflate" sent raw, without its zlib wrapper
            try:
                return zlib.decompress(body, -zlib.MAX_WBITS)
            except zlib.error:
                pass
        raise TransportError(f"answer unreadable (a broken {encoding.strip()} body)") from None


def _charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"') or None
    return None


def _redirect_target(url: URL, location: str) -> URL:
    try:
        target = url.join(URL(location))
    except ValueError:
        raise TransportError("request failed (a redirect to an invalid URL)") from None
    if target.scheme not in ("http", "https"):
        raise TransportError("request failed (a redirect to a URL that is not HTTP)")
    return target


def _without(headers: Mapping[str, str], *names: str) -> Mapping[str, str]:
    kept = CIMultiDict(headers)
    for name in names:
        kept.popall(name, None)
    return kept
