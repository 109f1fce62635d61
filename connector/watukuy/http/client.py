"""The client behind ``ctx.http``, over a transport seam (aiohttp by default).

Two objects, because their lifetimes differ. :class:`HttpClient` lives as long as the engine
and owns the transport (for aiohttp, the one ``ClientSession``: pool, limits, User-Agent). A
:class:`KeyHttp` lives for one poll of one key: it is bound to that key's stored validators,
its poller's budget (``acquire``) and the engine's clock, and it collects what the engine
must persist or act on after ``fetch`` returns (``validators_changed``, ``throttle_until``,
``requests``).

Responses are sorted here so that every ``fetch`` gets the same semantics for free:

- 304 -> :class:`NotModified` (the engine records a poll with no change);
- 429, or 503 with ``Retry-After`` -> :class:`Throttled` (pacing, not an outage);
- any other 5xx -> :class:`VendorError` (an outage, for the circuit breaker);
- timeouts and connection failures -> :class:`VendorUnavailable`;
- everything else, 4xx included, is returned: only ``fetch`` knows whether a 404 means
  "gone" or "misconfigured".
"""

from __future__ import annotations

import asyncio
import hashlib
import json as jsonlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping
from types import TracebackType
from typing import Any, NamedTuple

from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from watukuy.core.errors import ConfigError
from watukuy.core.ratelimit import parse_rate_limit, throttle_until
from watukuy.core.state import Validators
from watukuy.http.errors import (
    NotModified,
    Throttled,
    VendorError,
    VendorUnavailable,
    redact_url,
)
from watukuy.http.http11 import Http11Transport
from watukuy.http.response import Response
from watukuy.http.transport import Request, Transport, TransportError

__all__ = ["HttpClient", "KeyHttp", "Target", "TargetCache", "build_url"]

Acquire = Callable[[], Awaitable[None]]
Clock = Callable[[], float]
Answered = Callable[[str, int | None, float], None]
"""Told of each round trip: method, status (``None``: no answer came), seconds taken."""

_SCHEMES = frozenset({"http", "https"})

DEFAULT_URL_CACHE = 16_384
"""Request targets :class:`HttpClient` remembers (about 1.3 KB each). An idle key asks for the
same URL every poll, so this many keys poll without parsing a URL; beyond it the least
recently used are parsed again (correct, only slower)."""

_REMAINING = ("RateLimit-Remaining", "X-RateLimit-Remaining")


def validator_key(full_url: str | URL) -> str:
    """What validators are stored under: a digest of the full URL, never the URL itself.

    URLs carry partition data (slugs, tenant hosts, sometimes tokens in the query), and
    validators are persisted with the partition state, where partition data must never go.
    """
    return hashlib.sha256(str(full_url).encode()).hexdigest()[:32]


def build_url(url: str, query: Mapping[str, Any] | None = None) -> URL:
    """``url`` with ``query`` appended, the form validators are keyed by.

    ``None`` values are dropped because seed pollers pass ``{"cursor": None}`` on the first
    page and mean "no cursor", not ``cursor=None``. Other values are ``str()``'d. A query
    already in ``url`` is kept and extended; the fragment is dropped (never sent anyway).
    """
    try:
        parsed = URL(url)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid URL ({exc.__class__.__name__})") from None
    if parsed.scheme not in _SCHEMES or not parsed.host:
        # The message must not echo the URL: it may carry a token.
        raise ConfigError("URL must be absolute http(s)://host/...")
    pairs = {key: str(value) for key, value in (query or {}).items() if value is not None}
    return parsed.with_fragment(None).extend_query(pairs)


class Target(NamedTuple):
    """A request target in every form a request needs, computed once per distinct URL."""

    url: URL
    """What aiohttp is given (parsed, so it does not parse it again)."""
    full: str
    """``str(url)``."""
    key: str
    """``validator_key(full)``: what the URL's validators are stored under."""
    redacted: str
    """``redact_url(url)``: what errors carry."""


