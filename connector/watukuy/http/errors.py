"""What a vendor call can end in, named by what the engine does about it.

What the text of these exceptions shows, and why:

- A rendered request is tenant data. Its path carries slugs and account ids, its host may be
  the tenant's own (``acme.vendor.com``), its query and userinfo carry tokens, its headers
  credentials. Exception texts end up in ``last_error`` (the compacted state topic),
  ``inspect()``, logs and DLQ records, where partition data must never go.
- So ``str()`` and ``repr()`` show the method, the URL **template** when the caller gave one
  (``GET https://api.example.com/{partition.data.slug}/items -> 500``: config, not data) and
  the status or reason. The template loses its query, fragment and userinfo too, in case a
  literal key was written into it.
- Without a template the URL is withheld entirely: ``GET <url withheld> -> 500``. Showing
  only scheme and host would not do, since the host can be the tenant's.
- In-process, ``exc.url`` keeps :func:`redact_url` of the URL (scheme, host, port, path) for a
  debugger or a test; it is in neither ``str()`` nor ``repr()`` nor ``args``. Redaction
  happens in the constructors, so even a ``fetch`` that raises these itself with a full URL
  cannot leak through the text.
"""

from __future__ import annotations

import re

from yarl import URL

from watukuy.core.errors import Retriable, ShowsConfigOnly, WatukuyError

__all__ = [
    "ERRORS",
    "WITHHELD",
    "InvalidResponse",
    "NotModified",
    "Throttled",
    "VendorError",
    "VendorUnavailable",
    "redact_url",
    "request_line",
]

WITHHELD = "<url withheld>"
"""What stands for the URL in an error text when no template is known."""

# scheme://user:password@ -> scheme://
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@]*@")


class _Redacted(str):
    """A string :func:`redact_url` returned: redacting it again gives it back unchanged, so
    the client can hand its cached redacted URLs to the exceptions below without a parse."""

    __slots__ = ()


def redact_url(url: str | URL) -> str:
    """``url`` without query string, fragment, user or password (in-process use only: its
    host and path may still be tenant data)."""
    if type(url) is _Redacted:
        return url
    try:
        parsed = url if isinstance(url, URL) else URL(url)
        return _Redacted(parsed.with_query(None).with_fragment(None).with_user(None))
    except (TypeError, ValueError):
        return "<unparseable url>"


def request_line(method: str, template: str | None) -> str:
    """``GET <template>`` (without query, fragment or userinfo), or ``GET <url withheld>``."""
    if not template:
        return f"{method} {WITHHELD}"
    shown = re.split(r"[?#]", template, maxsplit=1)[0]
    shown = _USERINFO.sub(r"\1", shown)
    return f"{method} {shown}"


def _kept(url: str | URL | None) -> str | None:
    return None if url is None else redact_url(url)


class NotModified(WatukuyError, ShowsConfigOnly):
    """304: nothing changed since the validators we sent; the engine records an idle poll."""

    status = 304  # as the other errors with a status: what observers read its kind from

    def __init__(
        self, url: str | URL | None = None, method: str = "GET", *, template: str | None = None
    ) -> None:
        self.url = _kept(url)
        self.method = method
        self.template = template
        super().__init__(f"{request_line(method, template)} -> 304")


class Throttled(Retriable, ShowsConfigOnly):
    """The vendor asked us to slow down (429, or 503 with Retry-After) until ``until``.

    ``until`` is absolute epoch seconds on the clock the :class:`~watukuy.http.KeyHttp` was
    given; the scheduler must not poll the key before it.
    """

    def __init__(
        self,
        *,
        until: float,
        status: int,
        url: str | URL | None = None,
        method: str = "GET",
        template: str | None = None,
    ) -> None:
        self.until = until
        self.status = status
        self.url = _kept(url)
        self.method = method
        self.template = template
        line = request_line(method, template)
        super().__init__(f"{line} -> {status}, throttled until {until:.3f}")


class VendorError(Retriable, ShowsConfigOnly):
    """The vendor answered with an error status (5xx, or any >= 400 via ``raise_for_status``).

    Retriable because most are: a 5xx is an outage the circuit breaker paces, and a ``fetch``
    that considers a 4xx permanent should raise something else.
    """

    def __init__(
        self,
        *,
        status: int,
        url: str | URL | None = None,
        method: str = "GET",
        template: str | None = None,
    ) -> None:
        self.status = status
        self.url = _kept(url)
        self.method = method
        self.template = template
        super().__init__(f"{request_line(method, template)} -> {status}")


class VendorUnavailable(Retriable, ShowsConfigOnly):
    """No usable answer at all: connection refused or dropped, timeout, broken body.

    ``reason`` is the client's or the transport's own words, never a library's message (those
    quote URLs).
    """

    def __init__(
        self,
        *,
        reason: str,
        url: str | URL | None = None,
        method: str = "GET",
        template: str | None = None,
    ) -> None:
        self.url = _kept(url)
        self.method = method
        self.template = template
        self.reason = reason
        super().__init__(f"{request_line(method, template)}: {reason}")


class InvalidResponse(WatukuyError, ShowsConfigOnly):
    """The vendor answered 2xx-ish but the body is not what it claims (malformed JSON, bad
    charset). Not :class:`Retriable` by itself: the engine's circuit and parking decide."""

    def __init__(
        self,
        *,
        reason: str,
        url: str | URL | None = None,
        method: str = "GET",
        template: str | None = None,
    ) -> None:
        self.url = _kept(url)
        self.method = method
        self.template = template
        self.reason = reason
        super().__init__(f"{request_line(method, template)}: {reason}")


ERRORS = (InvalidResponse, NotModified, Throttled, VendorError, VendorUnavailable)
"""The exceptions above: their text shows a URL template at most, never a rendered URL
(each is a :class:`~watukuy.core.errors.ShowsConfigOnly`)."""
