"""``paginate``: the pages of one poll (or of one tenant listing). Exactly one of::

    next_token: {path: meta.next, param: cursor}    body value -> query param (or body: a
                                                    JSON body path); stop when it is null,
                                                    absent or ''
    next_url: {path: links.next}                    a URL in the body, absolute or relative
    link_header: true                               follow Link: <...>; rel="next"
    page: {param: page, start: 1, size_param: per_page, size: 100}   stop on a short page
    offset: {param: offset, size_param: limit, size: 100}           stop on a short page

and beside it ``stop:``, a filter on the page's body (the grammar of ``transform.filter``):
a page it matches is the last. ``page`` and ``offset`` may place their values in the JSON
body (``body:``, ``size_body:``) instead of the query.

Without ``paginate`` a poll is one request. Every page of a poll sends the same request (URL,
query, headers, body, cursor parameter) plus what the paginator places for the page, which
wins over a query or cursor parameter of the same name. A next URL (``next_url``, ``Link``)
replaces the URL and query altogether (only auth is added to it) and must be on the same
origin as the request: credentials are not sent to another host.

Each kind is an entry of :data:`PAGINATORS`: its parser builds a :class:`Paginator`, which
answers the callers' two questions itself, where a page's position goes in its request
(:meth:`Paginator.place`) and where the next page is (:meth:`Paginator.next`). Callers never
ask which kind they hold.

Pure: a page position goes in, the next position (or ``None``: last page) comes out. Positions
are what the engine stores mid-listing, so a ``Link`` target is kept without its origin (the
host can be tenant data) and, when its path is the request's, as its query only; a
``next_url`` target is a :class:`FollowUrl`, which the poll never stores
(:mod:`watukuy.declarative.listings`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import unquote_plus

from yarl import URL

from watukuy.core.errors import ConfigError
from watukuy.core.filters import Filter, compile_filter
from watukuy.core.paths import KeyPath, parse_key_path, put
from watukuy.core.validation import non_empty_string, non_negative_int, positive_int
from watukuy.declarative.errors import BadBody, RenderError
from watukuy.declarative.paths import MISSING, Path, parse_path
from watukuy.declarative.values import parse_kind, section
from watukuy.declarative.values import true_flag as _true_flag
from watukuy.http import build_url

__all__ = [
    "NOWHERE",
    "PAGINATORS",
    "FollowUrl",
    "PageRequest",
    "PageSeen",
    "Paginator",
    "Place",
    "check_body_places",
    "parse_paginate",
    "parse_place",
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

    @property
    def places_body(self) -> str | None:
        """The config path of a value it places in the JSON body (``None``: it places none),
        which a request without a body (a GET) cannot take."""

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        """The request of the page at ``position`` (``None``: the first page)."""

    def next(self, position: Any, seen: PageSeen) -> Any:
        """Where the page after the one at ``position`` is, or ``None`` when it was the last."""


class PlacesBody(Protocol):
    @property
    def places_body(self) -> str | None:
        """The config path of a value placed in the JSON body (``None``: none)."""


@dataclass(frozen=True, slots=True)
class FollowUrl:
    """A next page's whole URL (from ``next_url``): followed, never stored."""

    url: str


@dataclass(frozen=True, slots=True)
class Place:
    """Where a value goes in a page's request: a query parameter, or a path in the JSON body
    (``where``: that key's config path, for errors)."""

    param: str | None
    body: KeyPath | None
    where: str

    def into(self, page: PageRequest, value: Any) -> PageRequest:
        if self.param is not None:
            return replace(page, query={**page.query, self.param: str(value)})
        if self.body is None:
            return page
        try:
            return replace(page, json=put(page.json, self.body, value))
        except ValueError as exc:
            raise RenderError(f"{self.where}: {exc}") from None


NOWHERE = Place(None, None, "")


@dataclass(frozen=True, slots=True)
class NextToken:
    path: Path
    place_token: Place
    follows_urls: bool = False

    @property
    def places_body(self) -> str | None:
        return self.place_token.where if self.place_token.body is not None else None

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        return page if position is None else self.place_token.into(page, position)

    def next(self, position: Any, seen: PageSeen) -> Any:
        token = self.path.find(seen.body)
        if token is MISSING or token is None or token == "":
            return None
        if isinstance(token, bool) or not isinstance(token, str | int | float):
            raise BadBody(f"next_token at {self.path.text!r} is not a string or a number")
        return token


@dataclass(frozen=True, slots=True)
class NextUrl:
    path: Path
    follows_urls: bool = True
    places_body: str | None = None

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        if position is None:
            return page
        if not isinstance(position, FollowUrl):
            raise ValueError("next_url paging follows FollowUrl positions only")
        return replace(page, url=position.url, query={})

    def next(self, position: Any, seen: PageSeen) -> Any:
        found = self.path.find(seen.body)
        if found is MISSING or found is None or found == "":
            return None
        if not isinstance(found, str):
            raise BadBody(f"next_url at {self.path.text!r} is not a string")
        if seen.url is None:
            raise ValueError("next_url paging needs the URL the page came from")
        try:
            target = seen.url.join(URL(found.strip()))
        except (TypeError, ValueError):
            raise BadBody(f"next_url at {self.path.text!r} is not a URL") from None
        if target.origin() != seen.url.origin():
            raise BadBody(f"next_url at {self.path.text!r} is on another origin; not followed")
        return FollowUrl(str(target.with_fragment(None)))


