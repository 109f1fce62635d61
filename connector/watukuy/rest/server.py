"""The REST server: the aiohttp application over a :class:`~watukuy.rest.port.Control`, and
the listener the runner starts on ``rest.listen``."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from watukuy.config.model import RestAuth, RestSettings
from watukuy.options.tls import server_context
from watukuy.rest.auth import Credentials
from watukuy.rest.middleware import BODY_LIMIT, CREDENTIALS, authenticate, errors
from watukuy.rest.port import Control
from watukuy.rest.routes import add_routes
from watukuy.rest.webhooks import WEBHOOKS, serve_webhooks

BODY_LIMIT_BYTES = 1024 * 1024
"""Connector configs are a few KiB; a larger body is refused (413) before it is parsed."""


def build_app(
    control: Control, auth: RestAuth | None = None, *, body_limit: int = BODY_LIMIT_BYTES
) -> web.Application:
    """The application: ``auth`` ``None`` serves without credentials."""
    app = web.Application(
        middlewares=[errors, serve_webhooks, authenticate], client_max_size=body_limit
    )
    app[WEBHOOKS] = control.webhooks
    app[CREDENTIALS] = None if auth is None else Credentials(auth)
    app[BODY_LIMIT] = body_limit
    add_routes(app, control)
    return app


class RestServer:
    """A started listener: ``port`` is the bound one (``rest.listen`` may ask for port 0)."""

    def __init__(self, control: Control, settings: RestSettings) -> None:
        self.settings = settings
        self._runner = web.AppRunner(build_app(control, settings.auth), handle_signals=False)
        self._port: int | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the REST server is not started")
        return self._port

    @property
    def url(self) -> str:
        """The base URL (the listen host; ``0.0.0.0`` and ``::`` are shown as loopback)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.settings.host, self.settings.host)
        host = f"[{host}]" if ":" in host else host
        scheme = "https" if self.settings.tls is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    async def start(self) -> None:
        tls = self.settings.tls
        context = None if tls is None else server_context(tls.cert, tls.key)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, self.settings.host, self.settings.port, ssl_context=context
        )
        try:
            await site.start()
        except BaseException:
            await self._runner.cleanup()
            raise
        self._port = _bound_port(self._runner)

    async def stop(self) -> None:
        await self._runner.cleanup()
        self._port = None


def _bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    raise OSError(socket.EAI_NONAME, "the REST listener has no bound address")


@asynccontextmanager
async def start_rest(control: Control, settings: RestSettings) -> AsyncIterator[RestServer]:
    """Serve the REST API on ``settings`` (``rest.listen``, ``rest.auth``, ``rest.tls``) until
    the block exits."""
    server = RestServer(control, settings)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
