"""A vendor response whose body has already been read.

The client reads the body inside the request so the connection goes back to the pool at once
(a ``fetch`` that forgets to read or release would otherwise starve the pool), which is why
``json()``/``text()``/``read()`` stay ``async`` only for the familiar aiohttp shape: they never
touch the network.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Mapping
from typing import Any

import msgspec

from watukuy.http.errors import InvalidResponse, VendorError, request_line

__all__ = ["Response"]

_DEFAULT_CHARSET = "utf-8"

# msgspec parses a page of 500 invoices in half the time of :func:`json.loads` (280 against
# 565 µs, 75 KB) and builds the same values, integers beyond 64 bits included (orjson makes
# those floats). What it refuses and the standard parser takes (NaN, a byte order mark, UTF-16,
# a lone surrogate) goes to the standard parser, so every body parses as before.
_decode = msgspec.json.Decoder().decode
_REFUSED = (msgspec.DecodeError, msgspec.ValidationError)


class Response:
    """Status, case-insensitive headers, final URL and the full body of one vendor answer."""

    __slots__ = ("_body", "_charset", "headers", "method", "status", "template", "url")

    def __init__(
        self,
        *,
        status: int,
        headers: Mapping[str, str],
        url: str,
        body: bytes,
        method: str = "GET",
        charset: str | None = None,
        template: str | None = None,
    ) -> None:
        self.status = status
        self.template = template
        """The URL as the poller wrote it, if the caller said: what errors and ``repr`` show."""
        self.headers = headers
        self.url = url
        self.method = method
        self._body = body
        self._charset = charset

    async def read(self) -> bytes:
        """The raw (decompressed) body."""
        return self._body

    async def text(self) -> str:
        """The body decoded with the charset the vendor declared, UTF-8 when it declared none."""
        try:
            return self._body.decode(self._charset or _DEFAULT_CHARSET)
        except (LookupError, UnicodeDecodeError) as exc:
            reason = f"undecodable body ({exc.__class__.__name__})"
            raise InvalidResponse(
                url=self.url, method=self.method, reason=reason, template=self.template
            ) from exc

    async def json(self) -> Any:
        """The body parsed as JSON, whatever the Content-Type says (vendors mislabel it).

        JSON is UTF-8/16/32 by definition, so the bytes are parsed directly. The error names
        where parsing failed but never quotes the body, which may hold personal data.
        """
        try:
            return _decode(self._body)
        except _REFUSED:
            pass
        try:
            return jsonlib.loads(self._body)
        except jsonlib.JSONDecodeError as exc:
            reason = f"malformed JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            raise InvalidResponse(
                url=self.url, method=self.method, reason=reason, template=self.template
            ) from exc
        except UnicodeDecodeError as exc:
            reason = f"malformed JSON (not UTF-8/16/32: {exc.reason})"
            raise InvalidResponse(
                url=self.url, method=self.method, reason=reason, template=self.template
            ) from exc

    def raise_for_status(self) -> None:
        """Raise :class:`VendorError` for a 4xx/5xx, for a ``fetch`` that treats them as faults."""
        if self.status >= 400:
            raise VendorError(
                status=self.status, url=self.url, method=self.method, template=self.template
            )

    @property
    def ok(self) -> bool:
        """``True`` for a status below 400, like aiohttp's ``ClientResponse.ok``."""
        return self.status < 400

    def __repr__(self) -> str:
        # Not the URL: its host and path may be tenant data (see watukuy.http.errors).
        return f"<Response {self.status} {request_line(self.method, self.template)}>"
