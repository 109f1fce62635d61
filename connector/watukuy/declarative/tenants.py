"""The ``http`` partition source: the tenants of a poller listed by an endpoint of their own.

    partitions:
      http:
        url: https://api.example.com/tenants
        auth: {bearer: "${env:ADMIN_TOKEN}"}     # bearer | basic | api_key | oauth2, as in request
        records: tenants                         # path of the list in the body; '' = the body
        key: id                                  # path of the partition key in each record
        data: {slug: slug, token: token}         # name -> path; omitted: the whole record
        paginate: {next_token: {path: next, param: page_token}}   # if the endpoint pages
      refresh: 5m

There is no partition or cursor here, so values take no placeholders (``{{``/``}}`` still
write braces). Each refresh opens a client (aiohttp, or the given transport), reads every
page and closes it; OAuth2 tokens are kept between refreshes. A key must be a non-empty
string; a record without it, or without a ``data`` path, fails the refresh (the engine keeps
the previous list and logs the error). Errors name the source (its config path), the method,
the URL without its query, and the status: never a query string, a token or a record.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from watukuy.core.errors import ConfigError, WatukuyError
from watukuy.core.poller import Partition
from watukuy.core.validation import kind
from watukuy.declarative.auth import ALL_STATUSES
from watukuy.declarative.errors import PartitionSourceError
from watukuy.declarative.listings import Walk
from watukuy.declarative.pages import first_request, next_page, send_page
from watukuy.declarative.paging import PageRequest, Paginator, check_body_places, parse_paginate
from watukuy.declarative.paths import MISSING, Path, parse_path
from watukuy.declarative.records import ListAt, Records
from watukuy.declarative.request import Rendered, RequestSpec, parse_request
from watukuy.declarative.templates import Scope, Template, compile_template
from watukuy.declarative.values import section
from watukuy.http import (
    HttpClient,
    InvalidResponse,
    KeyHttp,
    Response,
    Transport,
    VendorUnavailable,
    build_url,
)
from watukuy.http.errors import request_line
from watukuy.options.secrets import Written

__all__ = ["MAX_PAGES", "parse_http_source"]

_TABLE = "partitions.http"
MAX_PAGES = 1000
"""Pages one refresh reads at most: a tenants endpoint that never ends is an error."""

_NO_PARTITION = Scope(partition=Partition(key=""))


def parse_http_source(
    raw: object,
    *,
    where: str,
    transport: Transport | None = None,
    written: Mapping[str, Written] | None = None,
) -> Callable[[], Awaitable[list[dict[str, Any]]]]:
    """A ``partitions`` callable listing ``{"key", "data"}`` from the endpoint ``raw`` describes.

    ``where`` is the config path of the ``http`` mapping (``pollers[0].partitions.http``).
    """
    given = section(raw, _TABLE, where)
    written = written or {}

    def compile_value(value: object, at: str) -> Template:
        return compile_template(
            value,
            at,
            partitioned=False,
            cursor=False,
            allow_placeholders=False,
            written=written.get(at),
        )

    request = parse_request(given, _TABLE, where, compile_value)  # reads its own keys only
    records = ListAt(parse_path(given.get("records", ""), f"{where}.records", allow_empty=True))
    key = parse_path(given["key"], f"{where}.key")
    data = _data_paths(given.get("data"), f"{where}.data")
    pages = parse_paginate(given.get("paginate"), f"{_TABLE}.paginate", f"{where}.paginate")
    check_body_places(pages, request, f"{where}.method")
    try:
        build_url(request.url.text)
    except ConfigError as exc:
        raise ConfigError(str(exc), f"{where}.url") from None
    source = _Source(where, request, records, key, data, pages, transport)
    return source.listing


def _data_paths(raw: object, where: str) -> tuple[tuple[str, Path], ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(f"must be a mapping of names to paths, got {kind(raw)}", where)
    out: list[tuple[str, Path]] = []
    for name, path in raw.items():
        if not isinstance(name, str) or not name:
            raise ConfigError("names must be non-empty strings", f"{where}.{name}")
        out.append((name, parse_path(path, f"{where}.{name}")))
    return tuple(out)


class _Source:
    def __init__(
        self,
        where: str,
        request: RequestSpec,
        records: Records,
        key: Path,
        data: tuple[tuple[str, Path], ...] | None,
        paginate: Paginator,
        transport: Transport | None,
    ) -> None:
        self.where = where
        self.request = request
        self.records = records
        self.key = key
        self.data = data
        self.paginate = paginate
        self.transport = transport
        self.shown = request_line(request.method, request.url.shown)

    async def listing(self) -> list[dict[str, Any]]:
        """Every tenant, all pages read; raises :class:`PartitionSourceError`."""
        timeout = self.request.timeout or 30.0
        # ``async with`` reopens a transport an earlier refresh closed (one given by a test).
        async with HttpClient(transport=self.transport, timeout=timeout, url_cache=0) as client:
            http = client.for_key(validators={}, acquire=None, now=time.time, timeout=timeout)
            try:
                return await self._all_pages(http)
            except PartitionSourceError:
                raise
            except WatukuyError as exc:  # BadBody, PathMissing, OAuth errors: name the source
                raise PartitionSourceError(f"{self.where}: {exc}") from None

    async def _all_pages(self, http: KeyHttp) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        position: Any = None
        walk = Walk()
        for _ in range(MAX_PAGES):
            rendered = self.request.render(_NO_PARTITION)
            page = self.paginate.place(first_request(rendered), position)
            response = await self._send(http, rendered, page)
            body = await self._body(response)
            found = self.records.read(body, self.shown)
            first = len(out)
            out.extend(self._partition(record, first + at) for at, record in enumerate(found))
            following = next_page(
                self.paginate,
                position,
                response=response,
                body=body,
                count=len(found),
                page=page,
                rendered=rendered,
            )
            if following is None:
                return out
            walk.step(position, following, f"{self.where}.paginate")
            position = following
        raise PartitionSourceError(f"{self.where}: more than {MAX_PAGES} pages; not followed")

    async def _send(self, http: KeyHttp, rendered: Rendered, page: PageRequest) -> Response:
        try:
            response = await send_page(
                self.request, http, _NO_PARTITION, rendered, page, ALL_STATUSES
            )
        except VendorUnavailable as exc:
            raise PartitionSourceError(f"{self.where}: {self.shown}: {exc.reason}") from None
        if not 200 <= response.status < 300:
            raise PartitionSourceError(f"{self.where}: {self.shown} -> {response.status}")
        return response

    async def _body(self, response: Response) -> Any:
        try:
            return await response.json()
        except InvalidResponse as exc:
            raise PartitionSourceError(f"{self.where}: {self.shown}: {exc.reason}") from None

    def _partition(self, record: Any, index: int) -> dict[str, Any]:
        key = self.key.find(record)
        if not isinstance(key, str) or not key:
            raise PartitionSourceError(
                f"{self.where}: record {index} has no non-empty string at key {self.key.text!r}"
            )
        if self.data is None:
            return {"key": key, "data": record}
        data: dict[str, Any] = {}
        for name, path in self.data:
            found = path.find(record)
            if found is MISSING:
                raise PartitionSourceError(
                    f"{self.where}: record {index} has no value at data.{name} ({path.text!r})"
                )
            data[name] = found
        return {"key": key, "data": data}
