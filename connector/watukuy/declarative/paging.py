"""``paginate``: the pages of one poll (or of one tenant listing). Exactly one of::

    next_token: {path: meta.next, param: cursor}    body value -> query param; stop when it
                                                    is null, absent or ''
    link_header: true                               follow Link: <...>; rel="next"
    page: {param: page, start: 1, size_param: per_page, size: 100}   stop on a short page
    offset: {param: offset, size_param: limit, size: 100}           stop on a short page

Without ``paginate`` a poll is one request. Every page of a poll sends the same request (URL,
query, headers, body, cursor parameter) plus what the paginator places for the page, which
wins over a query or cursor parameter of the same name. A ``Link`` target replaces the URL and
query altogether (only auth is added to it) and must be on the same origin as the request:
credentials are not sent to another host. A token equal to the one just sent ends the poll (a
vendor that repeats itself would otherwise be polled in a loop).

Each kind is an entry of :data:`PAGINATORS`: its parser builds a :class:`Paginator`, which
answers the callers' two questions itself, where a page's position goes in its request
(:meth:`Paginator.place`) and where the next page is (:meth:`Paginator.next`). Callers never
ask which kind they hold.

Pure: a page position goes in, the next position (or ``None``: last page) comes out. Positions
are what the engine stores mid-listing, so a ``Link`` target is kept without its origin (the
host can be tenant data) and, when its path is the request's, as its query only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import unquote_plus

from yarl import URL

from watukuy.core.validation import non_empty_string, non_negative_int, positive_int
from watukuy.declarative.errors import BadBody
from watukuy.declarative.paths import MISSING, Path, parse_path
from watukuy.declarative.values import parse_kind, section
from watukuy.declarative.values import true_flag as _true_flag
from watukuy.http import build_url

__all__ = [
    "PAGINATORS",
    "PageRequest",
    "PageSeen",
    "Paginator",
    "parse_paginate",
]


@dataclass(frozen=True, slots=True)
class PageRequest:
    """A page's request before auth: the URL, its query parameters and the JSON body."""

    url: str
    query: Mapping[str, str] = field(default_factory=dict)
    json: Any = None


@dataclass(frozen=True, slots=True)
class PageSeen:
    """What a page answered: its body, headers and record count; ``url`` the URL it came from
    and ``base`` the request's rendered URL (for a paginator that follows URLs), and
    ``secret_params`` the query parameters auth adds, never stored in a position."""

    body: Any
    headers: Mapping[str, str]
    count: int
    url: URL | None = None
    base: URL | None = None
    secret_params: Collection[str] = ()


class Paginator(Protocol):
    @property
    def follows_urls(self) -> bool:
        """Whether :meth:`next` reads :attr:`PageSeen.url` (the caller resolves it only then)."""

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        """The request of the page at ``position`` (``None``: the first page)."""

    def next(self, position: Any, seen: PageSeen) -> Any:
        """Where the page after the one at ``position`` is, or ``None`` when it was the last."""


@dataclass(frozen=True, slots=True)
class NextToken:
    path: Path
    param: str
    follows_urls: bool = False

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        if position is None:
            return page
        return replace(page, query={**page.query, self.param: str(position)})

    def next(self, position: Any, seen: PageSeen) -> Any:
        token = self.path.find(seen.body)
        if token is MISSING or token is None or token == "" or token == position:
            return None
        if isinstance(token, bool) or not isinstance(token, str | int | float):
            raise BadBody(f"next_token at {self.path.text!r} is not a string or a number")
        return token


@dataclass(frozen=True, slots=True)
class LinkHeader:
    follows_urls: bool = True

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        if position is None:
            return page
        return replace(page, url=str(follow_link(str(position), build_url(page.url))), query={})

    def next(self, position: Any, seen: PageSeen) -> Any:
        if seen.url is None:
            raise ValueError("link_header paging needs the URL the page came from")
        return _next_link(seen.headers, seen.url, seen.base or seen.url, seen.secret_params)


@dataclass(frozen=True, slots=True)
class PageNumber:
    param: str
    start: int
    size_param: str | None
    size: int
    follows_urls: bool = False

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        number = self.start if position is None else position
        return replace(page, query={**page.query, **_sized(self.param, number, self)})

    def next(self, position: Any, seen: PageSeen) -> Any:
        if seen.count < self.size:
            return None
        return (self.start if position is None else int(position)) + 1