def make_target(url: str, query: Mapping[str, Any] | None = None) -> Target:
    parsed = build_url(url, query)
    full = str(parsed)
    return Target(parsed, full, validator_key(full), redact_url(parsed))


class TargetCache:
    """A bounded LRU of :class:`Target` by ``(url, query)``; ``size`` 0 disables it.

    The key holds the query values as ``build_url`` sends them (``str()``, ``None`` dropped),
    so ``{"limit": 50}`` and ``{"limit": "50"}`` share an entry, as they share a URL. Invalid
    URLs are not cached: they raise every time.
    """

    def __init__(self, size: int = DEFAULT_URL_CACHE) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ConfigError("url_cache must be an integer >= 0")
        self.size = size
        self._entries: OrderedDict[tuple[Any, ...], Target] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, url: str, query: Mapping[str, Any] | None) -> Target:
        if self.size == 0:
            return make_target(url, query)
        try:
            cache_key: tuple[Any, ...] = (url,)
            if query:
                cache_key += tuple(
                    [(name, str(value)) for name, value in query.items() if value is not None]
                )
            found = self._entries.get(cache_key)
        except TypeError:  # an unhashable url or query name: build_url says what is wrong
            return make_target(url, query)
        if found is not None:
            self.hits += 1
            self._entries.move_to_end(cache_key)
            return found
        self.misses += 1
        target = make_target(url, query)
        self._entries[cache_key] = target
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return target

    def clear(self) -> None:
        self._entries.clear()


class HttpClient:
    """One per engine: the request targets cache, over one :class:`Transport` (the pool)."""

    def __init__(
        self,
        *,
        timeout: float = 30.0,
        limit: int = 100,
        user_agent: str = "watukuy/0.1",
        url_cache: int = DEFAULT_URL_CACHE,
        transport: Transport | None = None,
    ) -> None:
        if timeout <= 0:
            raise ConfigError("timeout must be > 0")
        self.timeout = timeout
        self.limit = limit
        self.user_agent = user_agent
        self.targets = TargetCache(url_cache)
        """Parsed request URLs, shared by every key (see :class:`TargetCache`)."""
        self.transport: Transport = transport or Http11Transport(
            limit=limit, user_agent=user_agent, timeout=timeout
        )

    async def start(self) -> None:
        """Accept requests (again, after a ``close``); the pool itself opens on first use."""
        reopen = getattr(self.transport, "reopen", None)
        if reopen is not None:
            reopen()

    async def close(self) -> None:
        """Close the transport's pooled connections; later requests raise ``RuntimeError``."""
        await self.transport.close()

    async def __aenter__(self) -> HttpClient:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def for_key(
        self,
        *,
        validators: Mapping[str, Validators],
        acquire: Acquire | None,
        now: Clock,
        timeout: float | None = None,
        on_response: Answered | None = None,
    ) -> KeyHttp:
        """A :class:`KeyHttp` for one poll of one key (what ``fetch`` sees as ``ctx.http``)."""
        return KeyHttp(
            self,
            validators=validators,
            acquire=acquire,
            now=now,
            timeout=self.timeout if timeout is None else timeout,
            on_response=on_response,
        )

    def __repr__(self) -> str:
        state = getattr(self.transport, "state", type(self.transport).__name__)
        return f"<HttpClient {state} timeout={self.timeout:g}s limit={self.limit}>"


