"""KIP-495's ``/admin/loggers``: log levels at run time, as Kafka Connect 3.7+ serves them.

- ``GET /admin/loggers``: ``{logger: {"level", "last_modified"}}`` for ``root`` and every
  logger whose level is set;
- ``GET /admin/loggers/{logger}``: one of them, 404 for any other;
- ``PUT /admin/loggers/{logger}`` with ``{"level": "DEBUG"}``: the logger and the ones below
  it. ``?scope=worker`` (the default) answers 200 with their names; ``?scope=cluster`` goes
  to every instance through ``<prefix>.configs`` and answers 204, as Connect does.

Two departures from Connect, both toward naming a mistake rather than guessing: an unknown
``scope`` is a 400 (Connect falls back to ``worker``), and a logger name must match
:data:`~watukuy.core.loglevels.LOGGER_NAME`. A body's other fields are ignored, as Connect
ignores them, and never echoed.
"""

from __future__ import annotations

from aiohttp import web

from watukuy.core.loglevels import LOGGER_NAME, check_level
from watukuy.rest import inputs
from watukuy.rest.errors import BadRequest
from watukuy.rest.handling import Handler, json_body, json_response, the_control
from watukuy.rest.port import LOGGER_SCOPES, LoggerScope

__all__ = ["LOGGER_ROUTES"]


def _logger(request: web.Request) -> str:
    name = request.match_info["logger"]
    if not LOGGER_NAME.fullmatch(name):
        raise BadRequest("must match [A-Za-z0-9_$.-]{1,255}", "logger")
    return name


def _scope(request: web.Request) -> LoggerScope:
    """``?scope=``: ``worker`` when absent; either name in any case, as Connect reads it."""
    given = request.query.get("scope", "worker").lower()
    for scope in LOGGER_SCOPES:
        if given == scope:
            return scope
    raise BadRequest(f"must be one of: {', '.join(LOGGER_SCOPES)}", "scope")


async def list_loggers(request: web.Request) -> web.Response:
    return json_response(dict(await the_control(request).loggers.levels()))


async def get_logger(request: web.Request) -> web.Response:
    return json_response(dict(await the_control(request).loggers.level(_logger(request))))


async def set_logger(request: web.Request) -> web.Response:
    name, scope = _logger(request), _scope(request)
    body = inputs.mapping(await json_body(request, required=True), "body")
    level = check_level(body.get("level"))
    changed = await the_control(request).loggers.set_level(name, level, scope)
    if scope == "cluster":
        return web.Response(status=204)
    return json_response(changed)


LOGGERS = "/admin/loggers"

LOGGER_ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", LOGGERS, list_loggers),
    ("GET", LOGGERS + "/{logger}", get_logger),
    ("PUT", LOGGERS + "/{logger}", set_logger),
]
