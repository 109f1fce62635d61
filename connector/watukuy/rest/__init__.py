"""The Kafka Connect-style REST API.

:func:`start_rest` serves it on ``rest.listen`` over a :class:`Control` (the runner's seam);
:func:`build_app` is the aiohttp application alone. A partition key ``''`` (an unpartitioned
connector's only key) is written ``~`` in paths and queries.

The names are loaded on first use: the control plane imports ``rest.port`` and
``rest.errors`` at a runner's start, which must not wait for aiohttp's server (0.1 s).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watukuy.rest.errors import BadRequest, Conflict, NotFound
    from watukuy.rest.openapi import openapi_document
    from watukuy.rest.port import Control
    from watukuy.rest.server import RestServer, build_app, start_rest

__all__ = [
    "BadRequest",
    "Conflict",
    "Control",
    "NotFound",
    "RestServer",
    "build_app",
    "openapi_document",
    "start_rest",
]

_WHERE = {
    "BadRequest": "errors",
    "Conflict": "errors",
    "NotFound": "errors",
    "openapi_document": "openapi",
    "Control": "port",
    "RestServer": "server",
    "build_app": "server",
    "start_rest": "server",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'watukuy.rest' has no attribute {name!r}")
    return getattr(importlib.import_module(f"watukuy.rest.{module}"), name)
