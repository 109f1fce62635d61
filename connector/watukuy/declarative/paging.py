"""``paginate``: the pages of one poll. Exactly one of::

    next_token: {path: meta.next, param: cursor}    body value -> query param; stop when it
                                                    is null, absent or ''
    link_header: true                               follow Link: <...>; rel="next"
    page: {param: page, start: 1, size_param: per_page, size: 100}   stop on a short page
    offset: {param: offset, size_param: limit, size: 100}           stop on a short page

Without ``paginate`` a poll is one request. Every page of a poll sends the same request (URL,
query, headers, body, cursor parameter) plus the page's parameter, which wins over a query or
cursor parameter of the same name. A ``Link`` target replaces the URL and query altogether
(only auth is added to it) and must be on the same origin as the request: credentials are not
sent to another host. A token equal to the one just sent ends the poll (a vendor that repeats
itself would otherwise be polled in a loop).

Pure: a page position goes in, the next position (or ``None``: last page) comes out. Positions
are what the engine stores mid-listing, so a ``Link`` target is kept without its origin (the
host can be tenant data) and, when its path is the request's, as its query only.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from yarl import URL

from watukuy.core.validation import non_empty_string, non_negative_int, positive_int
from watukuy.declarative.errors import BadBody
from watukuy.declarative.paths import MISSING, Path, parse_path
from watukuy.declarative.values import one_of, section
from watukuy.declarative.values import true_flag as _true_flag

__all__ = [
    "LinkHeader",
    "NextToken",
    "Offset",
    "PageNumber",
    "Paginate",
    "follow_link",
    "next_position",
    "page_query",
    "parse_paginate",
]


@dataclass(frozen=True, slots=True)
class NextToken:
    path: Path
    param: str


@dataclass(frozen=True, slots=True)
class LinkHeader:
    pass


@dataclass(frozen=True, slots=True)
class PageNumber:
    param: str
    start: int
    size_param: str | None
    size: int


@dataclass(frozen=True, slots=True)
class Offset:
    param: str
    size_param: str | None
    size: int


Paginate = NextToken | LinkHeader | PageNumber | Offset


def parse_paginate(raw: object, path: str, where: str) -> Paginate:
    """The ``paginate`` section at ``path`` in the key table, reported at ``where``."""
    kind, given = one_of(raw, path, where)
    at, sub = f"{where}.{kind}", f"{path}.{kind}"
    if kind == "link_header":
        _true_flag(given, at)
        return LinkHeader()
    values = section(given, sub, at)
    if kind == "next_token":
        return NextToken(
            parse_path(values["path"], f"{at}.path"),
            non_empty_string(values["param"], f"{at}.param", "cursor"),
        )
    param = non_empty_string(values["param"], f"{at}.param", kind)
    raw_size_param = values.get("size_param")
    size_param = (
        None
        if raw_size_param is None
        else non_empty_string(raw_size_param, f"{at}.size_param", "limit")
    )
    size = positive_int(values["size"], f"{at}.size")
    if kind == "page":
        start = non_negative_int(values.get("start", 1), f"{at}.start")
        return PageNumber(param=param, start=start, size_param=size_param, size=size)
    return Offset(param=param, size_param=size_param, size=size)


def page_query(spec: Paginate | None, position: Any) -> dict[str, str]:
    """The query parameters of the page at ``position`` (``None``: the first page)."""
    if isinstance(spec, NextToken):
        return {} if position is None else {spec.param: str(position)}
    if isinstance(spec, PageNumber | Offset):
        first = spec.start if isinstance(spec, PageNumber) else 0
        out = {spec.param: str(first if position is None else position)}
        if spec.size_param is not None:
            out[spec.size_param] = str(spec.size)
        return out
    return {}


def next_position(
    spec: Paginate | None,
    position: Any,
    *,
    body: Any,
    headers: Mapping[str, str],
    count: int,
    url: URL | None = None,
    base: URL | None = None,
    secret_params: Collection[str] = (),
) -> Any:
    """Where the next page is, or ``None`` when this page (at ``position``, ``count``
    records, answered from ``url``) was the last.

    For ``link_header``: a relative target resolves against ``url``; it is stored as its query
    alone when its path is that of ``base`` (the rendered request URL, default ``url``), else
    as path and query. ``secret_params`` (an API key's query parameter) are dropped from it:
    auth adds them to every request."""
    if spec is None or (count == 0 and not isinstance(spec, NextToken | LinkHeader)):
        return None
    if isinstance(spec, NextToken):
        token = spec.path.find(body)
        if token is MISSING or token is None or token == "" or token == position:
            return None
        if isinstance(token, bool) or not isinstance(token, str | int | float):
            raise BadBody(f"next_token at {spec.path.text!r} is not a string or a number")
        return token
    if isinstance(spec, LinkHeader):
        if url is None:
            raise ValueError("link_header paging needs the URL the page came from")
        return _next_link(headers, url, base or url, secret_params)
    if count < spec.size:
        return None
    if isinstance(spec, PageNumber):
        return (spec.start if position is None else int(position)) + 1
    return (0 if position is None else int(position)) + spec.size


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
