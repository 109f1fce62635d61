"""What every route handler shares, whichever module serves it: the control seam on the app,
JSON answers and the JSON body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from watukuy.rest import inputs
from watukuy.rest.errors import BadRequest
from watukuy.rest.middleware import RequestError, dumps
from watukuy.rest.port import Control, JsonValue

__all__ = ["CONTROL", "Handler", "json_body", "json_response", "the_control"]

CONTROL: web.AppKey[Control] = web.AppKey("control", Control)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def json_response(
    value: JsonValue, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(value, status=status, headers=headers, dumps=dumps)


def the_control(request: web.Request) -> Control:
    return request.app[CONTROL]


def _is_json(content_type: str) -> bool:
    kind, _, subtype = content_type.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


async def json_body(request: web.Request, *, required: bool) -> JsonValue | None:
    """The JSON body: 415 unless ``application/json`` (or ``+json``), 413 over the limit,
    400 if it does not parse; ``None`` when there is none and none is required."""
    if request.body_exists:
        if not _is_json(request.content_type):
            raise RequestError(415, "the body must be JSON: send Content-Type: application/json")
        raw = await request.read()
        if raw.strip():
            return inputs.parse_json(raw)
    if required:
        raise BadRequest("is required: a JSON object", "body")
    return None