class KeyHttp:
    """Bound to one poll of one key; what fetch sees as ctx.http."""

    def __init__(
        self,
        client: HttpClient,
        *,
        validators: Mapping[str, Validators],
        acquire: Acquire | None,
        now: Clock,
        timeout: float,
        on_response: Answered | None = None,
    ) -> None:
        if timeout <= 0:
            raise ConfigError("timeout must be > 0")
        self._client = client
        self._on_response = on_response  # told of each round trip (the engine's observers)
        self._validators = dict(validators)
        self._acquire = acquire
        self._now = now
        self._timeout = timeout
        self.validators_changed: dict[str, Validators] = {}
        """New validators by ``validator_key(full URL)``, from 200 GETs; the engine stores them."""
        self.throttle_until: float | None = None
        """Latest time the vendor said the quota is exhausted until (epoch seconds), if any."""
        self.requests = 0
        """Requests sent (attempted) during this poll, failed ones included."""
        self.cut_off_waiting_for_budget = False
        """A request of this poll was cut off (the ``fetch``'s timeout) while it waited for a
        budget's token: the poll was late by this runner's own pacing, not the vendor's."""
        self.deadline: float | None = None
        """The event loop's time at which a timeout around the whole ``fetch`` ends it (set by
        the engine): a request it ends before its own ``timeout`` would needs no timer of its
        own, and two timers per idle poll were 4% of an idle runner's interpreter time."""

    def now(self) -> float:
        """The engine's clock (epoch seconds): what a ``fetch`` judges expiries and waits by."""
        return self._now()

    async def get(
        self,
        url: str,
        *,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        template: str | None = None,
    ) -> Response:
        """A conditional GET: sends the stored validators of the full URL, records new ones.

        ``template`` names the URL in errors (see :meth:`request`); without it they withhold it.
        """
        return await self.request("GET", url, query=query, headers=headers, template=template)

    async def request(
        self,
        method: str,
        url: str,
        *,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        data: Any = None,
        template: str | None = None,
        passthrough: Collection[int] = (),
    ) -> Response:
        """Send one request after taking a token from the budget; see the module docstring.

        ``template`` is the URL as the poller wrote it (``https://{partition.data.host}/x``):
        errors name it instead of the rendered URL, which carries partition data; without a
        template errors withhold the URL (see :mod:`watukuy.http.errors`).
        ``passthrough`` statuses are returned to the caller instead of raised (a declarative
        poller's ``on_status`` decides them itself); quota headers are still read.
        """
        method = method.upper()
        target = self._client.targets.get(url, query)
        send_headers = self._headers_for(method, target, headers)
        if self._acquire is not None:
            try:
                await self._acquire()
            except asyncio.CancelledError:
                self.cut_off_waiting_for_budget = True
                raise
        self.requests += 1
        started = self._now()
        try:
            response = await self._send(
                method, target, send_headers, json=json, data=data, template=template
            )
        except (VendorUnavailable, asyncio.CancelledError):
            # No answer came: the request failed, or was cut off from outside (the fetch's own
            # timeout, which has the same length and may fire first, or the engine stopping).
            if self._on_response is not None:
                self._on_response(method, None, self._now() - started)
            raise
        if self._on_response is not None:
            self._on_response(method, response.status, self._now() - started)
        if response.status in passthrough:
            self._note_quota(response.headers, self._now())
            return response
        return self._sort(method, target, response, template)

    def _headers_for(
        self, method: str, target: Target, headers: Mapping[str, str] | None
    ) -> CIMultiDict[str]:
        """Caller's headers plus the stored validators; an explicit caller value wins."""
        merged: CIMultiDict[str] = CIMultiDict(headers or {})
        stored = self._validators.get(target.key) if method == "GET" else None
        if stored is not None:
            if stored.etag is not None:
                merged.setdefault("If-None-Match", stored.etag)
            if stored.last_modified is not None:
                merged.setdefault("If-Modified-Since", stored.last_modified)
        return merged

    async def _send(
        self,
        method: str,
        target: Target,
        headers: CIMultiDict[str],
        *,
        json: Any,
        data: Any,
        template: str | None,
    ) -> Response:
        """One round trip through the transport, its failures made :class:`VendorUnavailable`.

        ``CancelledError`` is a ``BaseException`` and passes through untouched.
        """
        body = _body_of(headers, json=json, data=data)
        deadline = self.deadline
        bounded = (
            deadline is not None and asyncio.get_running_loop().time() + self._timeout >= deadline
        )
        # The fetch's own timeout ends it first: no timer of its own.
        request = Request(method, target.url, headers, body, None if bounded else self._timeout)
        try:
            raw = await self._client.transport.send(request)
        except TimeoutError as exc:
            reason = f"timed out after {self._timeout:g}s ({exc.__class__.__name__})"
            raise VendorUnavailable(
                url=target.redacted, method=method, reason=reason, template=template
            ) from exc
        except TransportError as exc:
            raise VendorUnavailable(
                url=target.redacted, method=method, reason=exc.reason, template=template
            ) from exc
        return Response(
            status=raw.status,
            headers=raw.headers,
            url=raw.url or target.full,
            body=raw.body,
            method=method,
            charset=raw.charset,
            template=template,
        )

    def _sort(
        self, method: str, target: Target, response: Response, template: str | None
    ) -> Response:
        """Raise what the engine handles itself, return what ``fetch`` decides about."""
        now = self._now()
        self._note_quota(response.headers, now)
        status = response.status
        if status == 304:
            raise NotModified(target.redacted, method, template=template)
        if status in (429, 503):
            until = throttle_until(status, response.headers, now, wall=now)
            if until is not None:
                self._note_throttle(until)
                raise Throttled(
                    until=until,
                    status=status,
                    url=target.redacted,
                    method=method,
                    template=template,
                )
        if status >= 500:
            raise VendorError(status=status, url=target.redacted, method=method, template=template)
        if method == "GET" and status == 200:
            self._note_validators(target.key, response.headers)
        return response

    def _note_quota(self, headers: Mapping[str, str], now: float) -> None:
        """Pace the key when any response says the quota is spent until a future reset."""
        if _quota_left(headers):
            return
        info = parse_rate_limit(headers, now, wall=now)
        if info is None or info.remaining != 0 or info.reset_at is None:
            return
        if info.reset_at > now:
            self._note_throttle(info.reset_at)

    def _note_throttle(self, until: float) -> None:
        if self.throttle_until is None or until > self.throttle_until:
            self.throttle_until = until

    def _note_validators(self, key: str, headers: Mapping[str, str]) -> None:
        etag = headers.get("ETag")
        last_modified = headers.get("Last-Modified")
        if etag is not None or last_modified is not None:
            self.validators_changed[key] = Validators(etag=etag, last_modified=last_modified)

    def __repr__(self) -> str:
        return (
            f"<KeyHttp requests={self.requests} throttle_until={self.throttle_until!r} "
            f"validators_changed={len(self.validators_changed)}>"
        )