@dataclass(frozen=True, slots=True)
class LinkHeader:
    follows_urls: bool = True
    places_body: str | None = None

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
    place_number: Place
    start: int
    place_size: Place
    size: int
    follows_urls: bool = False

    @property
    def places_body(self) -> str | None:
        return _body_of(self.place_number, self.place_size)

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        number = self.start if position is None else position
        return self.place_size.into(self.place_number.into(page, number), self.size)

    def next(self, position: Any, seen: PageSeen) -> Any:
        if seen.count < self.size:
            return None
        return (self.start if position is None else int(position)) + 1


@dataclass(frozen=True, slots=True)
class Offset:
    place_offset: Place
    place_size: Place
    size: int
    follows_urls: bool = False

    @property
    def places_body(self) -> str | None:
        return _body_of(self.place_offset, self.place_size)

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        offset = 0 if position is None else position
        return self.place_size.into(self.place_offset.into(page, offset), self.size)

    def next(self, position: Any, seen: PageSeen) -> Any:
        if seen.count < self.size:
            return None
        return (0 if position is None else int(position)) + self.size


def _body_of(*places: Place) -> str | None:
    return next((p.where for p in places if p.body is not None), None)


@dataclass(frozen=True, slots=True)
class Stopping:
    """Any kind, and ``stop``: a page whose body matches it is the last."""

    inner: Paginator
    stop: Filter

    @property
    def follows_urls(self) -> bool:
        return self.inner.follows_urls

    @property
    def places_body(self) -> str | None:
        return self.inner.places_body

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        return self.inner.place(page, position)

    def next(self, position: Any, seen: PageSeen) -> Any:
        return None if self.stop(seen.body) else self.inner.next(position, seen)


class OnePage:
    """No ``paginate``: a poll is one request."""

    follows_urls = False
    places_body = None

    def place(self, page: PageRequest, position: Any) -> PageRequest:
        return page

    def next(self, position: Any, seen: PageSeen) -> Any:
        return None


ONE_PAGE: Paginator = OnePage()


def parse_place(
    values: Mapping[str, Any], at: str, param: str, body: str, example: str, *, required: bool
) -> Place:
    """Exactly one of the query parameter ``param`` and the body path ``body`` (or neither,
    unless ``required``)."""
    given = [name for name in (param, body) if name in values]
    if len(given) > 1 or (required and not given):
        found = f"; found {' and '.join(given)}" if given else ""
        raise ConfigError(f"set exactly one of: {param}, {body}{found}", at)
    if param in values:
        return Place(non_empty_string(values[param], f"{at}.{param}", example), None, "")
    if body in values:
        where = f"{at}.{body}"
        return Place(None, parse_key_path(values[body], where), where)
    return NOWHERE


def _parse_next_token(given: object, path: str, at: str) -> Paginator:
    values = section(given, path, at)
    place = parse_place(values, at, "param", "body", "cursor", required=True)
    return NextToken(parse_path(values["path"], f"{at}.path"), place)


def _parse_next_url(given: object, path: str, at: str) -> Paginator:
    values = section(given, path, at)
    return NextUrl(parse_path(values["path"], f"{at}.path"))


def _parse_link_header(given: object, path: str, at: str) -> Paginator:
    _true_flag(given, at)
    return LinkHeader()


def _parse_page(given: object, path: str, at: str) -> Paginator:
    values = section(given, path, at)
    number = parse_place(values, at, "param", "body", "page", required=True)
    start = non_negative_int(values.get("start", 1), f"{at}.start")
    size = parse_place(values, at, "size_param", "size_body", "per_page", required=False)
    return PageNumber(number, start, size, positive_int(values["size"], f"{at}.size"))


def _parse_offset(given: object, path: str, at: str) -> Paginator:
    values = section(given, path, at)
    offset = parse_place(values, at, "param", "body", "offset", required=True)
    size = parse_place(values, at, "size_param", "size_body", "limit", required=False)
    return Offset(offset, size, positive_int(values["size"], f"{at}.size"))


PAGINATORS: Mapping[str, Callable[[object, str, str], Paginator]] = {
    "next_token": _parse_next_token,
    "next_url": _parse_next_url,
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
    paginator = parse_kind(raw, path, where, PAGINATORS)
    stop = raw.get("stop") if isinstance(raw, Mapping) else None
    if stop is None:
        return paginator
    return Stopping(paginator, compile_filter(stop, f"{where}.stop"))


def check_body_places(paginate: PlacesBody, request: Any, where: str) -> None:
    """A paginator (or a cursor) that places values in the JSON body needs a request that
    sends one."""
    placed = paginate.places_body
    if placed is not None and request.method != "POST":
        raise ConfigError(
            f"{placed} places the page in the JSON body: set request.method: POST", where
        )


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
