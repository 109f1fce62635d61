"""Every answer that is not a success is ``{"error_code", "message"}`` JSON, and credentials
are checked before anything else is looked at.

aiohttp's own errors (unknown route, wrong method, body over ``client_max_size``) arrive here
as ``HTTPException`` and are answered in the same shape, never as its HTML pages. An
unexpected exception is logged by type only (its text may carry data a caller sent or a
vendor's answer) and answered as a bare 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from watukuy.core.errors import ConfigError, Fenced, Retriable
from watukuy.rest.auth import Credentials
from watukuy.rest.errors import Conflict, NotFound

log = logging.getLogger("watukuy.rest")

CREDENTIALS: web.AppKey[Credentials | None] = web.AppKey("credentials", Credentials)
BODY_LIMIT: web.AppKey[int] = web.AppKey("body_limit", int)
OPEN_ROUTES = frozenset({("GET", "/health")})
"""Probes reach these without credentials (KIP-1017's ``/health``)."""


class RequestError(Exception):
    """An answer with a status of its own (401, 415) and maybe headers."""

    def __init__(self, status: int, message: str, headers: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = list(headers)


def dumps(value: Any) -> str:
    return json.dumps(value, default=_jsonable, allow_nan=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def error_response(
    status: int, message: str, headers: Iterable[tuple[str, str]] = ()
) -> web.Response:
    extra = CIMultiDict(headers)
    return web.json_response(
        {"error_code": status, "message": message}, status=status, headers=extra, dumps=dumps
    )


@web.middleware
async def errors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except RequestError as exc:
        return error_response(exc.status, exc.message, exc.headers)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _from_aiohttp(request, exc)
    except NotFound as exc:
        return error_response(404, str(exc))
    except Conflict as exc:
        return error_response(409, str(exc))
    except ConfigError as exc:
        return error_response(400, str(exc))
    except (Retriable, Fenced):  # Fenced: the key moved to another runner meanwhile
        log.warning(
            "%s %s: Kafka or the runner is not reachable now", request.method, _route(request)
        )
        return error_response(
            503, "temporarily unavailable: try again shortly", [("Retry-After", "5")]
        )
    except Exception as exc:
        log.error("%s %s failed: %s", request.method, _route(request), type(exc).__name__)
        return error_response(500, "internal error; the runner's log has the error type")


def _from_aiohttp(request: web.Request, exc: web.HTTPException) -> web.Response:
    if exc.status == 404:
        return error_response(404, "unknown route; GET /openapi.json lists the routes")
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        message = f"method {request.method} is not allowed here; allowed: {allowed}"
        return error_response(405, message, [("Allow", allowed)])
    if exc.status == 413:
        limit = request.app[BODY_LIMIT]
        return error_response(413, f"the body is over the limit of {limit} bytes")
    return error_response(exc.status, exc.reason)


def _route(request: web.Request) -> str:
    """The route's template (``/connectors/{name}``): a path may hold a partition key."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "(no route)"


@web.middleware
async def authenticate(request: web.Request, handler: Any) -> web.StreamResponse:
    credentials = request.app[CREDENTIALS]
    if credentials is None or (request.method, _route(request)) in OPEN_ROUTES:
        response: web.StreamResponse = await handler(request)
        return response
    header = request.headers.get("Authorization")
    if not credentials.accepts(header):
        challenges = [("WWW-Authenticate", value) for value in credentials.challenges()]
        if header:
            message = "the credentials are not valid"
        else:
            message = f"credentials are required: send {credentials.usage()}"
        raise RequestError(401, message, challenges)
    response = await handler(request)
    return response