def _body_of(headers: CIMultiDict[str], *, json: Any, data: Any) -> bytes | None:
    """The request body as bytes; a ``json`` body also sets its Content-Type."""
    if json is not None:
        headers.setdefault("Content-Type", "application/json")
        return jsonlib.dumps(json).encode()
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    raise TypeError(f"data must be bytes or str, got {type(data).__name__}")


def _quota_left(headers: Mapping[str, str]) -> bool:
    """Whether ``headers`` certainly do not say "quota spent" (``remaining == 0``).

    The fast answer for the common case, so most responses skip the full header parse: no
    combined ``RateLimit`` field, and every ``RateLimit-Remaining`` / ``X-RateLimit-Remaining``
    value (if any) a plain positive integer. Whichever header family ``parse_rate_limit``
    picks, its ``remaining`` is then ``None`` or positive, never 0. Anything else (a combined
    field, a fraction, a quoted or odd value, a plain ``Mapping``) answers ``False``, and the
    headers get the full parse.
    """
    if not isinstance(headers, CIMultiDictProxy | CIMultiDict) or "RateLimit" in headers:
        return False
    for name in _REMAINING:
        for value in headers.getall(name, ()):
            text = value.strip()
            if not (text.isascii() and text.isdigit() and int(text) > 0):
                return False
    return True
