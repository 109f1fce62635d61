"""What a vendor call can end in, named by what the engine does about it.

Vendor URLs routinely carry credentials in the query string (``?api_key=...``) or userinfo,
and requests carry them in headers. Exceptions end up in logs, inspect output and DLQ
records, so every exception here stores and prints only :func:`redact_url` of the URL
(scheme, host, port, path) and never a header: the redaction happens in the constructors, so
even a ``fetch`` that raises these itself with a full URL cannot leak.
"""

from __future__ import annotations

from yarl import URL

from watukuy.core.errors import Retriable, WatukuyError

__all__ = [
    "InvalidResponse",
    "NotModified",
    "Throttled",
    "VendorError",
    "VendorUnavailable",
    "redact_url",
]


class _Redacted(str):
    """A string :func:`redact_url` returned: redacting it again gives it back unchanged, so
    the client can hand its cached redacted URLs to the exceptions below without a parse."""

    __slots__ = ()


def redact_url(url: str | URL) -> str:
    """``url`` without query string, fragment, user or password: safe to log."""
    if type(url) is _Redacted:
        return url
    try:
        parsed = url if isinstance(url, URL) else URL(url)
        return _Redacted(parsed.with_query(None).with_fragment(None).with_user(None))
    except (TypeError, ValueError):
        return "<unparseable url>"


class NotModified(WatukuyError):
    """304: nothing changed since the validators we sent; the engine records an idle poll."""

    def __init__(self, url: str | URL, method: str = "GET") -> None:
        self.url = redact_url(url)
        self.method = method
        super().__init__(f"{method} {self.url} -> 304")


class Throttled(Retriable):
    """The vendor asked us to slow down (429, or 503 with Retry-After) until ``until``.

    ``until`` is absolute epoch seconds on the clock the :class:`~watukuy.http.KeyHttp` was
    given; the scheduler must not poll the key before it.
    """

    def __init__(self, *, until: float, status: int, url: str | URL, method: str = "GET") -> None:
        self.until = until
        self.status = status
        self.url = redact_url(url)
        self.method = method
        super().__init__(f"{method} {self.url} -> {status}, throttled until {until:.3f}")


class VendorError(Retriable):
    """The vendor answered with an error status (5xx, or any >= 400 via ``raise_for_status``).

    Retriable because most are: a 5xx is an outage the circuit breaker paces, and a ``fetch``
    that considers a 4xx permanent should raise something else.
    """

    def __init__(self, *, status: int, url: str | URL, method: str = "GET") -> None:
        self.status = status
        self.url = redact_url(url)
        self.method = method
        super().__init__(f"{method} {self.url} -> {status}")


class VendorUnavailable(Retriable):
    """No usable answer at all: connection refused or dropped, timeout, broken body."""

    def __init__(self, *, url: str | URL, reason: str, method: str = "GET") -> None:
        self.url = redact_url(url)
        self.method = method
        self.reason = reason
        super().__init__(f"{method} {self.url}: {reason}")


class InvalidResponse(WatukuyError):
    """The vendor answered 2xx-ish but the body is not what it claims (malformed JSON, bad
    charset). Not :class:`Retriable` by itself: the engine's circuit and parking decide."""

    def __init__(self, *, url: str | URL, reason: str, method: str = "GET") -> None:
        self.url = redact_url(url)
        self.method = method
        self.reason = reason
        super().__init__(f"{method} {self.url}: {reason}")
