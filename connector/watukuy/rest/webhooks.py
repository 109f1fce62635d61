"""The webhook routes: ``POST`` on each path a connector's ``webhook`` names (CONTRACT.md,
"Webhooks wake tenants").

Served by a middleware ahead of ``rest.auth``: the paths come and go with the connectors
(a connector added over REST brings its own), which aiohttp's router cannot follow, and a
vendor cannot send our tokens, so the signature is the route's authentication instead (its
spec requires ``verify``, or ``verify: none`` written out). Only a ``POST`` on a webhook path
is served here; anything else goes on to the routes and their auth. The body is read whole
up to the REST body limit (413 above), handed to the control plane, and never logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from aiohttp import web

from watukuy.rest.middleware import error_response

__all__ = ["WEBHOOKS", "WebhookControl", "serve_webhooks"]


class Answer(Protocol):
    @property
    def status(self) -> int: ...

    @property
    def message(self) -> str: ...


class WebhookControl(Protocol):
    """What the webhook routes need of the runner."""

    def paths(self) -> list[str]:
        """Every webhook path served now, for the OpenAPI document."""
        ...

    def handles(self, path: str) -> bool: ...

    def refused(self, path: str, result: str) -> None:
        """Count a webhook refused before it was read (``too_large``)."""
        ...

    async def receive(self, path: str, headers: Mapping[str, str], body: bytes) -> Any:
        """Answer one webhook: an object with ``status`` and ``message``."""
        ...


WEBHOOKS: web.AppKey[WebhookControl] = web.AppKey("webhooks", WebhookControl)


@web.middleware
async def serve_webhooks(request: web.Request, handler: Any) -> web.StreamResponse:
    hooks = request.app[WEBHOOKS]
    if request.method != "POST" or not hooks.handles(request.path):
        response: web.StreamResponse = await handler(request)
        return response
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        hooks.refused(request.path, "too_large")
        raise  # answered 413 by the errors middleware, as on every route
    answer: Answer = await hooks.receive(request.path, request.headers, body)
    if answer.status == 202:
        return web.json_response({}, status=202)
    return error_response(answer.status, answer.message)