@dataclass(frozen=True, slots=True)
class Offset:
    param: str
    size_param: str | None
    size: int
    follows_urls: bool = False

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        offset = 0 if position is None else position
        return replace(page, query={**page.query, **_sized(self.param, offset, self)})

    def next(self, position: Any, seen: PageSeen) -> Any:
        if seen.count < self.size:
            return None
        return (0 if position is None else int(position)) + self.size


def _sized(param: str, value: Any, spec: PageNumber | Offset) -> dict[str, str]:
    out = {param: str(value)}
    if spec.size_param is not None:
        out[spec.size_param] = str(spec.size)
    return out


class OnePage:
    """No ``paginate``: a poll is one request."""

    follows_urls = False

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        return page

    def next(self, position: Any, seen: PageSeen) -> Any:
        return None


ONE_PAGE: Paginator = OnePage()


def _parse_next_token(given: object, path: str, at: str) -> Paginator:
    values = section(given, path, at)
    return NextToken(
        parse_path(values["path"], f"{at}.path"),
        non_empty_string(values["param"], f"{at}.param", "cursor"),
    )


def _parse_link_header(given: object, path: str, at: str) -> Paginator:
    _true_flag(given, at)
    return LinkHeader()


def _parse_page(given: object, path: str, at: str) -> Paginator:
    values = section(given, path, at)
    param, size_param, size = _numbered(values, at, "page")
    start = non_negative_int(values.get("start", 1), f"{at}.start")
    return PageNumber(param=param, start=start, size_param=size_param, size=size)


def _parse_offset(given: object, path: str, at: str) -> Paginator:
    param, size_param, size = _numbered(section(given, path, at), at, "offset")
    return Offset(param=param, size_param=size_param, size=size)


def _numbered(values: Mapping[str, Any], at: str, example: str) -> tuple[str, str | None, int]:
    param = non_empty_string(values["param"], f"{at}.param", example)
    raw_size_param = values.get("size_param")
    size_param = (
        None
        if raw_size_param is None
        else non_empty_string(raw_size_param, f"{at}.size_param", "limit")
    )
    return param, size_param, positive_int(values["size"], f"{at}.size")


PAGINATORS: Mapping[str, Callable[[object, str, str], Paginator]] = {
    "next_token": _parse_next_token,
    "link_header": _parse_link_header,
    "page": _parse_page,
    "offset": _parse_offset,
}
"""Every paginator kind, by its key under ``paginate``: one entry per kind."""


def parse_paginate(raw: object, path: str, where: str) -> Paginator:
    """The ``paginate`` section at ``path`` in the key table, reported at ``where``
    (absent: :data:`ONE_PAGE`)."""
    if raw is None:
        return ONE_PAGE
    return parse_kind(raw, path, where, PAGINATORS)


def follow_link(position: str, url: URL) -> URL:
    """The URL a stored ``Link`` position (``?query`` or ``/path?query``) points at, on the
    origin (and, for a query, the path) of the request ``url``."""
    return url.join(URL(position))


_LINK = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,]+)*)")
_REL = re.compile(r";\s*rel\s*=\s*(?:\"([^\"]*)\"|([^\s;,]+))", re.IGNORECASE)


def _next_link(
    headers: Mapping[str, str], url: URL, base: URL, secret_params: Collection[str]
) -> str | None:
    """The ``rel="next"`` target of the Link headers, as a position; ``None`` if none.

    Parsed by hand (RFC 8288, the common subset: ``<uri>; rel="next"``, several links per
    header, several headers): neither aiohttp nor yarl offers a parser outside a response.
    """
    values = headers.getall("Link", []) if hasattr(headers, "getall") else [headers.get("Link")]
    for value in values:
        if not value:
            continue
        for match in _LINK.finditer(value):
            rels = _REL.search(match.group(2))
            names = (rels.group(1) or rels.group(2) or "") if rels else ""
            if "next" in names.lower().split():
                return _position_of(match.group(1).strip(), url, base, secret_params)
    return None


def _position_of(target: str, url: URL, base: URL, secret_params: Collection[str]) -> str:
    try:
        resolved = url.join(URL(target))
    except (TypeError, ValueError):
        raise BadBody("the Link header's next target is not a URL") from None
    if resolved.origin() != url.origin():
        raise BadBody("the Link header's next target is on another origin; not followed")
    query = "&".join(
        pair
        for pair in resolved.raw_query_string.split("&")
        if pair and unquote_plus(pair.split("=", 1)[0]) not in secret_params
    )
    if resolved.raw_path == base.raw_path:
        return f"?{query}"
    return f"{resolved.raw_path}?{query}" if query else resolved.raw_path
